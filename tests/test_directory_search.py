"""GET /api/directory/ filters: skill, tag, provider and q, alone and combined (VX-DIR-1).

These run on SQLite (which scans) and, in make test's second run, on PostgreSQL (which answers
from the indexes of migration personas 0010; test_directory_search_postgres checks the plans).
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from personas.models import Persona, PersonaClass
from personas.services import (
    INSTALLATION,
    organization_approve,
    organization_claim,
    owner_identity_update,
)
from tests.factories import (
    DEPLOYER_VERBS,
    REVIEWER_VERBS,
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
    standing_verbs,
)

pytestmark = pytest.mark.django_db

URL = "/api/directory/"
LEAD = PersonaClass.PROJECT_LEAD
DEPLOYS = standing_verbs("coder-deputy", *DEPLOYER_VERBS)
# A coder deputy does not stand with create_for; a project lead does.
DELEGATES = standing_verbs(LEAD, *REVIEWER_VERBS, "create_for")
DEPLOYS_AND_DELEGATES = standing_verbs(LEAD, *DEPLOYER_VERBS, "create_for")


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def reader() -> Client:
    client = Client()
    client.force_login(make_owner("reader"))
    return client


@pytest.fixture
def fleet() -> dict[str, Persona]:
    """Two owners' personas, listed and not, with skills, tags and words that tell them apart.

    Skills (tags): work-todos (todos) on all; deploy-releases (deployment) with DEPLOYS;
    delegate-work (todos) with DELEGATES.
    """
    ada = make_agent(make_owner("ada", organization="ada-labs.example"))
    grace = make_agent(make_owner("grace", organization="grace-works.example"))
    personas = {
        "captain": make_persona(
            ada,
            name="Release Captain",
            description="Ships releases on Fridays.",
            verb_subset=DEPLOYS,
            discoverable=True,
        ),
        "reviewer": make_persona(
            ada,
            name="Code Reviewer",
            description="Reviews pull requests with care.",
            discoverable=True,
        ),
        "delegator": make_persona(
            ada,
            name="Delegator",
            description="Hands review work to the right queue.",
            verb_subset=DELEGATES,
            persona_class=LEAD,
            discoverable=True,
        ),
        "chief": make_persona(
            ada,
            name="Chief of Staff",
            description="Delegates and deploys.",
            verb_subset=DEPLOYS_AND_DELEGATES,
            persona_class=LEAD,
            discoverable=True,
        ),
        "graces": make_persona(
            grace,
            name="Release Reviewer",
            description="Checks each release before it ships.",
            verb_subset=DEPLOYS,
            discoverable=True,
        ),
        # Every filter below would match these two, were they advertised.
        "unlisted": make_persona(
            grace,
            name="Release Reviewer (draft)",
            description="Checks each release before it ships.",
            verb_subset=DEPLOYS_AND_DELEGATES,
            persona_class=LEAD,
            discoverable=False,
        ),
        "failing": make_persona(
            grace,
            name="Release Reviewer (failing)",
            description="Checks each release before it ships.",
            verb_subset=DEPLOYS_AND_DELEGATES,
            persona_class=LEAD,
            discoverable=True,
        ),
    }
    Persona.objects.filter(pk=personas["failing"].pk).update(standing=False)
    return personas


def names(client: Client, query: str) -> list[str]:
    """The names on every page of the directory for this query, following `next`."""
    found: list[str] = []
    url: str | None = f"{URL}?{query}"
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        page = json.loads(response.content)
        found += [entry["name"] for entry in page["results"]]
        url = page["next"]
    return found


def test_skill_filters_by_skill_id_and_every_one_must_match(
    reader: Client, fleet: dict[str, Persona]
) -> None:
    """VX-DIR-1: `skill` lists the personas carrying that skill id; repeated, all of them."""
    assert names(reader, "skill=deploy-releases") == [
        "Release Captain",
        "Chief of Staff",
        "Release Reviewer",
    ]
    assert names(reader, "skill=delegate-work") == ["Delegator", "Chief of Staff"]
    assert names(reader, "skill=deploy-releases&skill=delegate-work") == ["Chief of Staff"]
    assert len(names(reader, "skill=work-todos")) == 5


def test_an_unknown_skill_id_matches_nothing(reader: Client, fleet: dict[str, Persona]) -> None:
    """VX-DIR-1: a well-formed id no skill has is an empty page, not an error (decision 140)."""
    assert names(reader, "skill=no-such-skill") == []
    assert names(reader, "skill=deploy-releases&skill=no-such-skill") == []


def test_tag_filters_by_skill_tag_and_every_one_must_match(
    reader: Client, fleet: dict[str, Persona]
) -> None:
    """VX-DIR-1: `tag` lists the personas one of whose skills has the tag; repeated, each
    tag must be on one of their skills (not necessarily the same one)."""
    assert names(reader, "tag=deployment") == [
        "Release Captain",
        "Chief of Staff",
        "Release Reviewer",
    ]
    assert len(names(reader, "tag=todos")) == 5
    # todos comes from work-todos, deployment from deploy-releases.
    assert names(reader, "tag=todos&tag=deployment") == [
        "Release Captain",
        "Chief of Staff",
        "Release Reviewer",
    ]
    assert names(reader, "tag=deployment&tag=knowledge&tag=workspace") == [
        "Release Captain",
        "Chief of Staff",
        "Release Reviewer",
    ]
    assert names(reader, "tag=Deployment") == []
    assert names(reader, "tag=deploy") == []


def test_provider_filters_by_the_organisation_the_card_names(
    reader: Client, fleet: dict[str, Persona]
) -> None:
    """VX-DIR-1: `provider` is the card's provider organisation, in any case, exactly."""
    assert names(reader, "provider=Grace-Works.example") == ["Release Reviewer"]
    assert names(reader, "provider=grace-works.example") == ["Release Reviewer"]
    assert names(reader, "provider=ADA-LABS.EXAMPLE") == [
        "Release Captain",
        "Code Reviewer",
        "Delegator",
        "Chief of Staff",
    ]
    assert names(reader, "provider=Grace") == []
    card = reader.get(fleet["graces"].card_path)
    assert json.loads(card.content)["provider"]["organization"] == "grace-works.example"


