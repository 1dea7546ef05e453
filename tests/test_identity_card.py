"""A card names only what was proven: the provider and the signed identity-chain extension.

Read as a peer reads them: the served card, its signature checked by the a2a-sdk's verifier
against Virgo's JWKS (tests/test_card_signatures.py), and the directory's provider filter.
"""

import copy
import json
from typing import Any

import pytest
from a2a.utils.signing import InvalidSignaturesError
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone

from cards.rendering import IDENTITY_EXTENSION
from personas import selectors, services
from personas.models import AuditEvent, OrganizationDomain, OwnerIdentity, Persona, Verification
from personas.services import derivation
from tests.card_support import identity_extension
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from tests.signing_support import peer_verifier, served_jwks

pytestmark = pytest.mark.django_db

DIRECTORY = "/api/directory/"


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> None:
    cache.clear()


def served(persona: Persona) -> dict[str, Any]:
    response = Client().get(persona.card_path)
    assert response.status_code == 200, response.content
    card: dict[str, Any] = json.loads(response.content)
    return card


def listed(persona: Persona) -> Persona:
    with run_on_commit():
        services.persona_set_discoverable(
            persona=persona, actor=persona.agent.owner, discoverable=True, via="test"
        )
    return persona


@pytest.fixture
def ada() -> Any:
    return make_owner("ada", organization="engines.example.org")


@pytest.fixture
def adas_persona(ada: Any) -> Persona:
    return make_persona(make_agent(ada), name="Reviewer", discoverable=True)


