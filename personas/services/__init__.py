"""Every write to owners' agents and personas, one function per operation.

The admin, the API, the CLI and Celery tasks all call these; none writes the models directly.
Each function validates before it saves, runs in one transaction, and queues follow-up work
with transaction.on_commit so a task never sees uncommitted state.

Callers import from here; the functions live in a module per record family, each importing only
the ones before it in this list: `derivation` (what a persona is: its skills and composition),
`validation` (what a write must pass), `addresses`, `generations` (opening, diffing and settling
a persona's generations), `status_list` (the revocation status list's bits and version),
`revocation`, `identities`, `organizations` (proven domains), `skills` (the verb->skill map),
`agents`, `discoverability`, `personas` and `proposals` (the owner's decision on a held
change). No module of the package imports this one.
"""

from personas.services.addresses import address_register, address_register_first, resolve_address
from personas.services.agents import agent_create, agent_delete, agent_update
from personas.services.derivation import (
    SkillMap,
    composition_hash,
    composition_of,
    current_skill_map,
    derive_skills,
    skill_map_revision,
)
from personas.services.discoverability import persona_set_discoverable
from personas.services.generations import (
    FAN_OUT_SKILL_MAP,
    SETTLE_PERSONA,
    grant_diff,
    settle_persona_batch,
)
from personas.services.identities import (
    OWNER_FIELDS,
    Admission,
    NotAdmitted,
    identity_proven,
    identity_signin,
    linked_user,
    owner_identity_update,
)
from personas.services.organizations import (
    INSTALLATION,
    normalise_domain,
    organization_approve,
    organization_claim,
    organization_lapsed,
    organization_proven,
    organization_remove,
    organization_share,
)
from personas.services.personas import (
    GRANT_FIELDS,
    PERSONA_FIELDS,
    PersonaChange,
    StaleProposal,
    persona_create,
    persona_delete,
    persona_draft,
    persona_submit,
    persona_update,
)
from personas.services.proposals import (
    proposal_approve,
    proposal_next_generation,
    proposal_reject,
)
from personas.services.revocation import (
    REVOCATION_REASON_LIMIT,
    Revocation,
    persona_purge,
    persona_revoke,
)
from personas.services.skills import skill_delete, skill_save
from personas.services.status_list import status_list_changed
from personas.services.validation import User, validate_grant, validate_scope

__all__ = [
    "FAN_OUT_SKILL_MAP",
    "GRANT_FIELDS",
    "INSTALLATION",
    "OWNER_FIELDS",
    "PERSONA_FIELDS",
    "REVOCATION_REASON_LIMIT",
    "SETTLE_PERSONA",
    "Admission",
    "NotAdmitted",
    "PersonaChange",
    "Revocation",
    "SkillMap",
    "StaleProposal",
    "User",
    "address_register",
    "address_register_first",
    "agent_create",
    "agent_delete",
    "agent_update",
    "composition_hash",
    "composition_of",
    "current_skill_map",
    "derive_skills",
    "grant_diff",
    "identity_proven",
    "identity_signin",
    "linked_user",
    "normalise_domain",
    "organization_approve",
    "organization_claim",
    "organization_lapsed",
    "organization_proven",
    "organization_remove",
    "organization_share",
    "owner_identity_update",
    "persona_create",
    "persona_delete",
    "persona_draft",
    "persona_purge",
    "persona_revoke",
    "persona_set_discoverable",
    "persona_submit",
    "persona_update",
    "proposal_approve",
    "proposal_next_generation",
    "proposal_reject",
    "resolve_address",
    "settle_persona_batch",
    "skill_delete",
    "skill_map_revision",
    "skill_save",
    "status_list_changed",
    "validate_grant",
    "validate_scope",
]