def test_provider_follows_the_owners_proven_domain_and_never_the_installation(
    reader: Client, fleet: dict[str, Persona], settings: Any
) -> None:
    """VX-DIR-1, VX-ID-2: when the owner names another proven domain, the new card's provider is
    what the filter finds; an owner who proved none is found by no provider, not even the
    installation's name their cards carry, nor the name they typed."""
    grace = fleet["graces"].agent.owner
    hopper = organization_claim(owner=grace, domain="hopper.example")
    organization_approve(claim=hopper, actor=INSTALLATION)
    with run_on_commit():
        owner_identity_update(user=grace, organization_domain=hopper)
    # The change settled every persona of grace's anew, the failing one among them.
    Persona.objects.filter(pk=fleet["failing"].pk).update(standing=False)
    assert names(reader, "provider=grace-works.example") == []
    assert names(reader, "provider=HOPPER.example") == ["Release Reviewer"]

    plain = get_user_model().objects.create_user(
        username="linus", password="correct horse battery staple", is_staff=True
    )
    make_persona(make_agent(plain), name="No Identity", discoverable=True)
    unproven = make_owner("torvalds", organization="", display_name="Linux Foundation")
    make_persona(make_agent(unproven), name="Unproven", discoverable=True)
    assert names(reader, "provider=linus") == []
    assert names(reader, "provider=Linux+Foundation") == []
    installation = settings.VIRGO_PROVIDER_ORGANIZATION.replace(" ", "+")
    assert names(reader, f"provider={installation}") == []


def test_q_finds_every_word_in_name_or_description(
    reader: Client, fleet: dict[str, Persona]
) -> None:
    """VX-DIR-1: `q` lists personas whose name or description holds every word, anywhere,
    in any case; the words may come from the name and the description both."""
    assert names(reader, "q=release") == ["Release Captain", "Release Reviewer"]
    assert names(reader, "q=RELEASE+captain") == ["Release Captain"]
    # "review" is in the name, "pull" in the description.
    assert names(reader, "q=review+pull") == ["Code Reviewer"]
    assert names(reader, "q=++fridays++ships+") == ["Release Captain"]
    assert names(reader, "q=release+pull") == []


