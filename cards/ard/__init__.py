"""Virgo as an Agentic Resource Discovery (ARD v0.9) registry of its listed personas.

`entries` turns personas into ARD catalog entries (URN, trust manifest), `matching` says which
personas a query matches and how relevant each is, `facets` counts explore's facets in the
database, `requests` reads and bounds what a client sends, `paging` signs page tokens, and
`views` is the thin authenticated HTTP layer
(POST /api/ard/search, POST /api/ard/explore, GET /api/ard/agents). The public catalog that
points at it is cards.catalog. Decisions 216 to 221 and 240 to 242 say why it is shaped so.
"""
