"""VX-SEC-14: the secrets boundary as a table, every row through the real handler.

Credential files (the attacker's own findings first) and credential values are refused; ordinary
files, including code and prose that mention passwords, secrets and keys, are read back exactly.
Every row of the credential tables was read or sent as it is by the boundary before VX-SEC-14:
its hand-written list knew none of these locations, nor these kinds of value.

Fake credentials are assembled at run time from pieces and a seeded generator, so no scanner
reading this file finds a token in it, and no row depends on a real one.
"""

import base64
import hashlib
import json
import logging
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.apps import apps

from runtime import credentials
from runtime.models import RefusalRecord
from runtime.secret_rules import rule_set
from tests.runtime_support import call, root_of, standing_persona
from tests.secrets_support import AWS_SECRET, BASE62, BASE64, BOUNDARY, HEX, fake

pytestmark = pytest.mark.django_db


def b64url(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


JWT = ".".join(
    (
        b64url({"alg": "RS256", "kid": fake("kid", 12)}),
        b64url({"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:ci:deployer"}),
        fake("jwt-signature", 86, BASE62 + "-_"),
    )
)
DB_PASSWORD = "Qv7#" + fake("db-password", 12)
URL_PASSWORD = fake("url-password", 16)
REGISTRY_AUTH = base64.b64encode(f"deployer:{fake('registry', 20)}".encode()).decode()
REFRESH_TOKEN = "1//0g" + fake("refresh", 98, BASE62 + "-_")
CLIENT_SECRET = "d-" + fake("client-secret", 22, BASE62 + "-_")
VAULT_TOKEN = "hvs." + fake("vault", 24)
STRIPE_KEY = "_".join(("sk", "live", fake("stripe", 24)))
GITLAB_TOKEN = "-".join(("glpat", fake("gitlab", 20)))
SLACK_WEBHOOK = "/".join(
    ("https://hooks.slack.com/services", "T" + fake("team", 8), "B" + fake("bot", 10))
) + "/" + fake("hook", 24)  # fmt: skip
SENDGRID_KEY = ".".join(("SG", fake("sg-id", 22), fake("sg-secret", 43)))
PYPI_TOKEN = "-".join(("pypi", "AgEIcHlwaS5vcmc" + fake("pypi", 80, BASE62 + "-_")))
AZURE_KEY = fake("azure", 86, BASE64) + "=="
PGP_HEADER = "-----" + "BEGIN PGP PRIVATE KEY BLOCK" + "-----"
PUTTY_HEADER = "PuTTY-User-Key-File-" + "2: ssh-rsa"


@dataclass(frozen=True)
class Credential:
    """A file as it would sit in a workspace, and the part of it that must never come out."""

    path: str
    content: str
    secret: str
    # The content on its own, sent or written by a persona, is refused too (without a file
    # name to go by, only quoted or random-looking assignments count: decision 160).
    as_value: bool = True
    link_to: str | None = None


C = Credential

# Credentials by location: each refused by its path before a byte of it is read.
AT_CREDENTIAL_LOCATIONS = [
    # The attacker's own findings (VX-SEC-14).
    C(
        ".envrc",
        "# loaded by direnv\nexport AWS_PROFILE=billing\nexport AWS_REGION=eu-west-1\n"
        f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n",
        AWS_SECRET,
    ),
    C(
        ".kube/config",
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n"
        "  name: prod\nusers:\n- name: deployer\n  user:\n"
        f"    token: {JWT}\ncurrent-context: prod\n",
        JWT,
    ),
    C(
        ".docker/config.json",
        json.dumps({"auths": {"registry.example.com": {"auth": REGISTRY_AUTH}}}, indent=2),
        REGISTRY_AUTH,
        as_value=False,
    ),
    C(
        "infra/terraform.tfvars",
        f'region      = "eu-west-1"\ndb_username = "app"\ndb_password = "{DB_PASSWORD}"\n',
        DB_PASSWORD,
    ),
    C(
        ".config/gcloud/application_default_credentials.json",
        json.dumps(
            {
                "client_id": "764086051850-example.apps.googleusercontent.com",
                "client_secret": CLIENT_SECRET,
                "refresh_token": REFRESH_TOKEN,
                "type": "authorized_user",
            },
            indent=2,
        ),
        REFRESH_TOKEN,
    ),
    # The rest of the catalogue's new rows.
    C("infra/prod.tfvars.json", json.dumps({"db_password": DB_PASSWORD}), DB_PASSWORD),
    C(
        "infra/terraform.tfstate",
        json.dumps({"version": 4, "resources": [{"instances": [{"password": DB_PASSWORD}]}]}),
        DB_PASSWORD,
    ),
    C(
        "infra/terraform.tfstate.backup",
        json.dumps({"version": 4, "outputs": {"admin_password": {"value": DB_PASSWORD}}}),
        DB_PASSWORD,
        as_value=False,
    ),
    C(
        ".azure/msal_token_cache.json",
        json.dumps({"RefreshToken": {"k": {"secret": REFRESH_TOKEN}}}),
        REFRESH_TOKEN,
    ),
    C(".vault-token", VAULT_TOKEN, VAULT_TOKEN, as_value=False),
    C(
        ".terraformrc",
        f'credentials "app.terraform.io" {{\n  token = "{VAULT_TOKEN}"\n}}\n',
        VAULT_TOKEN,
        as_value=False,
    ),
    C(
        ".config/gh/hosts.yml",
        "github.com:\n    git_protocol: https\n    user: ci-bot\n",
        "ci-bot",
        as_value=False,
    ),
    C(".my.cnf", f"[client]\nuser=app\npassword={DB_PASSWORD}\n", DB_PASSWORD, as_value=False),
    C(
        ".s3cfg",
        f"[default]\naccess_key = ops\nsecret_key = {AWS_SECRET}\n",
        AWS_SECRET,
    ),
    C(".boto", f"[Credentials]\ngs_secret_access_key = {AWS_SECRET}\n", AWS_SECRET),
    C(
        "clusters/staging.kubeconfig",
        f"apiVersion: v1\nkind: Config\nusers:\n- name: ci\n  user:\n    token: {JWT}\n",
        JWT,
    ),
    C(
        ".dockercfg",
        json.dumps({"registry.example.com": {"auth": REGISTRY_AUTH}}),
        REGISTRY_AUTH,
        as_value=False,
    ),
    C(
        "deploy/bastion.ppk",
        f"{PUTTY_HEADER}\nEncryption: none\nPrivate-Lines: 1\n{fake('ppk', 64, BASE64)}\n",
        PUTTY_HEADER,
    ),
    # Through a symlink: the name asked is innocent, the file it resolves to is not.
    C("memory/cluster.md", "", JWT, as_value=False, link_to=".kube/config"),
    C("memory/env-notes.md", "", AWS_SECRET, as_value=False, link_to=".envrc"),
]

# Credentials by content: innocent names, refused when read because of what they hold.
IN_ORDINARY_FILES = [
    # The attacker's notes file holding a secret key, unquoted as people paste it.
    C(
        "memory/notes.md",
        "# Billing migration\n\nStaging works. Prod creds from Sam:\n\n"
        f"aws_secret_access_key = {AWS_SECRET}\n\nTODO: move to the vault.\n",
        AWS_SECRET,
    ),
    C("memory/session.md", f"Token the API gave back:\n\n    {JWT}\n", JWT),
    C(
        "memory/mirrors.md",
        f"Mirror: https://deployer:{URL_PASSWORD}@git.example.org/core.git\n",
        URL_PASSWORD,
    ),
    C(
        "worktrees/core/app/local_settings.py",
        f'DEBUG = False\nDATABASE_USER = "app"\nDATABASE_PASSWORD = "{DB_PASSWORD}"\n',
        DB_PASSWORD,
    ),
    C("memory/handover.md", f'The admin login is password: "{DB_PASSWORD}"\n', DB_PASSWORD),
    C(
        "memory/gpg.txt",
        f"{PGP_HEADER}\n\n{fake('pgp', 64, BASE64)}\n-----END PGP PRIVATE KEY BLOCK-----\n",
        fake("pgp", 64, BASE64),
    ),
    C("memory/billing.md", f"Stripe (live): {STRIPE_KEY}\n", STRIPE_KEY),
    C("memory/gitlab.md", f"CI pushes with {GITLAB_TOKEN}\n", GITLAB_TOKEN),
    C("memory/alerts.md", f"Alerts go to {SLACK_WEBHOOK}\n", SLACK_WEBHOOK),
    C("memory/mail.md", f"SENDGRID={SENDGRID_KEY}\n", SENDGRID_KEY),
    C("memory/release.md", f"Upload with {PYPI_TOKEN}\n", PYPI_TOKEN),
    C(
        "memory/storage.md",
        "DefaultEndpointsProtocol=https;AccountName=virgo;"
        f"AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net\n",
        AZURE_KEY,
    ),
    C(
        "memory/aws.json",
        json.dumps({"aws_access_key_id": "ops", "aws_secret_access_key": AWS_SECRET}, indent=2),
        AWS_SECRET,
    ),
    C(
        "worktrees/core/scripts/deploy.sh",
        f"#!/bin/sh\nexport AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n",
        AWS_SECRET,
    ),
    C(
        "worktrees/core/web/client.js",
        f'const apiKey = "{fake("js-api-key", 32)}";\nfetch(url, {{headers: {{apiKey}}}});\n',
        fake("js-api-key", 32),
    ),
    # Config files are read as the library reads them: unquoted values count there.
    C(
        "worktrees/core/config/app.yaml",
        f"database:\n  host: db\n  password: {DB_PASSWORD}\n",
        DB_PASSWORD,
        as_value=False,
    ),
    C(
        "worktrees/core/config/db.ini",
        f"[database]\nhost = db\npassword = {DB_PASSWORD}\n",
        DB_PASSWORD,
        as_value=False,
    ),
    # A JWT at the end of a long minified line: long lines are read in overlapping windows.
    C("worktrees/core/web/bundle.min.js", "var a=1;" * 20_000 + f'var t="{JWT}";', JWT),
]

CREDENTIALS = AT_CREDENTIAL_LOCATIONS + IN_ORDINARY_FILES
CREDENTIAL_VALUES = [credential for credential in CREDENTIALS if credential.as_value]

# Ordinary files: each read back exactly, and written as freely as before.
ORDINARY = {
    "README.md": "# Core\n\nForgot your password? Use the reset link on the login page; we never "
    "e-mail passwords or secret keys. Tokens expire after an hour.\n",
    "worktrees/core/app/auth.py": '"""Password checks."""\n\nPASSWORD_MIN_LENGTH = 12\n'
    'PASSWORD_FIELD = "password"\n\n\ndef login(request):\n'
    '    password = request.POST["password"]\n    if not password:\n'
    '        raise ValueError("a password is required")\n'
    "    return check_password(password, request.user.password)\n",
    "worktrees/core/app/settings.py": 'import os\n\nSECRET_KEY = os.environ["DJANGO_SECRET_KEY"]\n'
    'DATABASES = {"default": {"PASSWORD": os.environ.get("DB_PASSWORD")}}\n',
    "docs/security.md": "## Secrets\n\nNever commit a password, a private key or an API key. "
    "The secret key lives in the vault; password: see the vault entry `core/db`.\n",
    "docs/api.md": "Send `Authorization: Bearer <token>`. A mirror URL looks like "
    "`https://user:<password>@git.example.org/`.\n",
    "memory/notes.md": "The secretary persona relays the owner's decisions.\n"
    'secretary = "root/secretary"\nRotate the AWS key next week (AKIA is its prefix).\n',
    "worktrees/core/config/settings.toml": "[server]\nport = 8000\npassword_min_length = 12\n"
    'secret_backend = "vault"\n',
    "worktrees/core/docker-compose.yml": "services:\n  db:\n    image: postgres:17\n"
    "    environment:\n      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}\n",
    "worktrees/core/deploy/deployment.yaml": "env:\n- name: DB_PASSWORD\n  valueFrom:\n"
    "    secretKeyRef:\n      name: db-credentials\n      key: password\n",
    "worktrees/core/infra/main.tf": 'variable "db_password" {\n  type      = string\n'
    '  sensitive = true\n}\n\nresource "x" "db" {\n  password = var.db_password\n}\n',
    "worktrees/core/package-lock.json": json.dumps(
        {
            "name": "core",
            "lockfileVersion": 3,
            "packages": {
                "node_modules/left-pad": {
                    "version": "1.3.0",
                    "integrity": "sha512-" + fake("integrity", 86, BASE64) + "==",
                }
            },
        },
        indent=2,
    ),
    "worktrees/core/requirements.txt": "django==6.1.3 \\\n"
    f"    --hash=sha256:{fake('hash-1', 64, HEX)}\n",
    "memory/hashes.md": f"- commit {fake('commit', 40, HEX)}\n- sha256 {fake('sha', 64, HEX)}\n"
    "- persona 00000000-0000-4000-8000-000000000001\n"
    f"- artifact digest sha512:{fake('digest', 86, BASE64)}\n",
    "worktrees/core/web/login.js": 'const passwordField = document.getElementById("password");\n'
    'if (passwordField.value === "") { showError("password"); }\n',
    ".gitignore": ".env\n.envrc\n*.pem\n*.tfstate\n",
    "memory/reading.md": "Mot de passe oublié ? Pas de secret : la clé est chez Zoë. ✓\n",
    "data/sample.csv": "id,name,role\n1,Ada,secretary\n2,Lin,coordinator\n",
    "CHANGELOG.md": "## 2.1\n- JWT sessions replace cookies\n- API keys can be revoked\n",
}

# What the boundary refused before VX-SEC-14 and still refuses, judged by the new rule set.
KEPT = {
    ".env": "DATABASE_URL=postgres://app@db/app\n",
    ".ssh/id_ed25519": "not a key, but the location says it is\n",
    "memory/github.md": "push with " + "_".join(("ghp", fake("github", 36))) + "\n",
    "memory/slack.md": "bot: "
    + "-".join(("xoxb", "1234567890", "0987654321", fake("xb", 24)))
    + "\n",
}


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def place(root: Path, path: str, content: str, link_to: str | None = None) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if link_to:
        source = next(c for c in AT_CREDENTIAL_LOCATIONS if c.path == link_to)
        place(root, source.path, source.content)
        target.symlink_to(root / link_to)
    else:
        target.write_text(content)


def assert_kept_nowhere(secret: str, caplog: pytest.LogCaptureFixture, *sent: object) -> None:
    """VX-SEC-7: neither a table, a log line nor what went back holds the secret."""
    for model in apps.get_models():
        for row in model._default_manager.values():
            assert secret not in json.dumps(row, default=str), model.__name__
    for record in caplog.records:
        assert secret not in record.getMessage()
    for body in sent:
        assert secret not in json.dumps(body)


def ids(credentials: list[Credential]) -> list[str]:
    return [credential.path for credential in credentials]


def test_the_tables_are_as_large_as_the_issue_asks() -> None:
    """VX-SEC-14: at least 30 credential fixtures and 15 ordinary ones."""
    assert len(CREDENTIALS) >= 30
    assert len(ORDINARY) >= 15
    assert len({credential.path for credential in CREDENTIALS}) == len(CREDENTIALS)


@pytest.mark.parametrize("credential", CREDENTIALS, ids=ids(CREDENTIALS))
def test_each_credential_file_is_refused_through_the_handler(
    credential: Credential, caplog
) -> None:
    """VX-SEC-14, VX-SEC-7: `workspace_read` of each is refused loudly on the secret credential
    boundary (by its location before it is opened, or by what it holds), whatever range is
    asked; the secret is in no answer, record or log line."""
    caplog.set_level(logging.DEBUG)
    persona = standing_persona()
    place(root_of(persona), credential.path, credential.content, credential.link_to)
    for arguments in ({}, {"offset": 0, "length": 1}, {"offset": 5, "length": 64}):
        result = call(persona, "workspace_read", {"path": credential.path, **arguments})
        assert (result["ok"], result["boundary"]) == (False, BOUNDARY), result
        assert result["code"] in {"boundary_denied", "secret_content"}, result
        assert "result" not in result
    refusal = RefusalRecord.objects.filter(persona=persona).latest("id")
    assert (refusal.boundary, refusal.tool_name) == (BOUNDARY, "workspace_read")
    assert_kept_nowhere(credential.secret, caplog, result)


@pytest.mark.parametrize("credential", CREDENTIAL_VALUES, ids=ids(CREDENTIAL_VALUES))
def test_each_credential_value_is_refused_on_its_way_out_and_kept_only_as_a_marker(
    credential: Credential, caplog
) -> None:
    """VX-SEC-14, VX-SEC-7: the same content carried by a call (here written into an innocent
    note) is refused by the rule `secret-values` before the tool runs; the refusal keeps only
    the content's marker (its sha256 and length), and nothing is written."""
    caplog.set_level(logging.DEBUG)
    persona = standing_persona()
    write = {"path": "memory/draft.md", "content": credential.content}
    result = call(persona, "workspace_write", write)
    assert (result["ok"], result["code"], result["boundary"]) == (
        False,
        "boundary_denied",
        BOUNDARY,
    )
    refusal = RefusalRecord.objects.get(persona=persona)
    data = credential.content.encode()
    assert refusal.rule == "secret-values"
    assert refusal.operation["arguments"]["content"] == {
        "redacted": "secret-value",
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
    }
    assert not (root_of(persona) / "memory/draft.md").exists()
    assert_kept_nowhere(credential.secret, caplog, result)


@pytest.mark.parametrize(("path", "content"), ORDINARY.items(), ids=list(ORDINARY))
def test_each_ordinary_file_is_read_back_exactly(path: str, content: str) -> None:
    """VX-SEC-14: the default stays positive: code, prose and config that mention passwords,
    secrets and keys, lock files and digests are read whole and byte for byte, and listed."""
    persona = standing_persona()
    root = root_of(persona)
    place(root, path, content)
    result = call(persona, "workspace_read", {"path": path, "length": 256 * 1024})
    assert result["ok"] is True, result
    assert result["result"]["content"] == content
    assert result["result"]["done"] is True
    directory, _, name = path.rpartition("/")
    listed = call(persona, "workspace_list", {"path": directory})["result"]["entries"]
    assert name in [entry["name"] for entry in listed]
    assert not RefusalRecord.objects.filter(persona=persona).exists()


@pytest.mark.parametrize(
    ("path", "content"),
    [(p, c) for p, c in ORDINARY.items() if p.startswith("memory/")],
    ids=[p for p in ORDINARY if p.startswith("memory/")],
)
def test_ordinary_content_is_written_as_before(path: str, content: str) -> None:
    """VX-SEC-14, VX-SEC-7: a note mentioning passwords and keys carries no credential value:
    it is written as given, and nothing is refused or redacted."""
    persona = standing_persona()
    result = call(persona, "workspace_write", {"path": path, "content": content})
    assert result["ok"] is True, result
    assert (root_of(persona) / path).read_text() == content


def test_listing_hides_credential_locations_and_links_to_them_and_nothing_else() -> None:
    """VX-SEC-14: a directory listing never shows a credential location, nor a symlink that
    resolves to one; a file refused only for what it holds is listed (its name gives nothing
    away, and listing opens no file), as is every ordinary file."""
    persona = standing_persona()
    root = root_of(persona)
    for credential in CREDENTIALS:
        place(root, credential.path, credential.content, credential.link_to)
    for path, content in ORDINARY.items():
        if path.startswith("memory/") and (root / path).exists():
            continue
        place(root, path, content)
    listed = {
        path: {entry["name"] for entry in call(persona, "workspace_list", {"path": path})[
            "result"]["entries"]}
        for path in ("", ".config", ".config/gh", ".docker", "infra", "memory")
    }  # fmt: skip
    hidden = {".envrc", ".kube", ".azure", ".vault-token", ".terraformrc", ".my.cnf", ".s3cfg",
              ".boto", ".dockercfg"}  # fmt: skip
    assert listed[""].isdisjoint(hidden)
    assert {"README.md", "memory", "infra", ".config", ".docker", ".gitignore"} <= listed[""]
    assert listed[".config"] == {"gh"}
    assert listed[".config/gh"] == listed[".docker"] == listed["infra"] == set()
    assert {"cluster.md", "env-notes.md"}.isdisjoint(listed["memory"])
    assert {"session.md", "billing.md", "hashes.md", "reading.md"} <= listed["memory"]


@pytest.mark.parametrize(("path", "content"), KEPT.items(), ids=list(KEPT))
def test_what_was_refused_before_is_refused_still(path: str, content: str) -> None:
    """VX-SEC-14, V1-GB-4: `.env`, `.ssh/`, classic GitHub and Slack bot tokens, which the old
    list knew, are refused by the new rule set as well."""
    persona = standing_persona()
    place(root_of(persona), path, content)
    result = call(persona, "workspace_read", {"path": path})
    assert (result["ok"], result["boundary"]) == (False, BOUNDARY), result


def test_every_location_says_why() -> None:
    """VX-SEC-14: the catalogue is one table with a reason per row and no row twice."""
    patterns = [location.pattern for location in credentials.CREDENTIAL_LOCATIONS]
    assert len(patterns) == len(set(patterns))
    assert all(location.reason for location in credentials.CREDENTIAL_LOCATIONS)


@pytest.mark.parametrize("pattern", ["", "a//b", "/a", "a/", "Keys", ".config/GH"])
def test_a_location_that_could_never_match_is_refused_when_written(pattern: str) -> None:
    """VX-SEC-14: paths are matched lower-cased and split at `/`, so an entry with an upper-case
    letter or an empty segment would never match anything; the table refuses it rather than
    silently guarding nothing."""
    with pytest.raises(ValueError, match="lower-case segments"):
        credentials.CredentialLocation(pattern, "a reason")
    assert credentials.CredentialLocation(".config/gh", "a reason").pattern == ".config/gh"


def test_a_segment_pattern_matches_a_whole_segment_as_the_shell_would() -> None:
    """VX-SEC-14: a segment pattern is a shell pattern over the whole segment, not a prefix or
    a search."""
    matches = credentials._segment_matcher("*.env")
    assert matches("prod.env") and matches(".env")
    assert not matches("prod.env.bak") and not matches("prod-env")
    assert credentials._segment_matcher(".env.*")(".env.local")
    assert not credentials._segment_matcher(".env")("x.env")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".kube/config", ".kube"),
        ("home/.kube/cache/discovery.json", ".kube"),
        (".docker/config.json", ".docker/config.json"),
        (".docker/contexts/meta.json", None),
        ("HOME/.Config/GCloud/legacy_credentials/adc.json", ".config/gcloud"),
        ("gcloud/notes.md", None),
        ("infra/prod.TFVARS", "*.tfvars"),
        ("memory/secretary-notes.md", None),
        ("memory/tfvars-howto.md", None),
    ],
)
def test_a_location_matches_consecutive_segments_anywhere_and_what_lies_below(
    path: str, expected: str | None
) -> None:
    """VX-SEC-14: a multi-segment entry matches those segments in a row at any depth, case
    aside; a directory entry covers everything below it; a similar name is not a location."""
    location = credentials.credential_location(path)
    assert (location.pattern if location else None) == expected