def test_the_card_carries_the_proven_chain_and_how_each_part_was_proven(
    ada: Any, adas_persona: Persona
) -> None:
    """VX-ID-3: a data-only extension (required false) names the OIDC issuer and subject a
    verified ID token proved, the proven organization domain, and for each how and since when;
    the provider is that domain."""
    card = served(adas_persona)
    extension = identity_extension(card)
    assert extension["required"] is False
    identity = ada.identity
    assert extension["params"] == {
        "provider": "organization",
        "owner": {
            "issuer": "https://id.example.org/",
            "subject": "sub-ada",
            "subjectType": "public",
            "verification": "oidc",
            "verifiedAt": identity.identity_verified_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "organization": {
            "domain": "engines.example.org",
            "verification": "operator",
            "verifiedAt": identity.organization_domain.verified_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    assert card["provider"] == {
        "organization": "engines.example.org",
        "url": "https://engines.example.org/",
    }


def test_the_identity_chain_is_signed_with_the_card(adas_persona: Persona) -> None:
    """VX-ID-3, VX-TRUST-2: the a2a-sdk verifier accepts the served card against Virgo's JWKS,
    and refuses it once any part of the chain is changed (a peer cannot be handed another
    owner's subject or domain under this signature)."""
    card = served(adas_persona)
    verify = peer_verifier(served_jwks())
    verify(card)
    tampered_parts = [
        ("owner", "subject", "sub-grace"),
        ("owner", "issuer", "https://evil.example/"),
        ("owner", "verification", "unverified"),
        ("organization", "domain", "evil.example"),
        ("organization", "verification", "dns-txt"),
    ]
    for part, key, value in tampered_parts:
        forged = copy.deepcopy(card)
        identity_extension(forged)["params"][part][key] = value
        with pytest.raises(InvalidSignaturesError):
            verify(forged)
    dropped = copy.deepcopy(card)
    dropped["capabilities"]["extensions"] = [
        e for e in dropped["capabilities"]["extensions"] if e["uri"] != IDENTITY_EXTENSION
    ]
    with pytest.raises(InvalidSignaturesError):
        verify(dropped)


def test_an_unproven_subject_and_organization_are_named_nowhere() -> None:
    """VX-ID-1, VX-ID-3: an issuer and subject stored but never proven by a sign-in, and a domain
    claimed but never proven, appear nowhere on the card; the chain says unverified."""
    owner = make_owner(
        "grace",
        organization="",
        oidc=False,
        identity_issuer="https://id.hopper.example/",
        identity_subject="sub-grace-typed",
    )
    services.organization_claim(owner=owner, domain="hopper.example")
    persona = make_persona(make_agent(owner), discoverable=True)
    card = served(persona)
    assert identity_extension(card)["params"] == {
        "provider": "installation",
        "owner": {"verification": "unverified"},
        "organization": {"verification": "unverified"},
    }
    raw = json.dumps(card)
    for unproven in ("id.hopper.example", "sub-grace-typed", "hopper.example"):
        assert unproven not in raw


def test_a_pairwise_subject_is_this_installations_own(settings: Any, ada: Any) -> None:
    """VX-ID-3: with VIRGO_IDENTITY_SUBJECTS=pairwise the card names an identifier derived for
    this installation, not the issuer's subject; the same owner gets the same one each time."""
    settings.VIRGO_IDENTITY_SUBJECTS = "pairwise"
    first = services.composition_of(make_persona(make_agent(ada)))["identity"]["owner"]
    again = services.composition_of(make_persona(make_agent(ada)))["identity"]["owner"]
    assert first["subjectType"] == "pairwise"
    assert first["subject"] == again["subject"]
    assert "sub-ada" not in first["subject"] and len(first["subject"]) == 64
    other = make_owner("grace")
    assert services.composition_of(make_persona(make_agent(other)))["identity"]["owner"][
        "subject"
    ] not in (first["subject"], "sub-grace")
    # A subject is one issuer's name for someone: the same text at another issuer is another
    # person, and gets another pairwise subject.
    namesake = make_owner(
        "ada-elsewhere", identity_issuer="https://id.other.example/", identity_subject="sub-ada"
    )
    assert (
        services.composition_of(make_persona(make_agent(namesake)))["identity"]["owner"]["subject"]
        != first["subject"]
    )


def test_a_pairwise_subject_is_the_same_from_one_version_to_the_next(settings: Any) -> None:
    """VX-ID-3: a peer may key what it knows of an owner on the pairwise subject a card shows,
    so its derivation (HMAC-SHA256 of the issuer and subject under the installation's secret,
    in Virgo's own salt) is pinned here: a change of any part would rename every owner."""
    settings.SECRET_KEY = "a-test-secret-key-that-is-long-enough-for-django-checks-0123456789"
    settings.VIRGO_IDENTITY_SUBJECTS = "pairwise"
    assert derivation.shown_subject("https://id.example.org/", "sub-ada") == (
        "351a053970d792e438e4553b74902712e79db4e976602e745930c7af052ba96b"
    )


def test_a_second_owner_cannot_get_a_card_naming_anothers_organization(
    ada: Any, adas_persona: Persona
) -> None:
    """VX-ID-4: the impersonation of issue 23, end to end. Mallory copies Ada's display name,
    claims Ada's domain, copies the persona's name and description: her claim cannot be
    proven (the domain is Ada's), naming it is refused, and her card, the directory's provider
    filter and her issuer/subject name nothing of Ada's."""
    mallory = make_owner("mallory", organization="", oidc=False, display_name="Ada")
    with pytest.raises(ValidationError) as taken:
        services.organization_claim(owner=mallory, domain="ENGINES.example.org.")
    assert "another owner" in taken.value.message_dict["domain"][0]
    # A claim made before Ada proved the domain cannot be proven now either.
    claim = OrganizationDomain.objects.create(owner=mallory, domain="engines.example.org")
    with pytest.raises(ValidationError) as taken:
        services.organization_approve(claim=claim, actor=services.INSTALLATION)
    assert "another owner" in taken.value.message_dict["domain"][0]
    with pytest.raises(ValidationError):
        services.owner_identity_update(user=mallory, organization_domain=claim)
    with pytest.raises(ValidationError):
        services.owner_identity_update(
            user=mallory, organization_domain=ada.identity.organization_domain
        )
    with pytest.raises(ValidationError):
        services.owner_identity_update(user=mallory, identity_issuer="https://id.example.org/")
    # The database holds the same line: one verified owner per domain, per OIDC subject.
    with pytest.raises(IntegrityError), transaction.atomic():
        OrganizationDomain.objects.filter(pk=claim.pk).update(
            verified_at=timezone.now(), verification=Verification.DNS_TXT
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        OwnerIdentity.objects.filter(user=mallory).update(
            identity_issuer="https://id.example.org/",
            identity_subject="sub-ada",
            identity_verified_at=timezone.now(),
        )
    impostor = make_persona(
        make_agent(mallory),
        name=adas_persona.name,
        description=adas_persona.description,
        discoverable=True,
    )
    card = served(impostor)
    assert "engines.example.org" not in json.dumps(card)
    assert "sub-ada" not in json.dumps(card)
    reader = Client()
    reader.force_login(make_owner("reader"))
    found = reader.get(DIRECTORY, {"provider": "engines.example.org"}).json()["results"]
    assert [entry["id"] for entry in found] == [str(adas_persona.uuid)]


def test_a_shared_domain_may_be_named_by_whom_it_is_shared_with(ada: Any) -> None:
    """VX-ID-2, VX-ID-4: the domain's owner shares it, and only then may another owner's cards
    name it; a third owner still may not, and only the owner (or a superuser) may share."""
    domain = ada.identity.organization_domain
    grace = make_owner("grace", organization="")
    eve = make_owner("eve", organization="")
    with pytest.raises(PermissionDenied):
        services.organization_share(claim=domain, with_user=eve, actor=grace)
    services.organization_share(claim=domain, with_user=grace, actor=ada)
    services.owner_identity_update(user=grace, organization_domain=domain)
    grace_card = served(make_persona(make_agent(grace), discoverable=True))
    assert grace_card["provider"]["organization"] == "engines.example.org"
    with pytest.raises(ValidationError):
        services.owner_identity_update(user=eve, organization_domain=domain)


def test_a_lapsed_proof_republishes_the_card_without_the_domain(
    ada: Any, adas_persona: Persona
) -> None:
    """VX-ID-2: once a proof lapses, the owner's personas settle again and the new card names
    the installation; an operator's approval is no proof a check can find missing."""
    approved = ada.identity.organization_domain
    claim = services.organization_claim(owner=ada, domain="lapsing.example")
    services.organization_proven(claim=claim, verification=Verification.DNS_TXT)
    with run_on_commit():
        services.owner_identity_update(user=ada, organization_domain=claim)
    assert served(adas_persona)["provider"]["organization"] == "lapsing.example"
    with run_on_commit():
        services.organization_lapsed(claim=claim, reason="the TXT record is gone")
    card = served(adas_persona)
    assert card["provider"]["organization"] != "lapsing.example"
    assert identity_extension(card)["params"]["organization"] == {"verification": "unverified"}
    services.organization_lapsed(claim=approved, reason="no record")
    approved.refresh_from_db()
    assert approved.is_verified and approved.last_failure == "no record"


def test_a_lapsed_shared_domain_republishes_the_cards_of_whom_it_is_shared_with(
    ada: Any,
) -> None:
    """VX-ID-2, VX-ID-4: a lapse un-verifies the domain for every owner whose cards name it:
    the personas of an owner it is shared with settle again too, and their new card no longer
    names a domain no one has proven."""
    claim = services.organization_claim(owner=ada, domain="lapsing.example")
    services.organization_proven(claim=claim, verification=Verification.DNS_TXT)
    grace = make_owner("grace", organization="")
    services.organization_share(claim=claim, with_user=grace, actor=ada)
    graces = make_persona(make_agent(grace), discoverable=True)
    with run_on_commit():
        services.owner_identity_update(user=grace, organization_domain=claim)
    assert served(graces)["provider"]["organization"] == "lapsing.example"
    with run_on_commit():
        services.organization_lapsed(claim=claim, reason="the TXT record is gone")
    card = served(graces)
    assert card.get("provider", {}).get("organization") != "lapsing.example"
    assert identity_extension(card)["params"]["organization"] == {"verification": "unverified"}


def test_only_a_superuser_or_the_installation_approves_a_domain(ada: Any) -> None:
    """VX-ID-2: approval by hand is a superuser's, and it is audited."""
    grace = make_owner("grace", organization="")
    claim = services.organization_claim(owner=grace, domain="hopper.example")
    for refused in (grace, ada):
        with pytest.raises(PermissionDenied):
            services.organization_approve(claim=claim, actor=refused)
    root = make_owner("root", organization="", is_superuser=True)
    services.organization_approve(claim=claim, actor=root)
    claim.refresh_from_db()
    assert claim.verification == Verification.OPERATOR
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_APPROVED, actor=root)
    assert event.data == {
        "domain": "hopper.example",
        "owner": grace.pk,
        "owner_name": "grace",
        "by": "superuser",
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "https://engines.example.org/",
        "engines.example.org/path",
        "127.0.0.1",
        "localhost",
        "-bad.example",
        "a..example",
        "x" * 64 + ".example",
        "ada@engines.example.org",
    ],
)
def test_a_domain_that_is_not_one_is_refused_naming_the_field(ada: Any, text: str) -> None:
    """VX-ID-2: a claim is a registered domain name; anything else is a `domain` error."""
    with pytest.raises(ValidationError) as refused:
        services.organization_claim(owner=ada, domain=text)
    assert list(refused.value.message_dict) == ["domain"]


# A name of exactly 253 characters, DNS's limit for a name (RFC 1035 and RFC 2181).
LONGEST_NAME = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
WRITE_A_DOMAIN = "write a registered domain name such as example.org (no scheme or path)"


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("a.example", "a.example"),  # a label of one character (x.com is a domain)
        ("a" * 63 + ".example", "a" * 63 + ".example"),  # a label at its 63 characters
        (LONGEST_NAME, LONGEST_NAME),
        ("163.example", "163.example"),  # only the top-level label may not be all digits
        ("www.163.example", "www.163.example"),
        ("WWW.ACME.TAX.", "www.acme.tax"),  # capitals and a final dot, whatever the letters
        ("BÜCHER.Example", "xn--bcher-kva.example"),  # Unicode in capitals: UTS 46 maps it
    ],
)
def test_a_domain_name_at_the_bounds_is_claimed_in_its_one_spelling(
    ada: Any, text: str, stored: str
) -> None:
    """VX-ID-2: every registered domain name may be claimed, to DNS's own bounds (labels of 1
    to 63 characters, names of 253; digits in any label but the last), and is stored in one
    spelling (IDNA A-labels after UTS 46 mapping, lower case, no final dot)."""
    assert services.organization_claim(owner=ada, domain=text).domain == stored


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("https://acme.example", WRITE_A_DOMAIN),
        ("localhost", WRITE_A_DOMAIN),
        ("192.0.2.7", "an IP address is not an organization's domain"),
    ],
)  # fmt: skip
def test_a_refused_domain_tells_the_owner_what_to_write(ada: Any, text: str, refusal: str) -> None:
    """VX-ID-2: the refusal an owner reads on the claim form says what a claim must be: a URL
    or a single name is answered with an example of a domain, an IP address as what it is;
    nothing is claimed."""
    claims = OrganizationDomain.objects.count()
    with pytest.raises(ValidationError) as refused:
        services.organization_claim(owner=ada, domain=text)
    assert refused.value.message_dict == {"domain": [refusal]}
    assert OrganizationDomain.objects.count() == claims


