"""Organizations are proven, not typed (VX-ID-2): a DNS TXT record or an HTTPS well-known file
checked against real servers on loopback, a superuser's approval, sharing, the scheduled recheck
and its lapse, and the refusals that keep one owner from naming another's organization
(VX-ID-4)."""

import json
import logging
import re
import socket
import ssl
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from cards.rendering import IDENTITY_EXTENSION
from personas import proofs, services
from personas.models import AuditEvent, OrganizationDomain, Persona, Verification
from settling.tasks import recheck_organization_domains
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from tests.proof_servers import ProofWorld, closed_port, plain_http_server
from virgo import outbound, resolvers

pytestmark = pytest.mark.django_db


def live[F: Callable[..., Any]](test: F) -> F:
    """Live (real DNS and HTTPS servers), but in this process: `make mutation` runs it too."""
    return pytest.mark.mutation(pytest.mark.live(test))


DOMAIN = "acme.example"


def claim_for(owner: Any, domain: str = DOMAIN) -> OrganizationDomain:
    return services.organization_claim(owner=owner, domain=domain)


def txt(claim: OrganizationDomain) -> str:
    return f"{proofs.TXT_VALUE_PREFIX}{claim.token}"


def card_of(persona: Persona) -> dict[str, Any]:
    response = Client().get(f"/a/{persona.uuid}/.well-known/agent-card.json")
    assert response.status_code == 200, response.content
    return json.loads(response.content)


def identity_of(card: dict[str, Any]) -> dict[str, Any]:
    extensions = card["capabilities"]["extensions"]
    return next(ext["params"] for ext in extensions if ext["uri"] == IDENTITY_EXTENSION)


def names_organization(persona: Persona, domain: str) -> bool:
    card = card_of(persona)
    named = identity_of(card)["provider"] == "organization"
    assert named == (card["provider"]["organization"] == domain)
    return named


def name_on_cards(owner: Any, claim: OrganizationDomain) -> None:
    with run_on_commit():
        services.owner_identity_update(user=owner, organization_domain=claim)


@pytest.fixture
def ada() -> Any:
    return make_owner("ada", organization="")


@pytest.fixture
def persona(ada: Any) -> Persona:
    return make_persona(make_agent(ada), discoverable=True)


def prove_by_dns(world: ProofWorld, claim: OrganizationDomain) -> OrganizationDomain:
    world.publish_txt(claim.domain, txt(claim))
    with run_on_commit():
        checked = proofs.check_domain(claim)
    assert checked.verification == Verification.DNS_TXT, checked.last_failure
    return checked


# Proven by DNS or HTTPS ------------------------------------------------------------------------


@live
def test_a_dns_txt_record_proves_the_domain_and_the_card_names_it(
    proof_world: ProofWorld, ada: Any, persona: Persona
) -> None:
    """VX-ID-2: `_virgo-challenge.<domain>` TXT `virgo-domain-verification=<token>`, asked of
    the configured DNS server, verifies the domain; then the owner's card names it."""
    claim = claim_for(ada)
    assert not names_organization(persona, DOMAIN)
    proof_world.publish_txt(DOMAIN, "v=spf1 -all")  # other TXT records at the name are ignored
    proof_world.publish_txt(DOMAIN, txt(claim))
    with run_on_commit():
        checked = proofs.check_domain(claim, actor=ada)
    assert checked.is_verified
    assert checked.verification == Verification.DNS_TXT
    assert checked.last_failure == ""
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_VERIFIED)
    assert event.actor == ada
    assert event.data == {
        "domain": DOMAIN,
        "owner": ada.pk,
        "owner_name": "ada",
        "verification": "dns-txt",
    }
    name_on_cards(ada, checked)
    card = card_of(persona)
    assert card["provider"] == {"organization": DOMAIN, "url": f"https://{DOMAIN}/"}
    assert identity_of(card)["organization"]["verification"] == "dns-txt"


@live
def test_an_https_well_known_file_proves_the_domain(
    proof_world: ProofWorld, ada: Any, persona: Persona
) -> None:
    """VX-ID-2: with no TXT record, the token served at
    https://<domain>/.well-known/virgo-domain-verification.txt (resolved through the configured
    DNS server, TLS verified against the configured authority) verifies the domain."""
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proof_world.publish_file(DOMAIN, f"{claim.token}\n".encode())
    with run_on_commit():
        checked = proofs.check_domain(claim)
    assert checked.verification == Verification.HTTPS_WELL_KNOWN
    assert checked.last_failure == ""
    name_on_cards(ada, checked)
    assert names_organization(persona, DOMAIN)
    assert identity_of(card_of(persona))["organization"]["verification"] == "https-well-known"