def test_q_takes_wildcards_literally_and_never_reads_the_prompt(
    reader: Client, fleet: dict[str, Persona]
) -> None:
    """VX-DIR-1: `%`, `_` and the escape character `\\` are letters to `q`, not LIKE syntax; and
    `q` reads only the owner's name and description, never the system prompt (decision 141)."""
    ada = fleet["captain"].agent
    make_persona(
        ada,
        name="Quiet",
        description="",
        system_prompt="You deploy rockets. Mention the launch code ZEBRA only to the owner.",
        discoverable=True,
    )
    make_persona(ada, name="100% sure_thing", description="Literal.", discoverable=True)
    assert names(reader, "q=%25") == ["100% sure_thing"]
    assert names(reader, "q=_") == ["100% sure_thing"]
    assert names(reader, "q=s_r") == []
    assert names(reader, "q=%25e") == []
    make_persona(ada, name="Back\\slash", description="Literal too.", discoverable=True)
    # A lone backslash unescaped would escape the closing wildcard and match the literal `%`.
    assert names(reader, "q=%5C") == ["Back\\slash"]
    assert names(reader, "q=k%5Cs") == ["Back\\slash"]
    assert names(reader, "q=rockets") == []
    assert names(reader, "q=ZEBRA") == []
    assert names(reader, "q=quiet") == ["Quiet"]


def test_every_filter_combines_with_every_other(reader: Client, fleet: dict[str, Persona]) -> None:
    """VX-DIR-1: filters combine by AND, and still list only advertised personas."""
    assert names(reader, "skill=deploy-releases&q=reviewer") == ["Release Reviewer"]
    assert names(reader, "skill=deploy-releases&provider=ada-labs.example") == [
        "Release Captain",
        "Chief of Staff",
    ]
    assert names(reader, "tag=todos&q=review") == ["Code Reviewer", "Delegator", "Release Reviewer"]
    assert names(
        reader, "skill=deploy-releases&tag=todos&provider=grace-works.example&q=checks+release"
    ) == ["Release Reviewer"]
    assert names(
        reader, "skill=delegate-work&tag=deployment&provider=ada-labs.example&q=staff"
    ) == ["Chief of Staff"]
    assert names(reader, "skill=delegate-work&provider=grace-works.example") == []
    assert names(reader, "skill=deploy-releases&q=captain&provider=grace-works.example") == []


def test_filtered_results_are_paged_by_the_cursor_with_the_filters_kept(
    reader: Client, settings: Any
) -> None:
    """VX-DIR-1: the filtered list is cursor-paged at the configured size; every `next` link
    keeps the filters, so the walk yields every match once, in order, and nothing else."""
    settings.VIRGO_DIRECTORY_PAGE_SIZE = 2
    agent = make_agent(make_owner("ada"))
    matching = []
    for index in range(7):
        if index % 2 == 0:
            matching.append(
                make_persona(
                    agent, name=f"Deployer {index}", verb_subset=DEPLOYS, discoverable=True
                )
            )
        else:
            make_persona(agent, name=f"Deployer {index} (reviews)", discoverable=True)
    make_persona(agent, name="Deployer quiet", verb_subset=DEPLOYS, discoverable=False)
    make_persona(agent, name="Shipper", verb_subset=DEPLOYS, discoverable=True)
    pages = []
    url: str | None = f"{URL}?skill=deploy-releases&q=deployer"
    while url:
        response = reader.get(url)
        assert response.status_code == 200
        page = json.loads(response.content)
        pages.append([entry["id"] for entry in page["results"]])
        url = page["next"]
        if url:
            assert "skill=deploy-releases" in url and "q=deployer" in url
    assert pages == [
        [str(matching[0].uuid), str(matching[1].uuid)],
        [str(matching[2].uuid), str(matching[3].uuid)],
    ]


BAD_VALUES = [
    ("skill", ["skill="], "must not be empty"),
    ("skill", ["skill=deploy+releases"], "must be a skill id"),
    ("skill", ["skill=deploy%2Freleases"], "must be a skill id"),
    ("skill", ["skill=" + "a" * 81], "must be at most 80 characters"),
    ("skill", [f"skill=s{n}" for n in range(9)], "give at most 8 values"),
    ("tag", ["tag="], "must not be empty"),
    ("tag", ["tag=+++"], "must hold a character that is not white space"),
    ("tag", ["tag=a%00b"], "no NUL"),
    ("tag", ["tag=" + "t" * 101], "must be at most 100 characters"),
    ("tag", [f"tag=t{n}" for n in range(9)], "give at most 8 values"),
    ("provider", ["provider="], "must not be empty"),
    ("provider", ["provider=+"], "must hold a character that is not white space"),
    ("provider", ["provider=" + "p" * 254], "must be at most 253 characters"),
    ("provider", ["provider=a", "provider=b"], "give it once"),
    ("q", ["q="], "must not be empty"),
    ("q", ["q=++"], "must be 1 to 8 words"),
    ("q", ["q=" + "+".join(f"w{n}" for n in range(9))], "must be 1 to 8 words"),
    ("q", ["q=a%00b"], "must be 1 to 8 words"),
    ("q", ["q=" + "w" * 201], "must be at most 200 characters"),
    ("q", ["q=a", "q=b"], "give it once"),
]


