"""The second `make test` run is on PostgreSQL, with schema and data migrations applied."""

import pytest
from django.db import DataError, connection, transaction

from cards.publishing import publish_card
from personas.models import Skill
from tests.factories import make_agent, make_owner, make_persona
from virgo.bulk import update_each

pytestmark = [pytest.mark.live, pytest.mark.django_db]


@pytest.mark.usefixtures("live_postgres")
def test_it_runs_on_postgresql_with_the_seeded_skill_map() -> None:
    """S9-SKL-2: the authoritative verb->skill map is seeded by migration on PostgreSQL too."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        (version,) = cursor.fetchone()
    assert int(version) >= 130000
    delegate = Skill.objects.get(slug="delegate-work")
    assert delegate.required_verbs == ["create_for"]


@pytest.mark.usefixtures("live_postgres")
def test_the_large_values_of_each_publication_are_compressed_with_lz4() -> None:
    """Decision 252: a card's bytes and payload, a stamp's bytes and a generation's composition
    are compressed with LZ4 (virgo.compression; pglz cost a third of the fan-out's card
    writes): named so in the catalogue, and so stored for a card published the real way."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, a.attname, a.attcompression FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid WHERE (c.relname, a.attname) IN "
            "(('cards_publishedcard', 'body'), ('cards_publishedcard', 'payload'), "
            "('stamps_capabilitystamp', 'body'), ('personas_generation', 'composition'))"
        )
        methods = {(table, column): method for table, column, method in cursor.fetchall()}
    assert methods == {
        ("cards_publishedcard", "body"): "l",
        ("cards_publishedcard", "payload"): "l",
        ("stamps_capabilitystamp", "body"): "l",
        ("personas_generation", "composition"): "l",
    }
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    publish_card(persona)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_compression(body) FROM cards_publishedcard WHERE persona_id = %s",
            [persona.pk],
        )
        assert cursor.fetchone() == ("lz4",)


@pytest.mark.usefixtures("live_postgres")
def test_a_bulk_update_refuses_a_value_too_long_for_its_column() -> None:
    """Bad input never corrupts data: virgo.bulk.update_each's one-statement form casts each
    column's values to an array; a cast to varchar(120) would cut a 121-character name to 120
    and store it, where a plain UPDATE refuses it. The row keeps what it had."""
    persona = make_persona(make_agent(make_owner()))
    before = persona.name
    persona.name = "a" * 121
    with pytest.raises(DataError), transaction.atomic():
        update_each([persona], ["name"])
    persona.refresh_from_db()
    assert persona.name == before