# Not proven -------------------------------------------------------------------------------------


def assert_unverified(
    claim: OrganizationDomain, *reasons: str, ever: bool = False
) -> OrganizationDomain:
    """The claim is not verified, for the reasons given; `ever`: it was verified before."""
    claim.refresh_from_db()
    assert not claim.is_verified
    assert claim.verification == Verification.UNVERIFIED
    for reason in reasons:
        assert reason in claim.last_failure, claim.last_failure
    assert claim.token not in claim.last_failure
    verified = AuditEvent.objects.filter(
        kind=AuditEvent.Kind.ORGANIZATION_VERIFIED, actor=claim.owner
    )
    assert verified.exists() == ever
    return claim


@live
def test_a_txt_record_with_another_token_proves_nothing(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2, VX-ID-4: the record must hold this claim's own token (not another owner's)."""
    claim = claim_for(ada)
    rival = claim_for(make_owner("mallory", organization=""))
    proof_world.publish_txt(DOMAIN, txt(rival))
    proofs.check_domain(claim)
    assert_unverified(
        claim, f"the TXT record at _virgo-challenge.{DOMAIN} holds another token", "HTTPS"
    )
    assert rival.token not in claim.last_failure


@live
def test_a_txt_record_split_into_strings_is_read_joined(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2: a TXT record may be split into strings (of up to 255 bytes each); its value is
    them joined, wherever the split falls."""
    claim = claim_for(ada)
    proof_world.publish_txt(DOMAIN, [proofs.TXT_VALUE_PREFIX.encode(), claim.token.encode()])
    with run_on_commit():
        checked = proofs.check_domain(claim)
    assert checked.verification == Verification.DNS_TXT, checked.last_failure


@live
def test_a_txt_record_that_is_not_utf8_is_just_another_record(
    proof_world: ProofWorld, ada: Any
) -> None:
    """VX-ID-2: TXT records are bytes: one that is not UTF-8 is read like any other record at
    the name (it is not the proof), and does not stop the record that is from proving."""
    claim = claim_for(ada)
    proof_world.publish_txt(DOMAIN, b"\xffnot UTF-8\xfe")
    proofs.check_domain(claim)
    assert_unverified(
        claim,
        f"DNS TXT record: no TXT record at _virgo-challenge.{DOMAIN} starts with "
        f"{proofs.TXT_VALUE_PREFIX};",
    )
    prove_by_dns(proof_world, claim)


@live
def test_a_well_known_file_with_another_token_proves_nothing(
    proof_world: ProofWorld, ada: Any
) -> None:
    """VX-ID-2: the file must hold exactly this claim's token."""
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proof_world.publish_file(DOMAIN, b"some-other-token\n")
    proofs.check_domain(claim)
    assert_unverified(claim, "the file does not hold this claim's token")
    proof_world.publish_file(DOMAIN, f"{claim.token} and more".encode())
    proofs.check_domain(claim)
    assert_unverified(claim, "the file does not hold this claim's token")