@pytest.mark.django_db(transaction=True)
def test_typed_identities_become_unverified_on_upgrade_and_every_persona_settles_again() -> None:
    """VX-ID-1, VX-ID-2: after the upgrade, what owners typed is kept as a claim, proves
    nothing (no verified subject, no domain named), and every persona is behind, so the
    reconciler publishes a card naming only what was proven."""
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    before = [("personas", "0011_grant_definition")]
    executor.migrate(before)
    old = MigrationExecutor(connection).loader.project_state(before).apps
    try:
        user = old.get_model("auth", "User").objects.create(username="typist")
        old.get_model("personas", "OwnerIdentity").objects.create(
            user_id=user.pk,
            display_name="Typist",
            organization="Virgo Demo",
            organization_url="https://demo.virgo.example/",
            identity_issuer="https://id.virgo.example/",
            identity_subject="demo",
        )
        revision = old.get_model("personas", "SkillMapRevision")
        revision.objects.update_or_create(pk=1, defaults={"revision": 4})
    finally:
        MigrationExecutor(connection).migrate(leaves)
    identity = OwnerIdentity.objects.get(user__username="typist")
    assert identity.claimed_organization == "Virgo Demo"
    assert identity.claimed_organization_url == "https://demo.virgo.example/"
    assert identity.identity_verified_at is None
    assert identity.organization_domain is None
    assert services.skill_map_revision() == 5
    get_user_model().objects.filter(username="typist").delete()


def test_the_owner_sees_what_became_of_their_domain_and_nobody_else_does(ada: Any) -> None:
    """VX-ID-2: approval, proof, sharing and lapse of a domain are audit events its owner sees
    in the admin's audit trail; another owner sees none of them."""
    claim = services.organization_claim(owner=ada, domain="lapsing.example")
    services.organization_proven(claim=claim, verification=Verification.DNS_TXT)
    services.organization_share(claim=claim, with_user=make_owner("grace"), actor=ada)
    services.organization_lapsed(claim=claim, reason="the TXT record is gone")
    mine = selectors.audit_events_visible_to(ada).values_list("kind", flat=True)
    assert sorted(mine) == [
        AuditEvent.Kind.ORGANIZATION_LAPSED,
        AuditEvent.Kind.ORGANIZATION_SHARED,
        AuditEvent.Kind.ORGANIZATION_VERIFIED,
    ]
    assert not selectors.audit_events_visible_to(make_owner("eve")).exists()
