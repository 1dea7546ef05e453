"""The admin for owners (staff) and moderators (superusers).

Owners see and change only their own agents and personas; moderators see everyone's, may
delist any persona and edit the verb->skill map, but never change what an owner authored.
Who sees what comes from personas.selectors; every write goes through personas.services
(the forms rehearse the same call in clean(), see personas.forms). Every state-changing
request counts against the owner mutation budget shared with the API (S9-RL-3).

A module per record family, each registering its own pages: `agents`, `personas`, `proposals`
(the diff page), `audit`, `skills` (the verb->skill map), `addresses`, `surfaces` and
`identities` (owner identities and organization domains), `card_import` (a persona from an
A2A agent card, a page of the personas'); `bases` holds what they share.
Django's autodiscovery imports this package, so it imports each module; callers import a class
from its module, not from here.
"""

from personas.admin import (  # noqa: F401  (each module registers its pages)
    addresses,
    agents,
    audit,
    identities,
    personas,
    proposals,
    skills,
    surfaces,
)