@live
def test_nothing_published_says_what_is_missing(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2: no record and no file: both named in last_failure, no 500, no traceback."""
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proofs.check_domain(claim)
    claim = assert_unverified(claim)
    # One line, the ways in the order they are looked in.
    assert claim.last_failure == (
        f"DNS TXT record: no TXT record at _virgo-challenge.{DOMAIN}; "
        f"HTTPS well-known file: {proofs.well_known_url(DOMAIN)}: answered HTTP 404"
    )


@live
def test_a_name_that_does_not_resolve_is_said_so(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2"""
    claim = claim_for(ada, "nowhere.proof.example")
    proofs.check_domain(claim)
    assert_unverified(claim, "nowhere.proof.example does not resolve to any address")


@live
@pytest.mark.parametrize("status", [300, 301, 399])  # the whole 3xx range, both its ends
def test_a_redirect_is_not_followed(proof_world: ProofWorld, ada: Any, status: int) -> None:
    """VX-ID-2: the file is read where the domain serves it, never where it points."""
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proof_world.publish_file(DOMAIN, claim.token.encode(), status=status)
    proofs.check_domain(claim)
    assert_unverified(claim, f"answered HTTP {status}; redirects are not followed")


@live
def test_a_client_error_is_no_redirect(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2: an answer past the 3xx range is named by its status alone."""
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proof_world.publish_file(DOMAIN, claim.token.encode(), status=400)
    proofs.check_domain(claim)
    claim = assert_unverified(claim)
    assert claim.last_failure.endswith(f"{proofs.well_known_url(DOMAIN)}: answered HTTP 400")


@live
def test_a_file_longer_than_a_token_is_not_read_whole(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2: the body is bounded."""
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proof_world.publish_file(DOMAIN, claim.token.encode() + b" " * 4096)
    proofs.check_domain(claim)
    assert_unverified(claim, f"longer than {proofs.WELL_KNOWN_LIMIT} bytes")


@live
def test_a_certificate_not_for_the_domain_fails_tls(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2: TLS is verified for the domain's own name although the connection goes to the
    checked address; a certificate for other names proves nothing."""
    claim = claim_for(ada, "uncertified.example")
    proof_world.point_at("uncertified.example")
    proof_world.publish_file("uncertified.example", claim.token.encode())
    proofs.check_domain(claim)
    assert_unverified(claim, "TLS failed", "not valid for 'uncertified.example'")


@live
def test_an_untrusted_authority_fails_tls(proof_world: ProofWorld, ada: Any, settings: Any) -> None:
    """VX-ID-2: without the test authority in the bundle the same server is not believed."""
    settings.VIRGO_OUTBOUND_CA_BUNDLE = ""
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proof_world.publish_file(DOMAIN, claim.token.encode())
    proofs.check_domain(claim)
    assert_unverified(claim, "TLS failed: its certificate could not be verified", "local issuer")


@live
def test_a_port_that_does_not_speak_tls_fails_tls_with_its_reason(
    proof_world: ProofWorld, ada: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-ID-2: a site whose HTTPS port answers in clear text fails TLS, and the owner is told
    OpenSSL's reason, not only that some SSLError happened."""
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    with plain_http_server() as port:
        monkeypatch.setattr(proofs, "WELL_KNOWN_PORT", port)
        proofs.check_domain(claim)
        # What OpenSSL says of the same server when asked directly.
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            pytest.raises(ssl.SSLError) as handshake,
        ):
            ssl.create_default_context().wrap_socket(raw, server_hostname=DOMAIN)
    assert handshake.value.reason
    claim = assert_unverified(claim)
    assert claim.last_failure.endswith(
        f"{proofs.well_known_url(DOMAIN)}: TLS failed ({handshake.value.reason})"
    )


@live
def test_a_port_nobody_listens_on_is_said_so(
    proof_world: ProofWorld, ada: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-ID-2: nothing answering where the file should be is "could not connect"."""
    monkeypatch.setattr(proofs, "WELL_KNOWN_PORT", closed_port())
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proofs.check_domain(claim)
    claim = assert_unverified(claim)
    assert claim.last_failure.endswith(f"{proofs.well_known_url(DOMAIN)}: could not connect")


@live
def test_a_server_that_hangs_up_is_named_by_the_errors_kind(
    proof_world: ProofWorld, ada: Any
) -> None:
    """VX-ID-2: a connection closed without an answer is named by the error's kind, and nothing
    the server sent is copied."""
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proof_world.hang_up_on_the_file(DOMAIN)
    proofs.check_domain(claim)
    claim = assert_unverified(claim)
    assert claim.last_failure.endswith(
        f"{proofs.well_known_url(DOMAIN)}: could not be fetched (RemoteProtocolError)"
    )


@live
def test_a_loopback_address_is_refused_unless_allowed(
    proof_world: ProofWorld, ada: Any, settings: Any
) -> None:
    """VX-ID-2: the well-known file is fetched through the outbound guard, which refuses a
    domain resolving to loopback (or any private address) unless the operator allows it."""
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = []
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    proof_world.publish_file(DOMAIN, claim.token.encode())
    proofs.check_domain(claim)
    # The refusal names the file's URL (once), then what is wrong with where it points.
    assert_unverified(
        claim,
        f"HTTPS well-known file: {proofs.well_known_url(DOMAIN)}: "
        f"{DOMAIN} (resolves to 127.0.0.1) is a loopback address",
    )
    proof_world.zone.drop(DOMAIN, "A")
    proof_world.zone.add(DOMAIN, "A", "10.1.2.3")
    proofs.check_domain(claim)
    assert_unverified(claim, f"{DOMAIN} (resolves to 10.1.2.3) is a private address")


@live
def test_a_look_that_breaks_is_that_ways_failure_and_logged(
    proof_world: ProofWorld,
    ada: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """VX-ID-2: whatever else goes wrong while looking is that way's failure, named by the
    error's kind alone (its message may carry what a stranger's server said), never a traceback
    to the owner; the operator's log names the domain and has the traceback."""
    lookup = resolvers.answers

    def broken(name: str, rdtype: str, *, lifetime: float) -> list[Any]:
        # No DNS answer makes the lookup raise what it does not expect, so the test does.
        if rdtype == "TXT":
            raise RuntimeError("what a stranger's server said")
        return lookup(name, rdtype, lifetime=lifetime)

    monkeypatch.setattr(resolvers, "answers", broken)
    claim = claim_for(ada)
    proof_world.point_at(DOMAIN)
    with caplog.at_level(logging.WARNING, logger="personas.proofs"):
        proofs.check_domain(claim)
    claim = assert_unverified(claim, "DNS TXT record: the check failed (RuntimeError); HTTPS")
    assert "stranger" not in claim.last_failure
    (logged,) = [record for record in caplog.records if record.name == "personas.proofs"]
    assert logged.levelno == logging.WARNING
    assert logged.getMessage() == f"organization proof: checking {DOMAIN} failed"
    assert logged.exc_info is not None and logged.exc_info[0] is RuntimeError


def test_the_instructions_name_the_record_and_the_file(ada: Any) -> None:
    """VX-ID-2: the owner publishes `virgo-domain-verification=<token>` at
    `_virgo-challenge.<domain>`, or the token alone at
    https://<domain>/.well-known/virgo-domain-verification.txt (HTTPS's own port: not named)."""
    claim = claim_for(ada)
    assert proofs.instructions(claim) == proofs.Instructions(
        txt_name=f"_virgo-challenge.{DOMAIN}",
        txt_value=f"virgo-domain-verification={claim.token}",
        url=f"https://{DOMAIN}/.well-known/virgo-domain-verification.txt",
        file_content=claim.token,
    )


def test_only_its_active_owner_or_a_superuser_may_check_a_claim(ada: Any) -> None:
    """VX-ID-4: the claim's owner checks it, and so may a superuser; not another owner, not a
    visitor who is signed out, and not the owner's account once it is disabled."""
    claim = claim_for(ada)
    root = make_owner("root", organization="", is_superuser=True)
    assert proofs.may_check(ada, claim)
    assert proofs.may_check(root, claim)
    assert not proofs.may_check(make_owner("mallory", organization=""), claim)
    assert not proofs.may_check(AnonymousUser(), claim)
    ada.is_active = False
    ada.save()
    assert not proofs.may_check(ada, claim)
    with pytest.raises(PermissionDenied):
        proofs.check_domain(claim, actor=ada)


# The recheck and the lapse ----------------------------------------------------------------------


@live
def test_a_removed_record_lapses_on_the_scheduled_recheck(
    proof_world: ProofWorld, ada: Any, persona: Persona
) -> None:
    """VX-ID-2: lapsed proofs un-verify: the beat task rechecks every DNS/HTTPS proof older than
    VIRGO_DOMAIN_RECHECK_SECONDS; one no longer found un-verifies the domain, audits the lapse,
    and the owner's card names the installation again."""
    claim = prove_by_dns(proof_world, claim_for(ada))
    name_on_cards(ada, claim)
    assert names_organization(persona, DOMAIN)

    with run_on_commit():
        assert recheck_organization_domains() == 0  # checked just now: not due
    proof_world.zone.drop(proofs.txt_name(DOMAIN), "TXT")
    old = timezone.now() - timedelta(seconds=django_settings.VIRGO_DOMAIN_RECHECK_SECONDS + 1)
    OrganizationDomain.objects.filter(pk=claim.pk).update(checked_at=old)
    with run_on_commit():
        assert recheck_organization_domains() == 1

    assert_unverified(claim, f"no TXT record at _virgo-challenge.{DOMAIN}", ever=True)
    lapse = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_LAPSED)
    assert lapse.data["domain"] == DOMAIN
    assert "no TXT record" in lapse.data["reason"]
    card = card_of(persona)
    assert not names_organization(persona, DOMAIN)
    assert card["provider"]["organization"] == django_settings.VIRGO_PROVIDER_ORGANIZATION
    assert identity_of(card)["organization"] == {"verification": "unverified"}

    # Published again, it is proven again (since now) and named again.
    proof_world.publish_txt(DOMAIN, txt(claim))
    with run_on_commit():
        assert proofs.check_domain(claim).is_verified
    assert names_organization(persona, DOMAIN)


@live
def test_the_recheck_leaves_approved_domains_alone(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2: an operator's approval is not a proof a check could find missing."""
    claim = services.organization_approve(claim=claim_for(ada), actor=services.INSTALLATION)
    OrganizationDomain.objects.filter(pk=claim.pk).update(checked_at=None)
    assert recheck_organization_domains() == 0
    assert proofs.check_domain(claim).verification == Verification.OPERATOR


def test_beat_schedules_the_recheck() -> None:
    """VX-ID-2: beat looks for due proofs at least hourly; the default age is a day."""
    entry = django_settings.CELERY_BEAT_SCHEDULE["recheck-organization-domains"]
    assert entry["task"] == "settling.tasks.recheck_organization_domains"
    assert entry["schedule"] == min(django_settings.VIRGO_DOMAIN_RECHECK_SECONDS, 3600)
    assert django_settings.VIRGO_DOMAIN_RECHECK_SECONDS == 86400


# One owner per verified domain; sharing ---------------------------------------------------------


def test_a_domain_proven_by_another_owner_cannot_be_claimed(ada: Any) -> None:
    """VX-ID-2, VX-ID-4: a verified domain belongs to one owner; a second owner's claim is
    refused on the domain field, saying whom to ask."""
    services.organization_approve(claim=claim_for(ada), actor=services.INSTALLATION)
    mallory = make_owner("mallory", organization="")
    with pytest.raises(ValidationError) as refused:
        claim_for(mallory, "ACME.example.")
    assert refused.value.message_dict == {
        "domain": [f"{DOMAIN} is proven by another owner; ask them to share it with you"]
    }


@live
def test_a_second_owner_publishing_their_token_is_refused(
    proof_world: ProofWorld, ada: Any
) -> None:
    """VX-ID-4: a claim made before the first owner proved the domain stays unverified whatever
    it finds: the domain is the first prover's."""
    mallory = make_owner("mallory", organization="")
    theirs = claim_for(mallory)
    prove_by_dns(proof_world, claim_for(ada))
    # Before anything of theirs is published the answer is already that it is taken: not what
    # the lookups would say of the first owner's record.
    proofs.check_domain(theirs)
    taken = f"{DOMAIN} is proven by another owner; ask them to share it with you"
    assert assert_unverified(theirs).last_failure == taken
    proof_world.publish_txt(DOMAIN, txt(theirs))
    proofs.check_domain(theirs)
    assert_unverified(theirs, f"{DOMAIN} is proven by another owner; ask them to share it with you")
    with pytest.raises(ValidationError):
        services.organization_approve(claim=theirs, actor=services.INSTALLATION)


@live
def test_a_domain_proven_by_another_owner_during_the_check_stays_theirs(
    proof_world: ProofWorld, ada: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-ID-2, VX-ID-4: a verified domain belongs to one owner even when another owner's claim
    is verified while this check looks: the record is found, yet the domain is recorded as
    taken, and the other owner's proof stands."""
    theirs = claim_for(make_owner("mallory", organization=""))
    ours = claim_for(ada)
    proof_world.publish_txt(DOMAIN, txt(ours))
    lookup = resolvers.answers

    def approved_meanwhile(name: str, rdtype: str, *, lifetime: float) -> list[Any]:
        # The race, made certain: after the check saw the domain free, before it records.
        if rdtype == "TXT":
            services.organization_approve(claim=theirs, actor=services.INSTALLATION)
        return lookup(name, rdtype, lifetime=lifetime)

    monkeypatch.setattr(resolvers, "answers", approved_meanwhile)
    proofs.check_domain(ours)
    taken = f"{DOMAIN} is proven by another owner; ask them to share it with you"
    assert assert_unverified(ours).last_failure == taken
    theirs.refresh_from_db()
    assert theirs.verification == Verification.OPERATOR


@live
def test_another_owners_proven_domain_is_no_obstacle(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2: one owner per verified domain is per domain: another owner's proven domain does
    not keep this owner from proving theirs."""
    mallory = make_owner("mallory")  # with mallory.example.org approved
    assert OrganizationDomain.objects.filter(owner=mallory, verified_at__isnull=False).exists()
    prove_by_dns(proof_world, claim_for(ada))


def test_another_owner_cannot_name_a_domain_not_shared_with_them(ada: Any) -> None:
    """VX-ID-4: an owner's cards name only a domain proven for them."""
    claim = services.organization_approve(claim=claim_for(ada), actor=services.INSTALLATION)
    mallory = make_owner("mallory", organization="")
    with pytest.raises(ValidationError) as refused:
        services.owner_identity_update(user=mallory, organization_domain=claim)
    assert "organization_domain" in refused.value.message_dict
    with pytest.raises(PermissionDenied):
        services.organization_share(claim=claim, with_user=mallory, actor=mallory)
    with pytest.raises(PermissionDenied):
        proofs.check_domain(claim, actor=mallory)
    with pytest.raises(PermissionDenied):
        services.organization_remove(claim=claim, actor=mallory)


def test_sharing_lets_a_second_owner_name_the_domain(ada: Any) -> None:
    """VX-ID-2: a verified domain is shared by its owner; the second owner's card names it, and
    stops naming it when the proof lapses."""
    claim = services.organization_approve(claim=claim_for(ada), actor=services.INSTALLATION)
    grace = make_owner("grace", organization="")
    theirs = make_persona(make_agent(grace), discoverable=True)
    with run_on_commit():
        services.organization_share(claim=claim, with_user=grace, actor=ada)
    shared = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_SHARED)
    assert shared.actor == ada
    assert shared.data == {
        "domain": DOMAIN,
        "owner": ada.pk,
        "owner_name": "ada",
        "with": grace.pk,
        "with_name": "grace",
    }
    name_on_cards(grace, claim)
    assert names_organization(theirs, DOMAIN)


def persona_of_an_owner_it_is_shared_with(claim: Any, ada: Any) -> Persona:
    """A persona of grace, with whom ada shared the verified `claim`, whose card names it."""
    grace = make_owner("grace", organization="")
    theirs = make_persona(make_agent(grace), discoverable=True)
    with run_on_commit():
        services.organization_share(claim=claim, with_user=grace, actor=ada)
    name_on_cards(grace, claim)
    assert names_organization(theirs, DOMAIN)
    return theirs


def test_removing_a_shared_domain_takes_it_off_every_owners_card(ada: Any) -> None:
    """VX-ID-2: a claim its owner removes leaves the cards of the owners it was shared with
    too: theirs are settled again and no longer name the domain."""
    claim = services.organization_approve(claim=claim_for(ada), actor=services.INSTALLATION)
    theirs = persona_of_an_owner_it_is_shared_with(claim, ada)
    with run_on_commit():
        services.organization_remove(claim=claim, actor=ada)
    assert not names_organization(theirs, DOMAIN)


@live
def test_a_shared_domain_that_lapses_leaves_every_card(
    proof_world: ProofWorld, ada: Any, persona: Persona
) -> None:
    """VX-ID-2: a lapse settles the cards of the owners it was shared with too."""
    claim = prove_by_dns(proof_world, claim_for(ada))
    theirs = persona_of_an_owner_it_is_shared_with(claim, ada)
    proof_world.zone.records.clear()
    with run_on_commit():
        proofs.check_domain(claim)
    assert not names_organization(theirs, DOMAIN)


def test_only_a_verified_domain_is_shared(ada: Any) -> None:
    """VX-ID-2: sharing vouches for a domain, so an unproven one is not shared."""
    grace = make_owner("grace", organization="")
    with pytest.raises(ValidationError) as refused:
        services.organization_share(claim=claim_for(ada), with_user=grace, actor=ada)
    assert "not proven yet" in refused.value.message_dict["domain"][0]


def test_removing_a_claim_takes_it_off_the_cards(ada: Any, persona: Persona) -> None:
    """VX-ID-2: a removed claim is named by no card."""
    claim = services.organization_approve(claim=claim_for(ada), actor=services.INSTALLATION)
    name_on_cards(ada, claim)
    assert names_organization(persona, DOMAIN)
    with run_on_commit():
        services.organization_remove(claim=claim, actor=ada)
    assert not names_organization(persona, DOMAIN)


# Approval -------------------------------------------------------------------------------------


def test_a_superuser_approves_a_claim_and_it_is_audited(ada: Any, persona: Persona) -> None:
    """VX-ID-2: a superuser's approval verifies the claim as `operator`, audited with who."""
    root = make_owner("root", organization="")
    root.is_superuser = True
    root.save()
    with run_on_commit():
        claim = services.organization_approve(claim=claim_for(ada), actor=root)
    assert claim.verification == Verification.OPERATOR
    approval = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_APPROVED)
    assert approval.actor == root
    assert approval.data == {
        "domain": DOMAIN,
        "owner": ada.pk,
        "owner_name": "ada",
        "by": "superuser",
    }
    name_on_cards(ada, claim)
    assert identity_of(card_of(persona))["organization"]["verification"] == "operator"


@live
def test_approval_of_a_domain_proven_by_dns_sticks(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2: approving a claim a check proved makes it `operator`, and a later check that no
    longer finds the record leaves it verified."""
    claim = prove_by_dns(proof_world, claim_for(ada))
    claim = services.organization_approve(claim=claim, actor=services.INSTALLATION)
    assert claim.verification == Verification.OPERATOR
    proof_world.zone.records.clear()
    assert proofs.check_domain(claim).is_verified


def test_an_owner_cannot_approve_their_own_claim(ada: Any) -> None:
    """VX-ID-2, VX-ID-4: only a superuser (or the installation) approves."""
    claim = claim_for(ada)
    with pytest.raises(PermissionDenied):
        services.organization_approve(claim=claim, actor=ada)
    claim.refresh_from_db()
    assert not claim.is_verified
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.ORGANIZATION_APPROVED).exists()


# What is not a domain name --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "https://acme.example",  # a scheme
        "acme.example/about",  # a path
        "acme.example:443",  # a port
        "192.0.2.7",  # an IP address
        "[2001:db8::1]",
        "acme..example",  # an empty label
        ".example",
        "",
        "   ",
        "localhost",  # one label
        "-acme.example",
        "acme_corp.example",
        f"{'a' * 64}.example",  # a label too long
        ".".join(["a" * 60] * 5) + ".example",  # a name too long
    ],
)
def test_what_is_not_a_domain_name_is_refused_naming_the_field(ada: Any, text: str) -> None:
    """VX-ID-2: a claim is a registered domain name: nothing else, refused on `domain`."""
    with pytest.raises(ValidationError) as refused:
        claim_for(ada, text)
    assert list(refused.value.message_dict) == ["domain"]
    assert not OrganizationDomain.objects.exists()


def test_a_domain_is_stored_in_one_spelling(ada: Any) -> None:
    """VX-ID-2: case, a final dot and Unicode spellings are one domain (IDNA A-labels)."""
    assert claim_for(ada, " ACME.Example. ").domain == DOMAIN
    assert claim_for(ada, "bücher.example").domain == "xn--bcher-kva.example"
    assert claim_for(ada, "acme.example") == claim_for(ada, "Acme.Example")


# The command ----------------------------------------------------------------------------------


@live
def test_virgo_organization_check(proof_world: ProofWorld, ada: Any) -> None:
    """VX-ID-2: `virgo organization check DOMAIN|--all` looks now and says what it found."""
    claim = claim_for(ada)
    out = StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("organization", "check", DOMAIN, stdout=out)
    assert failed.value.returncode == 1
    assert f"{DOMAIN} (owner ada): not verified: DNS TXT record: no TXT record" in out.getvalue()
    proof_world.publish_txt(DOMAIN, txt(claim))
    out = StringIO()
    call_command("organization", "check", "--all", stdout=out)
    assert out.getvalue() == f"{DOMAIN} (owner ada): verified, DNS TXT record\n"
    with pytest.raises(CommandError, match="domain: "):
        call_command("organization", "check", "https://acme.example/")


def test_virgo_organization_approve_and_list(ada: Any) -> None:
    """VX-ID-2: the installation approves from the command line, audited as the installation."""
    claim_for(ada)
    out = StringIO()
    call_command("organization", "approve", DOMAIN, "--owner", "ada", stdout=out)
    assert "verified, Approved by the installation" in out.getvalue()
    approval = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_APPROVED)
    assert approval.actor is None
    assert approval.data["by"] == "installation"
    out = StringIO()
    call_command("organization", "list", stdout=out)
    assert out.getvalue() == f"{DOMAIN} (owner ada): verified, Approved by the installation\n"
    with pytest.raises(CommandError, match=r"nobody has no claim on acme\.example"):
        call_command("organization", "approve", DOMAIN, "--owner", "nobody")


# Where names are asked ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("127.0.0.1:5353", ("127.0.0.1", 5353)),
        (" 9.9.9.9 ", ("9.9.9.9", 53)),
        ("[::1]:5353", ("::1", 5353)),
        ("[2001:db8::53]", ("2001:db8::53", 53)),
        ("2001:db8::53", ("2001:db8::53", 53)),
    ],
)
def test_dns_servers_are_named_by_address_and_port(text: str, parsed: tuple[str, int]) -> None:
    """VX-ID-2: VIRGO_DNS_NAMESERVERS entries (`make test` points proofs at its own server)."""
    assert resolvers.parse_nameserver(text) == parsed


@pytest.mark.parametrize(
    "text", ["dns.example", "dns.example:53", "127.0.0.1:0", "127.0.0.1:65536", "[::1", "[::1]x"]
)
def test_what_names_no_dns_server_is_refused(text: str) -> None:
    """VX-ID-2"""
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        resolvers.parse_nameserver(text)


@live
def test_numeric_hosts_are_not_asked_of_the_dns_servers(
    proof_world: ProofWorld, settings: Any
) -> None:
    """VX-ID-2: with DNS servers configured the outbound guard still reads an address written
    as a number (in any spelling) itself, and judges it as before."""
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = []
    for url in ("http://127.0.0.1/", "http://2130706433/", "http://0x7f.1/", "http://[::1]/"):
        with pytest.raises(outbound.DestinationRefused, match="loopback"):
            outbound.destination(url, what="url")
    proof_world.zone.add("public.proof.example", "A", "192.0.2.80")
    proof_world.zone.add("public.proof.example", "A", "8.8.4.4")
    with pytest.raises(outbound.DestinationRefused, match=r"192\.0\.2\.80"):
        outbound.destination("https://public.proof.example/", what="url")
    proof_world.zone.drop("public.proof.example", "A")
    proof_world.zone.add("public.proof.example", "A", "8.8.4.4")
    found = outbound.destination("https://public.proof.example/", what="url")
    assert (found.address, found.host) == ("8.8.4.4", "public.proof.example")


def test_a_domain_is_named_as_stored_not_as_the_callers_copy(ada: Any) -> None:
    """VX-ID-2, VX-ID-4: owner_identity_update judges the domain as the database has it: a copy
    read before its approval is named, one read before it lapsed is refused."""
    claim = claim_for(ada)
    services.organization_approve(claim=claim, actor=services.INSTALLATION)
    assert not claim.is_verified  # the caller's copy, from before the approval
    name_on_cards(ada, claim)
    stale = OrganizationDomain.objects.get(pk=claim.pk)
    services.organization_lapsed(claim=stale, reason="test")  # an approval does not lapse...
    OrganizationDomain.objects.filter(pk=claim.pk).update(  # ...so un-verify it by hand
        verified_at=None, verification=Verification.UNVERIFIED
    )
    assert stale.is_verified
    with pytest.raises(ValidationError) as refused:
        services.owner_identity_update(user=ada, organization_domain=stale)
    assert "is not proven for you" in refused.value.message_dict["organization_domain"][0]


def test_check_all_with_nothing_to_check_says_so() -> None:
    """VX-ID-2"""
    out = StringIO()
    call_command("organization", "check", "--all", stdout=out)
    assert out.getvalue() == "no claim to check: every claim is approved, or there is none\n"


def tls_failure(cause: BaseException) -> httpx.ConnectError:
    error = httpx.ConnectError("the handshake failed")
    error.__cause__ = cause
    return error


def certificate_error(verify_message: str | None, reason: str | None) -> ssl.SSLError:
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error.verify_message, error.reason = verify_message, reason
    return error


def bare_ssl_error() -> ssl.SSLError:
    error = ssl.SSLError(1, "handshake")
    error.reason = None
    return error


@pytest.mark.parametrize(
    ("cause", "said"),
    [
        (certificate_error("self-signed certificate", "CERTIFICATE_VERIFY_FAILED"),
         "TLS failed: its certificate could not be verified (self-signed certificate)"),
        (certificate_error(None, "CERTIFICATE_VERIFY_FAILED"),
         "TLS failed: its certificate could not be verified (CERTIFICATE_VERIFY_FAILED)"),
        (certificate_error(None, None),
         "TLS failed: its certificate could not be verified (no reason given)"),
        (bare_ssl_error(), "TLS failed (SSLError)"),
    ],
)  # fmt: skip
def test_a_tls_failure_is_named_with_what_the_handshake_said(
    cause: BaseException, said: str
) -> None:
    """VX-ID-2: the owner reads why a proof could not be fetched over TLS, from the most
    specific words the handshake left, and never an empty pair of brackets."""
    assert proofs._wire_problem(tls_failure(cause)) == said
