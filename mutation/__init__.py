"""`make mutation`: mutation testing of the enforcement code with mutmut 3 (docs/mutation.md)."""
