from django.conf import settings
from django.db import models
from django.db.models import Q

from personas.models import Persona


class PublishedCard(models.Model):
    """The rendered card of one persona generation: bytes and validators computed once."""

    persona = models.OneToOneField(
        Persona, on_delete=models.CASCADE, primary_key=True, related_name="published_card"
    )
    generation = models.PositiveIntegerField()
    body = models.BinaryField()
    etag = models.CharField(max_length=80)
    last_modified = models.DateTimeField()
    # The VIRGO_PUBLIC_BASE_URL the card's URLs were rendered with: a card rendered under
    # another is owed again, like one of an older generation.
    base_url = models.CharField(max_length=2048, default="")
    # Whether it carries its generation's pinned grant (VX-TRUST-4): a card rendered before the
    # stamp was built does not, and is owed again once the persona stands.
    pinned = models.BooleanField(default=False)
    # The kids whose signatures the body carries, sorted and space-separated (cards.signing
    # .signers_marker): a card whose marker is not the current signing set's is owed a new
    # signature (a rotation, a retirement or a revocation since it was signed).
    signed_by = models.CharField(max_length=512, default="")
    # The bytes its signatures cover (cards.signing.card_payload), kept so that re-signing in a
    # rotation signs without rebuilding the SDK's view of the card (most of a signing's time).
    payload = models.BinaryField(default=b"")
    # Whether it names its generation's place in the revocation status list (VX-TRUST-7): a
    # card published before cards did is owed again.
    status_listed = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"card of {self.persona_id} (generation {self.generation})"

    def is_current_for(self, persona: Persona, base_url: str | None = None) -> bool:
        """Whether this card shows `persona.generation` (or newer) at `base_url` (this process's
        VIRGO_PUBLIC_BASE_URL by default), with its pinned grant once the persona stands, and
        its place in the status list."""
        if self.generation != persona.generation:
            return self.generation > persona.generation
        pinned = self.pinned or persona.standing is not True
        at = settings.VIRGO_PUBLIC_BASE_URL if base_url is None else base_url
        return pinned and self.status_listed and self.base_url == at


class PublicBaseUrl(models.Model):
    """The installation's public base URL: one row (pk 1), the URL every machine must render
    cards under (cards.base_url, VX-SCALE-4). Recorded by the first process that signs
    anything; changed only by `virgo cards move-base-url`."""

    url = models.CharField(max_length=2048)
    recorded_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.url


class SigningKey(models.Model):
    """One key that signs public cards. Its private half is here only sealed, encrypted under
    the deployment's key-encryption key (cards.sealing), so every machine signs with it and none
    needs a file; never in the clear, in the admin or in a log."""

    class Algorithm(models.TextChoices):
        ES256 = "ES256", "ES256 (ECDSA P-256, SHA-256)"
        EDDSA = "EdDSA", "EdDSA (Ed25519)"

    class State(models.TextChoices):
        # Signs every card and is in the JWKS.
        ACTIVE = "active", "active"
        # Replaced by a rotation: still signs beside the active key, and stays in the JWKS,
        # until `retire_after`, so peers holding an older JWKS or card still verify.
        RETIRING = "retiring", "retiring"
        # Past its grace: out of the JWKS, signs nothing, its private file deleted.
        RETIRED = "retired", "retired"
        # Withdrawn at once: out of the JWKS, every card it signed re-signed without it.
        REVOKED = "revoked", "revoked"

    kid = models.CharField(max_length=64, unique=True)
    algorithm = models.CharField(max_length=8, choices=Algorithm.choices)
    public_jwk = models.JSONField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACTIVE)
    # The private key (PKCS#8) sealed by cards.sealing; emptied once the key stops signing.
    private_key_sealed = models.TextField(blank=True, default="")
    # The file an imported key came from (the operator's to keep), or the file a key made before
    # keys were sealed lay in (VIRGO_SIGNING_KEYS_DIR); read only while the key is not sealed.
    private_key_path = models.CharField(max_length=4096, blank=True, default="")
    generated = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    retire_after = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            # Two processes finding no key and creating one each: one insert wins.
            models.UniqueConstraint(
                fields=["state"], condition=Q(state="active"), name="one_active_signing_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kid} ({self.algorithm}, {self.state})"

    @property
    def signs(self) -> bool:
        return self.state in (self.State.ACTIVE, self.State.RETIRING)


class FederationPeer(models.Model):
    """Another ARD registry a federated search asks (cards.ard.federation, VX-DISC-5)."""

    # The base URL of its ARD API, ending in `/`: its search is `<url>search`.
    url = models.URLField(max_length=2048, unique=True)
    label = models.CharField(max_length=100)
    # How the credential is presented: `Authorization: <scheme> <credential>`.
    scheme = models.CharField(
        max_length=16, choices=[("Token", "Token"), ("Bearer", "Bearer")], default="Token"
    )
    # cards.sealing's form, bound to the URL; empty when the peer asks for no credential.
    credential_sealed = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "federation peer"

    def __str__(self) -> str:
        return self.label