@pytest.mark.parametrize(("name", "query", "reason"), BAD_VALUES)
def test_a_bad_filter_value_is_a_400_naming_the_parameter(
    reader: Client, name: str, query: list[str], reason: str
) -> None:
    """VX-DIR-1: empty, too long, too many, malformed or repeated: a 400 whose body names the
    parameter (and only it) and says why."""
    response = reader.get(URL + "?" + "&".join(query))
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body) == [name]
    assert any(reason in message for message in body[name]), body


def test_every_bad_parameter_is_named_at_once(reader: Client) -> None:
    """VX-DIR-1"""
    response = reader.get(URL + "?skill=bad!&tag=&provider=&q=&page_size=2")
    assert response.status_code == 400
    assert sorted(response.json()) == ["provider", "q", "skill", "tag"]


def test_eight_values_of_the_maximum_length_are_accepted(
    reader: Client, fleet: dict[str, Persona]
) -> None:
    """VX-DIR-1: the bounds are inclusive, as the schema states them."""
    skills = "&".join(f"skill={'s' * 79}{n}" for n in range(8))
    tags = "&".join(f"tag={'t' * 99}{n}" for n in range(8))
    words = "+".join(["w" * 24] * 8)
    query = f"{skills}&{tags}&provider={'p' * 253}&q={words}"
    assert names(reader, query) == []
    assert names(reader, "q=+captain+&skill=deploy-releases&tag=todos") == ["Release Captain"]


def test_filtered_requests_count_against_the_principals_limit(
    fleet: dict[str, Persona], settings: Any
) -> None:
    """VX-DIR-1: filters and refused filters alike spend the caller's directory budget, so
    neither pages through the directory past the limit nor probes it for free."""
    settings.VIRGO_DIRECTORY_RATE_LIMIT = "3/m"
    client = APIClient()
    user = make_owner("prober")
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    assert client.get(URL + "?skill=deploy-releases").status_code == 200
    assert client.get(URL + "?q=").status_code == 400
    assert client.get(URL + "?q=release&provider=grace-works.example").status_code == 200
    limited = client.get(URL + "?tag=deployment")
    assert limited.status_code == 429
    assert limited.json()["code"] == "rate_limited"


def test_a_filtered_page_costs_the_same_few_queries(
    fleet: dict[str, Persona], django_assert_max_num_queries: Any
) -> None:
    """VX-DIR-1: every filter at once, with a token: authentication plus one query for the
    page (the provider is a subquery of it)."""
    client = APIClient()
    user = make_owner("counter")
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    with django_assert_max_num_queries(3):
        response = client.get(
            URL + "?skill=deploy-releases&tag=todos&provider=grace-works.example&q=checks+release"
        )
    assert [entry["name"] for entry in response.json()["results"]] == ["Release Reviewer"]


def test_the_schema_documents_every_filter_with_its_bounds() -> None:
    """VX-DIR-1: /api/schema/ states each filter, its pattern, lengths and number of values."""
    client = APIClient()
    user = make_owner("schema")
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    document = json.loads(client.get("/api/schema/?format=json").content)
    parameters = {p["name"]: p for p in document["paths"]["/api/directory/"]["get"]["parameters"]}
    assert {"skill", "tag", "provider", "q", "cursor", "page_size"} <= set(parameters)
    for name in ("skill", "tag"):
        schema = parameters[name]["schema"]
        assert parameters[name]["in"] == "query"
        assert parameters[name]["explode"] is True
        assert schema["type"] == "array" and schema["maxItems"] == 8
        assert schema["items"]["minLength"] == 1 and "pattern" in schema["items"]
    assert parameters["skill"]["schema"]["items"]["maxLength"] == 80
    assert parameters["tag"]["schema"]["items"]["maxLength"] == 100
    assert parameters["provider"]["schema"]["maxLength"] == 253
    assert parameters["q"]["schema"]["maxLength"] == 200
    assert "{0,7}" in parameters["q"]["schema"]["pattern"]
    for parameter in parameters.values():
        assert parameter["description"]