def test_a_symlinked_directory_into_a_credential_location_is_refused() -> None:
    """VX-SEC-14: the resolved path is judged too: `notes/` linking to `.azure/` is neither
    listed nor read through."""
    persona = standing_persona()
    root = root_of(persona)
    (root / ".azure").mkdir()
    (root / ".azure/config").write_text("[cloud]\nname = AzureCloud\n")
    os.symlink(root / ".azure", root / "notes")
    result = call(persona, "workspace_read", {"path": "notes/config"})
    assert (result["ok"], result["boundary"]) == (False, BOUNDARY), result
    listed = call(persona, "workspace_list", {})["result"]["entries"]
    assert "notes" not in [entry["name"] for entry in listed]


def test_no_reason_the_boundary_gives_is_itself_withheld() -> None:
    """VX-SEC-14, VX-SEC-7, VX-SEC-16: a refusal's reason goes through redaction; none of the
    catalogue's reasons or the detectors' kinds (Kingfisher's rule ids among them) looks like a
    credential, so none is withheld as one."""
    reasons = [location.reason for location in credentials.CREDENTIAL_LOCATIONS]
    kinds = [str(d.secret_type) for d in credentials.FORMAT_DETECTORS]
    kinds += [rule.id for rule in rule_set().rules]
    assert [text for text in reasons + kinds if credentials.looks_secret(text)] == []


