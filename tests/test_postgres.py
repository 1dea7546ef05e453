"""The second `make test` run is on PostgreSQL, with schema and data migrations applied."""

import pytest
from django.db import connection

from personas.models import Skill

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
