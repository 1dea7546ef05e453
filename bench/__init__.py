"""`make bench`: Virgo's hot paths measured beside the a2a-sdk card route and nginx (issue 7)."""