@pytest.mark.parametrize(
    ("template", "stand_in", "value"),
    [
        # A sequence (detect-secrets' is_sequential_string), and nothing else.
        ('password = "{}"\n', "ABCDEFGH", fake("stand-in-sequence", 20)),
        # A template (is_templated_secret) as a URL's password, no secret-sounding word in it.
        (
            "Clone `https://user:{}@git.example.org/core.git`.\n",
            "<token>",
            fake("stand-in-template", 20),
        ),
        # Shell variables (is_prefixed_with_dollar_sign) in a generic rule's capture.
        (
            'curl -u "{}" https://api.example.com/login\n',
            "$USER:$TOKEN",
            "deploy:" + fake("stand-in-variable", 20),
        ),
        # No letter at all (is_not_alphanumeric_string): a PIN, not a sequence.
        ('password = "{}"\n', "4815162342", fake("stand-in-digits", 20)),
        # A value spelling a secret-sounding word, in capitals and with hyphens (Virgo's filter
        # reads it lower-cased, `-` as `_`): `YOUR-API-KEY` is `api_key`.
        ('API_KEY = "{}"\n', "YOUR-API-KEY", fake("stand-in-word", 20)),
    ],
    ids=["sequence", "template", "variable", "no-letter", "hyphenated-keyword"],
)
def test_each_stand_in_filter_alone_keeps_a_value_from_being_a_credential(
    template: str, stand_in: str, value: str
) -> None:
    """VX-SEC-14, VX-SEC-16: each of decision 160's value filters on its own makes a stand-in
    (a sequence, a template, a `$VARIABLE`, no letter, a secret-sounding word however it is
    cased or joined), whether a keyword assignment, a URL's password or a generic Kingfisher
    rule's capture holds it; the same place holding a random value is a credential."""
    assert credentials.find_secret(template.format(stand_in)) is None
    assert credentials.find_secret(template.format(value)) is not None


