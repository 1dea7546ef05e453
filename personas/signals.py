"""What the records announce about persona rows written without a model signal of their own.

A queryset update or a bulk write sends no post_save, so whoever writes persona rows that way
(the batched recompute here, a stamp's outcome, a quarantine) sends `personas_written` with the
personas' `uuids`, inside the writing transaction; `after_commit=True` asks for the same news
once more after it commits. The cards app moves its card tokens on it as on post_save
(cards.apps): records and producers say what changed, never whose cache it concerns.
"""

from django.dispatch import Signal

personas_written = Signal()

# A persona or some of its generations were revoked (personas.services.persona_revoke), sent
# inside the revoking transaction with `persona` and the revoked generations' `stamp_hashes`:
# the runtime cancels what waits on them and retires what was learned under them.
persona_revoked = Signal()
