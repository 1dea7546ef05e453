"""A fleet to read query plans on PostgreSQL (the directory's and the ARD registry's tests).

Thousands of alike personas (bench.data's bulk copies) and three that differ, made the real way
by an owner of a proven organization, then ANALYZE: the plans asked of it are those a table of
this shape gets, not those of an empty one.
"""

from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from bench.data import add_personas, make_fleet
from personas.models import Persona
from tests.factories import DEPLOYER_VERBS, make_agent, make_owner, make_persona, standing_verbs

DIFFERENT = "Zephyr"


def analysed_fleet(*, alike: int, organization: str, alike_stand: bool = False) -> APIClient:
    """`alike` bulk personas and three discoverable "Zephyr" deployers of `organization`,
    analysed; a client with the fleet owner's token. `alike_stand` lists the bulk copies as if
    their stamps stood (they have none), for a search that lists only those that stand."""
    fleet = make_fleet()
    add_personas(fleet, alike, start=1)
    if alike_stand:
        Persona.objects.filter(agent=fleet.agent).update(standing=True)
    deployers = make_agent(make_owner("grace", organization=organization))
    for index in range(3):
        make_persona(
            deployers,
            name=f"{DIFFERENT} {index}",
            description="Ships each release with a quokka.",
            verb_subset=standing_verbs("coder-deputy", *DEPLOYER_VERBS),
            discoverable=True,
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE personas_persona")
        cursor.execute("ANALYZE personas_generation")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=fleet.owner).key}")
    return client