def test_the_entropy_floor_is_three_bits_a_character_inclusive_of_what_ends_the_match() -> None:
    """VX-SEC-14: a rule's match of exactly 3 bits a character (eight characters, each as often)
    is a credential, the same place holding seven characters (under 3 bits) is not the rule's:
    the floor that tells `ghp_` and 36 x's from a token is inclusive."""
    rule = "betterleaks.hashicorp-tf-password"
    assert credentials._entropy("q7Zm2Kx9q7Zm2Kx9") == credentials.ENTROPY_FLOOR == 3.0
    assert credentials.find_secret('password = "q7Zm2Kx9q7Zm2Kx9"') == rule
    assert credentials._entropy("q7Zm2Kxq7Zm2Kx") < 3.0
    assert credentials.find_secret('password = "q7Zm2Kxq7Zm2Kx"') != rule
    # Only quotes, backticks and spaces are taken off a match: an X on either end counts.
    assert credentials.find_secret('password = "Xq7Zm2K9q7Zm2K9X"') == rule


def test_an_unquoted_keyword_value_counts_only_above_the_librarys_entropy_limit() -> None:
    """VX-SEC-14: where only the keyword tells a value apart and it is not quoted (`password =
    ...` in code), it is a credential only when more random than detect-secrets' limit for
    base64 strings (4.5 bits a character), as the library itself reads it: a value of exactly
    the limit is not, the same value with two characters more is."""
    doubled, single = "Q7mZr2Lw", "k9XpV4tB8nHc3yFd"
    at_limit = "".join(
        doubled[n] + single[2 * n] + doubled[n] + single[2 * n + 1] for n in range(8)
    )
    assert credentials.ENTROPY.calculate_shannon_entropy(at_limit) == 4.5
    assert credentials.ENTROPY.entropy_limit == 4.5
    assert credentials.find_secret(f"password = {at_limit}", filename="app.py") is None
    above = at_limit + "Gj"
    assert credentials.find_secret(f"password = {above}", filename="app.py") == "Secret Keyword"


