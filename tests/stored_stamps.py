"""Putting given bytes in place as a generation's stored stamp, for tests of what reads them.

A generation's stamp hash is frozen once set and its stored stamp never changes, so a test that
wants the boot checks or the runtime to meet a bad stamp *as stored* (what a faulty factory would
have left) makes the generation again, same number and composition, with those bytes as its
stamp row and its file.
"""

from pathlib import Path

from personas.models import Generation, Persona
from stamps.models import CapabilityStamp
from stamps.storage import stamp_path
from virgo.canonical import composition_hash, sha256_hex


def store_as_stamp(persona: Persona, data: bytes) -> Path:
    """Make `data` the stored stamp of the persona's current generation, row and file alike."""
    generation = Generation.objects.get(persona=persona, number=persona.generation)
    kept = {
        "number": generation.number,
        "composition": generation.composition,
        "base_composition_hash": generation.base_composition_hash,
    }
    generation.delete()
    digest = sha256_hex(data)
    remade = Generation.objects.create(
        persona=persona,
        standing=True,
        stamp_hash=digest,
        composition_hash=composition_hash(
            base_composition_hash=kept["base_composition_hash"], stamp_hash=digest
        ),
        **kept,
    )
    CapabilityStamp.objects.create(
        generation=remade,
        persona_uuid=persona.uuid,
        generation_number=remade.number,
        stamp_hash=digest,
        body=data,
    )
    path = stamp_path(persona.uuid, remade.number)
    path.write_bytes(data)
    return path


def record_not_standing(generation: Generation, reason: str) -> None:
    """Record the generation as not standing for `reason`, as a rebuild that failed would; its
    stored stamp stays its stamp (the hashes and digest are set once, VX-SEC-8)."""
    from stamps.services import _record, _set_outcome

    _set_outcome(
        generation,
        standing=False,
        reasons=[reason],
        stamp_hash=generation.stamp_hash,
        composition_hash=generation.composition_hash,
        grant_digest=generation.grant_digest,
        grant_definition=generation.grant_definition,
    )
    _record(generation)


def standing_without_stored_stamp(persona: Persona) -> Path:
    """The persona's current generation remade as standing with no stored stamp (a database
    edited behind every guard), its stamp file left in place; the file's path."""
    generation = persona.generations.get(number=persona.generation)
    path = stamp_path(persona.uuid, persona.generation)
    generation.delete()
    Generation.objects.create(
        persona=persona,
        number=persona.generation,
        composition=generation.composition,
        base_composition_hash=generation.base_composition_hash,
        standing=True,
        stamp_hash=sha256_hex(path.read_bytes()),
    )
    return path