def test_no_long_line_or_long_word_reaches_a_pattern_whole() -> None:
    """VX-SEC-14: the bounds that keep crafted text from backtracking for minutes: no piece the
    format detectors read has a line over the limit (a long one comes in overlapping windows),
    and the keyword detector skips a long line and a secret-sounding word run on and on."""
    limit = credentials._LONG_LINE
    text = "eyJ" * 5000 + "\nshort\n" + "x" * (3 * limit)
    pieces = list(credentials._pieces(text))
    assert all(len(line) <= limit for piece in pieces for line in piece.split("\n"))
    assert "x" * limit in pieces and any("short" in piece for piece in pieces)
    lines = ["password" * 20 + ' = "Qv7mZr2Lw"', "x" * limit + ' password = "Qv7mZr2Lw"',
             'password = "Qv7mZr2Lw"']  # fmt: skip
    assert list(credentials._keyword_lines("\n".join(lines))) == [lines[2]]


def test_long_lines_are_read_in_overlapping_windows_and_the_rest_in_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-SEC-14: with the limit at 8, a text no line of which passes it is one piece, as it is;
    otherwise the lines up to the limit (8 included) come in runs, whole, and a longer line in
    windows of 8 that each overlap the last by half, from its first character to its last."""
    monkeypatch.setattr(credentials, "_LONG_LINE", 8)
    within = "cdefghij\nab\r\n"
    assert list(credentials._pieces(within)) == [within]
    text = "ab\ncdefghij\n0123456789ABCDEFGHIJ\nkl\nmn"
    assert list(credentials._pieces(text)) == [
        "ab\ncdefghij",
        "01234567",
        "456789AB",
        "89ABCDEF",
        "CDEFGHIJ",
        "kl\nmn",
    ]


def test_a_password_in_a_url_is_named_as_one() -> None:
    """VX-SEC-14: a URL's password too plain for the rules' entropy floor, `hunter2`, is still
    what a person chose: the refusal names it a URL's credentials."""
    text = "db = https://admin:hunter2@db.example.com/"
    assert credentials.find_secret(text) == "Basic Auth Credentials"


def test_a_line_or_a_word_just_at_the_bound_is_still_read() -> None:
    """VX-SEC-14: the keyword detector's bounds let through what they name: a line of exactly
    `_LONG_LINE` characters, and a secret-sounding word of exactly `_LONG_WORD`, are read; one
    character more of either is not."""
    assignment = 'password = "Qv7mZr2Lw"'
    padding = credentials._LONG_LINE - len(assignment) - 2
    at_line_limit = assignment + " #" + "x" * padding
    word = "password" * (credentials._LONG_WORD // len("password"))
    assert (len(at_line_limit), len(word)) == (credentials._LONG_LINE, credentials._LONG_WORD)
    lines = [at_line_limit, at_line_limit + "x", word + ' = "Qv7mZr2Lw"', word + 's = "Qv7mZr2Lw"']
    assert list(credentials._keyword_lines("\n".join(lines))) == [lines[0], lines[2]]


def test_an_unquoted_value_is_read_without_the_spaces_that_end_its_line() -> None:
    """VX-SEC-14: the unquoted-assignment pattern takes all to the end of the line, spaces too,
    and a value holding a space is no token; so a line is read without the spaces and tabs that
    end it, and `password = <token>` followed by them is still a credential."""
    token = "k9XpV4tB8nHc3yFdQ7mZr2Lw"
    for ending in ("", "   ", "\t"):
        text = f"    password = {token}{ending}\n"
        assert credentials.find_secret(text, filename="app.py") == "Secret Keyword", ending


def test_a_lock_file_or_a_swagger_file_is_not_read_for_assignments() -> None:
    """VX-SEC-14: as `detect-secrets scan` does, the keyword detector reads neither a lock file
    nor a swagger file (their secret-sounding keys name packages and API fields); each alone is
    enough, and the same line in any other file is a credential."""
    text = "password = k9XpV4tB8nHc3yFdQ7mZr2Lw\n"
    assert credentials.find_secret(text, filename="settings.py") == "Secret Keyword"
    for name in ("package-lock.json", "poetry.lock", "api/swagger.json", "docs/swagger-ui.html"):
        assert credentials.find_secret(text, filename=name) is None, name


def test_a_token_known_by_its_format_counts_whatever_word_falls_inside_it() -> None:
    """VX-SEC-14: a value a format detector finds (Slack's `xox?-` tokens, Telegram's bot
    tokens) is a credential by its shape alone, so the stand-in filters, which read words, do
    not excuse one that holds `pwd` or `PASSWORD` by chance."""
    slack = "xoxb-2-3-pwd" + fake("slack-pwd", 14)
    telegram = "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PASSWORD"
    assert credentials._stand_in(slack) and credentials._stand_in(telegram)
    assert credentials.find_secret(f"token: {slack}") == "Slack Token"
    assert credentials.find_secret(f"bot {telegram}w") == "Telegram Bot Token"


def test_crafted_text_is_judged_in_bounded_time() -> None:
    """VX-SEC-14, VX-SEC-16: a quarter megabyte each of what makes the patterns backtrack (`//`,
    `eyJ`, run-on keywords, `curl` named on and on before the curl rules' five lines) is judged
    in seconds, not the hours it would take unbounded."""
    crafted = [
        "//" * 128 * 1024,
        "eyJ" * 85 * 1024,
        ("password" * 500 + "\n") * 64,
        ("password " * 450 + "\n") * 64,
        ("curl " * 800 + "\n") * 64,
        ("curl " * 60 + "a" * 3700 + "\n") * 64,
    ]
    started = time.monotonic()
    assert [credentials.find_secret(text) for text in crafted] == [None] * 6
    assert time.monotonic() - started < 60


def test_gits_internals_are_not_read_listed_or_reached_through_a_link() -> None:
    """VX-SEC-15: a committed-then-removed settings.py with an AWS key lives on in .git/objects,
    zlib-compressed where the value scan cannot see it; no workspace tool reads .git, lists it,
    or reads it by another name, at any depth (a vendored repository's own .git too)."""
    persona = standing_persona()
    root = root_of(persona)
    loose = root / "worktrees/core/.git/objects/3f"
    loose.mkdir(parents=True)
    (loose / "a1b2").write_bytes(zlib.compress(b"blob 40\0AWS_SECRET_ACCESS_KEY=" + b"k" * 40))
    (root / "worktrees/core/.git/config").write_text("[core]\n")
    (root / "worktrees/core/src").mkdir()
    os.symlink(root / "worktrees/core/.git", root / "worktrees/core/src/history")
    for path in ("worktrees/core/.git/objects/3f/a1b2", "worktrees/core/.git/config",
                 "worktrees/core/.GIT/config", "worktrees/core/src/history/config"):  # fmt: skip
        result = call(persona, "workspace_read", {"path": path})
        assert (result["ok"], result["boundary"]) == (False, BOUNDARY), (path, result)
    listed = call(persona, "workspace_list", {"path": "worktrees/core"})["result"]["entries"]
    assert [entry["name"] for entry in listed] == ["src"]
    inside = call(persona, "workspace_list", {"path": "worktrees/core/src"})["result"]["entries"]
    assert inside == []
