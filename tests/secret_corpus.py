"""VX-SEC-16: a corpus that measures the secrets boundary's recall and false positives.

Credentials of the token families in gitleaks' default rules, each as it sits in a file an agent
meets (a settings.py line, a .env line, YAML, JSON, a curl command, a log line); ordinary files a
coding agent must read and that mention tokens, passwords, keys and long random-looking strings;
and credential locations beyond runtime.credentials' catalogue, with ordinary paths beside them.

`measure()` puts every case through `find_secret` and `credential_location`; `main()` prints
the table: `.venv/bin/python -m tests.secret_corpus`.

Every credential is built at run time from a label (`fake`), the same on every run and never a
real one; no line of this file holds one whole, so a scanner reading it finds none (only the
ordinary files the boundary misjudges, misjudged here too). Each snippet holds one credential and
nothing else credential-like, so a hit on it is that credential's.
"""

import base64
import hashlib
import json
import os
import textwrap
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import django

if TYPE_CHECKING:
    from runtime.secret_rules import RuleSet

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
BASE62 = UPPER + LOWER + DIGITS
BASE64 = BASE62 + "+/"
URLSAFE = BASE62 + "-_"
HEX = "0123456789abcdef"
LOWER36 = LOWER + DIGITS
UPPER36 = UPPER + DIGITS
BASE32 = UPPER + "234567"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


def _bytes(label: str, length: int) -> bytes:
    out, counter = b"", 0
    while len(out) < length:
        out += hashlib.sha256(f"{label}:{counter}".encode()).digest()
        counter += 1
    return out[:length]


def fake(label: str, length: int, alphabet: str = BASE62) -> str:
    """`length` characters that look random, the same on every run for the same label (the
    same strings as tests.secrets_support's `fake`)."""
    return "".join(alphabet[byte % len(alphabet)] for byte in _bytes(label, length))


def fake_uuid(label: str) -> str:
    return str(uuid.UUID(bytes=_bytes(label, 16), version=4))


def b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def jwt(label: str, claims: dict[str, object]) -> str:
    header = b64url({"alg": "HS256", "typ": "JWT"})
    return ".".join((header, b64url(claims), fake(label, 43, URLSAFE)))


def pem(kind: str, label: str) -> str:
    """A PEM block; its armour line is put together here so that this file holds none."""
    dashes = "-" * 5
    body = "\n".join(fake(f"{label}:{line}", 64, BASE64) for line in range(5))
    return f"{dashes}BEGIN {kind}{dashes}\n{body}\n{dashes}END {kind}{dashes}"


# Values ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Positive:
    """A credential as it sits in a file: `secret` is the exact value, `snippet` the text."""

    provider: str
    filename: str
    snippet: str
    secret: str

    @property
    def name(self) -> str:
        return f"{self.provider} in {self.filename}"


@dataclass(frozen=True, slots=True)
class Negative:
    """An ordinary file a coding agent must read: nothing in it is a credential."""

    name: str
    filename: str
    text: str


# Where a template puts its credential: the templates read as the files do, and keep the
# credential itself out of this file.
SECRET = "<SECRET>"


def _v(provider: str, filename: str, template: str, secret: str) -> Positive:
    return Positive(provider, filename, template.replace(SECRET, secret), secret)


def _password(label: str) -> str:
    return fake(label, 20)


def _conn(scheme: str, user: str, host: str, label: str) -> tuple[str, str]:
    password = _password(label)
    return f"{scheme}://{user}:{password}@{host}", password


POSTGRES_URL, POSTGRES_PASSWORD = _conn("postgres", "app", "db.internal:5432/app", "pg")
PSYCOPG_URL, PSYCOPG_PASSWORD = _conn("postgresql+psycopg", "web", "10.0.3.7/web", "pg2")
MONGO_SRV_URL, MONGO_SRV_PASSWORD = _conn(
    "mongodb+srv", "svc", "cluster0.ab1cd.mongodb.net/app?retryWrites=true", "mongo-srv"
)
MONGO_URL, MONGO_PASSWORD = _conn("mongodb", "admin", "mongo:27017/admin", "mongo")
REDIS_URL, REDIS_PASSWORD = _conn("redis", "", "cache:6379/0", "redis")
REDISS_URL, REDISS_PASSWORD = _conn(
    "rediss", "default", "eu1-bright-owl-31337.upstash.io:6379", "rediss"
)
MYSQL_URL, MYSQL_PASSWORD = _conn("mysql", "root", "db:3306/shop", "mysql")
AMQP_URL, AMQP_PASSWORD = _conn("amqp", "worker", "rabbit:5672/jobs", "amqp")
PLANETSCALE_DB = "pscale_pw_" + fake("pscale-pw", 43, URLSAFE)
BASIC_USER_PASSWORD = f"deployer:{_password('basic')}"
DOCKER_AUTH = b64(f"ci-bot:{_password('docker')}".encode())
SENTRY_ORG_TOKEN = (
    "sntrys_"
    + b64(json.dumps({"iat": 1717000000.0, "url": "https://sentry.io", "org": "acme"}).encode())
    + "_"
    + fake("sentry-org", 43, BASE64)
)
GRAFANA_CLOUD_TOKEN = "glc_" + b64(
    json.dumps({"o": "712345", "n": "ci-deploy", "k": fake("grafana-cloud-k", 24)}).encode()
)
GRAFANA_API_KEY = b64(
    json.dumps({"k": fake("grafana-api-k", 32), "n": "deploy", "id": 1}).encode()
).rstrip("=")
SUPABASE_SERVICE_ROLE = jwt(
    "supabase-role", {"iss": "supabase", "ref": fake("sb-ref", 20, LOWER), "role": "service_role"}
)
MAPBOX_SECRET = ".".join(
    ("sk", b64url({"u": "acme-maps", "a": fake("mapbox-a", 25, LOWER36)}), fake("mapbox", 22))
)
OP_SERVICE_TOKEN = "ops_" + b64url(
    {"signInAddress": "acme.1password.com", "userAuth": {"method": "SRPg-4096"},
     "email": fake("op-email", 14, LOWER36) + "@acme.1password.com",
     "srpX": fake("op-srp", 64, HEX), "muk": {"k": fake("op-muk", 43, URLSAFE)}}
)  # fmt: skip
GCP_PRIVATE_KEY = pem("PRIVATE KEY", "gcp-sa") + "\n"
GCP_SERVICE_ACCOUNT = json.dumps(
    {
        "type": "service_account",
        "project_id": "acme-prod",
        "private_key_id": fake("gcp-key-id", 40, HEX),
        "private_key": GCP_PRIVATE_KEY,
        "client_email": "deployer@acme-prod.iam.gserviceaccount.com",
    },
    indent=2,
)
K8S_SECRET_PASSWORD = _password("k8s-secret")

POSITIVES: tuple[Positive, ...] = (
    # AWS.
    _v("AWS", "app/settings.py", 'AWS_ACCESS_KEY_ID = "<SECRET>"\n',
       "AKIA" + fake("aws-id", 16, BASE32)),
    _v("AWS", ".env", "AWS_SECRET_ACCESS_KEY=<SECRET>\n", fake("aws-secret", 40, BASE64)),
    _v("AWS", "scripts/assume.sh", "export AWS_ACCESS_KEY_ID=<SECRET>\n",
       "ASIA" + fake("aws-sts-id", 16, BASE32)),
    _v("AWS", "infra/main.tf",
       'provider "aws" {\n  region     = "eu-west-1"\n  secret_key = "<SECRET>"\n}\n',
       fake("aws-tf-secret", 40, BASE64)),
    _v("AWS", "jobs/export.py",
       's3 = boto3.client("s3", aws_secret_access_key="<SECRET>")\n',
       fake("aws-boto-secret", 40, BASE64)),
    # GitHub.
    _v("GitHub", ".env", "GITHUB_TOKEN=<SECRET>\n", "ghp_" + fake("gh-classic", 36)),
    _v("GitHub", ".github/workflows/release.yml",
       "env:\n  GH_TOKEN: <SECRET>\n",
       "github_pat_" + fake("gh-fine-a", 22) + "_" + fake("gh-fine-b", 59)),
    _v("GitHub", "ci.log",
       "2025-03-04T10:12:55Z remote: https://x-access-token:<SECRET>@github.com/acme/core.git\n",
       "ghs_" + fake("gh-app", 36)),
    _v("GitHub", "memory/gh-cli.md", "oauth_token: <SECRET>\n", "gho_" + fake("gh-oauth", 36)),
    _v("GitHub", "tokens.json", '{"access_token": "<SECRET>", "token_type": "bearer"}\n',
       "ghu_" + fake("gh-user", 36)),
    _v("GitHub", "auth_response.json",
       '{"refresh_token": "<SECRET>", "refresh_token_expires_in": 15811200}\n',
       "ghr_" + fake("gh-refresh", 36)),
    # GitLab.
    _v("GitLab", "scripts/release.sh",
       'curl --header "PRIVATE-TOKEN: <SECRET>" https://gitlab.com/api/v4/projects\n',
       "glpat-" + fake("gl-pat", 20, URLSAFE)),
    _v("GitLab", ".gitlab-ci.yml",
       "trigger:\n  script: curl -X POST -F token=<SECRET> -F ref=main $TRIGGER_URL\n",
       "glptt-" + fake("gl-trigger", 40, HEX)),
    _v("GitLab", "runner/register.sh",
       "gitlab-runner register --registration-token <SECRET>\n",
       "GR1348941" + fake("gl-register", 20, URLSAFE)),
    _v("GitLab", "runner/config.toml",
       '[[runners]]\n  url = "https://gitlab.com"\n  token = "<SECRET>"\n',
       "glrt-" + fake("gl-runner", 20, URLSAFE)),
    _v("GitLab", "deploy/.env.ci", "CI_DEPLOY_PASSWORD=<SECRET>\n",
       "gldt-" + fake("gl-deploy", 20, URLSAFE)),
    # Slack.
    _v("Slack", ".env", "SLACK_BOT_TOKEN=<SECRET>\n",
       "xoxb-" + fake("slack-b1", 12, DIGITS) + "-" + fake("slack-b2", 13, DIGITS) + "-"
       + fake("slack-b3", 24)),
    _v("Slack", "bot/settings.py", 'SLACK_USER_TOKEN = "<SECRET>"\n',
       "xoxp-" + fake("slack-p1", 11, DIGITS) + "-" + fake("slack-p2", 12, DIGITS) + "-"
       + fake("slack-p3", 13, DIGITS) + "-" + fake("slack-p4", 32, HEX)),
    _v("Slack", "bot/manifest.yml", "socket_mode:\n  app_token: <SECRET>\n",
       "xapp-1-A" + fake("slack-a1", 10, UPPER36) + "-" + fake("slack-a2", 13, DIGITS) + "-"
       + fake("slack-a3", 64, HEX)),
    _v("Slack", "scripts/notify.sh",
       "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"done\"}' <SECRET>\n",
       "https://hooks.slack.com/services/T" + fake("slack-t", 8, UPPER36) + "/B"
       + fake("slack-hook-b", 10, UPPER36) + "/" + fake("slack-hook", 24)),
    _v("Slack", "memory/slack-config.md", "Config token for the manifest API: <SECRET>\n",
       "xoxe.xoxp-1-" + fake("slack-config", 140)),
    # Stripe.
    _v("Stripe", ".env", "STRIPE_SECRET_KEY=<SECRET>\n", "sk_live_" + fake("stripe-sk", 99)),
    _v("Stripe", "billing/client.py", 'stripe.api_key = "<SECRET>"\n',
       "rk_live_" + fake("stripe-rk", 99)),
    _v("Stripe", "web/server.js", 'const stripe = require("stripe")("<SECRET>");\n',
       "sk_test_" + fake("stripe-test", 99)),
    # OpenAI.
    _v("OpenAI", ".env", "OPENAI_API_KEY=<SECRET>\n",
       "sk-proj-" + fake("openai-proj-a", 74, URLSAFE) + "T3BlbkFJ" + fake("openai-proj-b", 74)),
    _v("OpenAI", "notebooks/chat.py", 'client = OpenAI(api_key="<SECRET>")\n',
       "sk-" + fake("openai-legacy-a", 20) + "T3BlbkFJ" + fake("openai-legacy-b", 20)),
    _v("OpenAI", "k8s/agent.yaml", "env:\n- name: OPENAI_KEY\n  value: <SECRET>\n",
       "sk-svcacct-" + fake("openai-svc-a", 74, URLSAFE) + "T3BlbkFJ" + fake("openai-svc-b", 74)),
    # Anthropic.
    _v("Anthropic", ".env", "ANTHROPIC_API_KEY=<SECRET>\n",
       "sk-ant-api03-" + fake("anthropic", 93, URLSAFE) + "AA"),
    _v("Anthropic", "scripts/usage.sh",
       'curl https://api.anthropic.com/v1/organizations/usage_report -H "x-api-key: <SECRET>"\n',
       "sk-ant-admin01-" + fake("anthropic-admin", 93, URLSAFE) + "AA"),
    # Hugging Face.
    _v("Hugging Face", ".env", "HF_TOKEN=<SECRET>\n", "hf_" + fake("hf-user", 34, UPPER + LOWER)),
    _v("Hugging Face", "train.py", 'login(token="<SECRET>")\n',
       "hf_" + fake("hf-write", 34, UPPER + LOWER)),
    _v("Hugging Face", "memory/hub.md", "Org token for the mirror: <SECRET>\n",
       "api_org_" + fake("hf-org", 34, UPPER + LOWER)),
    # HashiCorp Vault.
    _v("HashiCorp Vault", ".env", "VAULT_TOKEN=<SECRET>\n",
       "hvs.CAESI" + fake("vault-service", 90, URLSAFE)),
    _v("HashiCorp Vault", "vault-login.log", "token    <SECRET>\ntoken_duration    768h\n",
       "hvb.AAAAAQ" + fake("vault-batch", 140, URLSAFE)),
    _v("HashiCorp Vault", "scripts/vault.sh", "export VAULT_TOKEN=<SECRET>\n",
       "s." + fake("vault-legacy", 24)),
    # Terraform Cloud.
    _v("Terraform Cloud", "ci/terraform.yml", "env:\n  TF_TOKEN_app_terraform_io: <SECRET>\n",
       fake("tfc-a", 14) + ".atlasv1." + fake("tfc-b", 67)),
    # DigitalOcean.
    _v("DigitalOcean", ".env", "DIGITALOCEAN_ACCESS_TOKEN=<SECRET>\n",
       "dop_v1_" + fake("do-pat", 64, HEX)),
    _v("DigitalOcean", "oauth.json", '{"access_token": "<SECRET>", "expires_in": 2592000}\n',
       "doo_v1_" + fake("do-oauth", 64, HEX)),
    _v("DigitalOcean", "memory/do.md", "Refresh with <SECRET> if the app token lapses.\n",
       "dor_v1_" + fake("do-refresh", 64, HEX)),
    # npm.
    _v("npm", "ci/publish.sh",
       'echo "//registry.npmjs.org/:_authToken=<SECRET>" > ~/.npmrc\n',
       "npm_" + fake("npm-ci", 36)),
    _v("npm", ".env", "NPM_TOKEN=<SECRET>\n", "npm_" + fake("npm-env", 36)),
    _v("npm", "docs/registry-notes.md", "Old config:\n\n    _auth = <SECRET>\n",
       b64(f"publisher:{_password('npm-auth')}".encode())),
    # PyPI.
    _v("PyPI", ".env", "TWINE_PASSWORD=<SECRET>\n",
       "pypi-AgEIcHlwaS5vcmc" + fake("pypi-env", 100, URLSAFE)),
    _v("PyPI", ".github/workflows/publish.yml",
       "- run: twine upload -u __token__ -p <SECRET> dist/*\n",
       "pypi-AgEIcHlwaS5vcmc" + fake("pypi-ci", 100, URLSAFE)),
    # Google.
    _v("Google", "web/firebase.js", 'const firebaseConfig = { apiKey: "<SECRET>" };\n',
       "AIza" + fake("google-api", 35, URLSAFE)),
    _v("Google", "scripts/drive.sh",
       'curl -H "Authorization: Bearer <SECRET>" https://www.googleapis.com/drive/v3/files\n',
       "ya29.a0A" + fake("google-oauth", 150, URLSAFE)),
    _v("Google", "client_secret_web.json",
       '{"web": {"client_id": "1234.apps.googleusercontent.com", "client_secret": "<SECRET>"}}\n',
       "GOCSPX-" + fake("google-client", 28, URLSAFE)),
    _v("Google", "memory/gcloud.md", "refresh_token: <SECRET>\n",
       "1//0g" + fake("google-refresh", 98, URLSAFE)),
    # The key as the file spells it: a JSON string, its line breaks escaped.
    _v("Google", "ci/gcp-deployer.json", GCP_SERVICE_ACCOUNT,
       json.dumps(GCP_PRIVATE_KEY)[1:-1]),
    # Azure.
    _v("Azure", "appsettings.json",
       '{"Storage": "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=<SECRET>;'
       'EndpointSuffix=core.windows.net"}\n',
       fake("azure-storage", 86, BASE64) + "=="),
    _v("Azure", ".env", "AZURE_CLIENT_SECRET=<SECRET>\n",
       fake("azure-ad-a", 3, BASE62) + "8Q~" + fake("azure-ad-b", 34, BASE62 + "_~.-")),
    _v("Azure", "scripts/fetch.sh",
       'curl "https://acme.blob.core.windows.net/exports/report.csv?sv=2022-11-02&ss=b&srt=o'
       '&sp=r&se=2026-01-01T00:00:00Z&spr=https&sig=<SECRET>"\n',
       fake("azure-sas", 43, BASE62) + "%3D"),
    _v("Azure DevOps", "azure-pipelines.yml", "variables:\n  AZURE_DEVOPS_PAT: <SECRET>\n",
       fake("ado-pat", 52, LOWER36)),
    # Twilio.
    _v("Twilio", ".env", "TWILIO_API_KEY=<SECRET>\n", "SK" + fake("twilio-sk", 32, HEX)),
    _v("Twilio", "sms/settings.py", 'TWILIO_AUTH_TOKEN = "<SECRET>"\n',
       fake("twilio-auth", 32, HEX)),
    # SendGrid.
    _v("SendGrid", ".env", "SENDGRID_API_KEY=<SECRET>\n",
       "SG." + fake("sg-a", 22, URLSAFE) + "." + fake("sg-b", 43, URLSAFE)),
    _v("SendGrid", "mail/send.py", 'sg = SendGridAPIClient("<SECRET>")\n',
       "SG." + fake("sg-c", 22, URLSAFE) + "." + fake("sg-d", 43, URLSAFE)),
    # Mailgun.
    _v("Mailgun", ".env", "MAILGUN_API_KEY=<SECRET>\n", "key-" + fake("mailgun", 32, HEX)),
    _v("Mailgun", "mail/webhooks.py", 'MAILGUN_WEBHOOK_SIGNING_KEY = "<SECRET>"\n',
       fake("mg-sign-a", 32, HEX) + "-" + fake("mg-sign-b", 8, HEX) + "-"
       + fake("mg-sign-c", 8, HEX)),
    # Mailchimp.
    _v("Mailchimp", ".env", "MAILCHIMP_API_KEY=<SECRET>\n",
       fake("mailchimp-env", 32, HEX) + "-us14"),
    _v("Mailchimp", "newsletter/client.py", 'client.set_config({"api_key": "<SECRET>"})\n',
       fake("mailchimp-py", 32, HEX) + "-us6"),
    # Shopify.
    _v("Shopify", ".env", "SHOPIFY_ACCESS_TOKEN=<SECRET>\n", "shpat_" + fake("shpat", 32, HEX)),
    _v("Shopify", "shopify.app.toml", 'client_secret = "<SECRET>"\n',
       "shpss_" + fake("shpss", 32, HEX)),
    _v("Shopify", "memory/shop.md", "Custom app token: <SECRET>\n",
       "shpca_" + fake("shpca", 32, HEX)),
    # Square.
    _v("Square", ".env", "SQUARE_ACCESS_TOKEN=<SECRET>\n", "EAAA" + fake("square-at", 60, URLSAFE)),
    _v("Square", "payments/config.yml", "square:\n  oauth_secret: <SECRET>\n",
       "sq0csp-" + fake("square-csp", 43, URLSAFE)),
    _v("Square", "payments/legacy.py", 'SQUARE_TOKEN = "<SECRET>"\n',
       "sq0atp-" + fake("square-atp", 22, URLSAFE)),
    # Discord.
    _v("Discord", "bot/main.py", 'client.run("<SECRET>")\n',
       "M" + fake("discord-a", 25, BASE62) + "." + fake("discord-b", 6, URLSAFE) + "."
       + fake("discord-c", 27, URLSAFE)),
    _v("Discord", "scripts/alert.sh",
       "curl -H 'Content-Type: application/json' -d '{\"content\":\"down\"}' <SECRET>\n",
       "https://discord.com/api/webhooks/" + fake("discord-hook-id", 18, DIGITS) + "/"
       + fake("discord-hook", 68, URLSAFE)),
    _v("Discord", ".env", "DISCORD_CLIENT_SECRET=<SECRET>\n",
       fake("discord-client", 32, URLSAFE)),
    # Telegram.
    _v("Telegram", "scripts/tg.sh",
       "curl https://api.telegram.org/bot<SECRET>/sendMessage -d chat_id=42 -d text=done\n",
       fake("tg-id", 10, DIGITS) + ":AA" + fake("tg", 33, URLSAFE)),
    _v("Telegram", ".env", "TELEGRAM_BOT_TOKEN=<SECRET>\n",
       fake("tg-id-2", 10, DIGITS) + ":AA" + fake("tg-2", 33, URLSAFE)),
    # Twitch.
    _v("Twitch", ".env", "TWITCH_CLIENT_SECRET=<SECRET>\n", fake("twitch", 30, LOWER36)),
    _v("Twitch", "bot/irc.cfg", "[irc]\nnick = acmebot\npass = oauth:<SECRET>\n",
       fake("twitch-oauth", 30, LOWER36)),
    # Heroku.
    _v("Heroku", ".env", "HEROKU_API_KEY=<SECRET>\n", fake_uuid("heroku")),
    _v("Heroku", ".github/workflows/deploy.yml", "env:\n  HEROKU_API_KEY: <SECRET>\n",
       "HRKU-AA" + fake("heroku-v2", 58, URLSAFE)),
    # Databricks.
    _v("Databricks", "memory/databricks.md",
       "[DEFAULT]\nhost = https://acme.cloud.databricks.com\ntoken = <SECRET>\n",
       "dapi" + fake("databricks", 32, HEX)),
    _v("Databricks", "jobs/submit.py",
       'w = WorkspaceClient(host=HOST, token="<SECRET>")\n',
       "dapi" + fake("databricks-py", 32, HEX) + "-2"),
    # Doppler.
    _v("Doppler", ".env", "DOPPLER_TOKEN=<SECRET>\n", "dp.pt." + fake("doppler-pt", 43)),
    _v("Doppler", "Dockerfile", "ENV DOPPLER_TOKEN=<SECRET>\n",
       "dp.st.prd." + fake("doppler-st", 43)),
    # Postman.
    _v("Postman", "scripts/collections.sh",
       'curl -H "X-Api-Key: <SECRET>" https://api.getpostman.com/collections\n',
       "PMAK-" + fake("postman-a", 24, HEX) + "-" + fake("postman-b", 34, HEX)),
    _v("Postman", ".env", "POSTMAN_API_KEY=<SECRET>\n",
       "PMAK-" + fake("postman-c", 24, HEX) + "-" + fake("postman-d", 34, HEX)),
    # Pulumi.
    _v("Pulumi", ".env", "PULUMI_ACCESS_TOKEN=<SECRET>\n", "pul-" + fake("pulumi", 40, HEX)),
    _v("Pulumi", ".github/workflows/infra.yml", "env:\n  PULUMI_ACCESS_TOKEN: <SECRET>\n",
       "pul-" + fake("pulumi-ci", 40, HEX)),
    # Linear.
    _v("Linear", ".env", "LINEAR_API_KEY=<SECRET>\n", "lin_api_" + fake("linear", 40)),
    _v("Linear", "tools/linear.js", 'const linear = new LinearClient({ apiKey: "<SECRET>" });\n',
       "lin_api_" + fake("linear-js", 40)),
    # Atlassian.
    _v("Atlassian", ".env", "JIRA_API_TOKEN=<SECRET>\n",
       "ATATT3xFfGF0" + fake("atlassian", 180, URLSAFE) + "=" + fake("atl-crc", 8, HEX).upper()),
    _v("Atlassian", "scripts/jira.sh",
       "curl -u ada@acme.com:<SECRET> https://acme.atlassian.net/rest/api/3/myself\n",
       fake("atlassian-old", 24, LOWER36)),
    _v("Atlassian", "confluence.yml", "confluence:\n  api_token: <SECRET>\n",
       "ATATT3xFfGF0" + fake("confluence", 180, URLSAFE) + "=" + fake("cf-crc", 8, HEX).upper()),
    _v("Bitbucket", ".env", "BITBUCKET_APP_PASSWORD=<SECRET>\n",
       "ATBB" + fake("bitbucket", 32) + fake("bb-crc", 8, HEX).upper()),
    # Sentry.
    _v("Sentry", "memory/sentryclirc.md", "[auth]\ntoken=<SECRET>\n", SENTRY_ORG_TOKEN),
    _v("Sentry", ".env", "SENTRY_AUTH_TOKEN=<SECRET>\n", "sntryu_" + fake("sentry-user", 64, HEX)),
    # Grafana.
    _v("Grafana", ".env", "GRAFANA_CLOUD_TOKEN=<SECRET>\n", GRAFANA_CLOUD_TOKEN),
    _v("Grafana", "dashboards/sync.py", 'headers = {"Authorization": "Bearer <SECRET>"}\n',
       "glsa_" + fake("grafana-sa", 32) + "_" + fake("grafana-sa-crc", 8, HEX)),
    _v("Grafana", "provisioning/notes.md", "Legacy API key: <SECRET>\n", GRAFANA_API_KEY),
    # New Relic.
    _v("New Relic", ".env", "NEW_RELIC_API_KEY=<SECRET>\n", "NRAK-" + fake("nr-user", 27, UPPER36)),
    _v("New Relic", "newrelic.yml", "common:\n  license_key: <SECRET>\n",
       fake("nr-license", 36, HEX) + "NRAL"),
    _v("New Relic", "scripts/events.sh",
       'curl -H "X-Insert-Key: <SECRET>" https://insights-collector.newrelic.com/v1/accounts\n',
       "NRII-" + fake("nr-insert", 32, URLSAFE)),
    # Datadog.
    _v("Datadog", ".env", "DD_API_KEY=<SECRET>\n", fake("dd-api", 32, HEX)),
    _v("Datadog", "datadog.yaml", "api_key: <SECRET>\nsite: datadoghq.eu\n",
       fake("dd-api-yaml", 32, HEX)),
    # Dropbox.
    _v("Dropbox", ".env", "DROPBOX_ACCESS_TOKEN=<SECRET>\n",
       "sl." + fake("dropbox-sl", 135, URLSAFE)),
    _v("Dropbox", "backup/dropbox.py", 'dbx = dropbox.Dropbox("<SECRET>")\n',
       fake("dropbox-ll-a", 11, LOWER36) + "AAAAAAAAAA" + fake("dropbox-ll-b", 43, URLSAFE)),
    # Cloudflare.
    _v("Cloudflare", ".env", "CLOUDFLARE_API_TOKEN=<SECRET>\n", fake("cf-token", 40, URLSAFE)),
    _v("Cloudflare", "scripts/purge.sh",
       'curl -H "X-Auth-Email: ops@acme.com" -H "X-Auth-Key: <SECRET>" '
       "https://api.cloudflare.com/client/v4/zones\n",
       fake("cf-global", 37, HEX)),
    _v("Cloudflare", "wrangler.toml", '[vars]\nORIGIN_CA_KEY = "<SECRET>"\n',
       "v1.0-" + fake("cf-origin-a", 24, HEX) + "-" + fake("cf-origin-b", 146, HEX)),
    # Fly.io.
    _v("Fly.io", ".env", "FLY_API_TOKEN=<SECRET>\n",
       "FlyV1 fm2_" + fake("fly-macaroon", 300, BASE64)),
    _v("Fly.io", ".github/workflows/fly.yml", "env:\n  FLY_API_TOKEN: <SECRET>\n",
       "fo1_" + fake("fly-oauth", 43, URLSAFE)),
    # Netlify.
    _v("Netlify", ".env", "NETLIFY_AUTH_TOKEN=<SECRET>\n", "nfp_" + fake("netlify", 40)),
    _v("Netlify", "scripts/deploy.sh", "netlify deploy --prod --auth <SECRET>\n",
       fake("netlify-old", 43, URLSAFE)),
    # Vercel.
    _v("Vercel", ".env", "VERCEL_TOKEN=<SECRET>\n", fake("vercel", 24)),
    _v("Vercel", ".github/workflows/preview.yml",
       "- run: vercel deploy --token=<SECRET>\n", fake("vercel-ci", 24)),
    # PlanetScale.
    _v("PlanetScale", ".env",
       "DATABASE_URL=mysql://u8x2k1:<SECRET>@aws.connect.psdb.cloud/shop?sslaccept=strict\n",
       PLANETSCALE_DB),
    _v("PlanetScale", "scripts/branch.sh", "export PLANETSCALE_SERVICE_TOKEN=<SECRET>\n",
       "pscale_tkn_" + fake("pscale-tkn", 43, URLSAFE)),
    # Railway.
    _v("Railway", ".env", "RAILWAY_TOKEN=<SECRET>\n", fake_uuid("railway")),
    # Supabase.
    _v("Supabase", ".env", "SUPABASE_ACCESS_TOKEN=<SECRET>\n", "sbp_" + fake("supabase", 40, HEX)),
    _v("Supabase", "server/db.ts", 'const supabase = createClient(URL, "<SECRET>");\n',
       SUPABASE_SERVICE_ROLE),
    _v("Supabase", "supabase.yml", "supabase:\n  secret_key: <SECRET>\n",
       "sb_secret_" + fake("sb-secret", 31, URLSAFE)),
    # Age.
    _v("Age", "memory/sops.md",
       "# created: 2025-03-04T10:12:55Z\n# public key: age1"
       + fake("age-public", 58, BECH32.lower()) + "\n<SECRET>\n",
       "AGE-SECRET-KEY-1" + fake("age", 58, BECH32)),
    _v("Age", ".env", "SOPS_AGE_KEY=<SECRET>\n", "AGE-SECRET-KEY-1" + fake("age-env", 58, BECH32)),
    # Private keys.
    _v("Private key", "memory/deploy-key.md", "Deploy key:\n\n<SECRET>\n",
       pem("RSA PRIVATE KEY", "rsa")),
    _v("Private key", "certs/README.md", "```\n<SECRET>\n```\n", pem("EC PRIVATE KEY", "ec")),
    _v("Private key", "memory/ssh.md", "<SECRET>\n", pem("OPENSSH PRIVATE KEY", "openssh")),
    _v("Private key", "release/signing.asc", "<SECRET>\n", pem("PGP PRIVATE KEY BLOCK", "pgp")),
    _v("Private key", "server/tls.py", 'KEY = """<SECRET>"""\n', pem("PRIVATE KEY", "pkcs8")),
    _v("Private key", "memory/key-backup.txt", "<SECRET>\n",
       pem("ENCRYPTED PRIVATE KEY", "pkcs8-encrypted")),
    _v("Private key", "legacy/dsa.txt", "<SECRET>\n", pem("DSA PRIVATE KEY", "dsa")),
    # JSON Web Tokens.
    _v("JWT", "access.log",
       '10.0.0.7 - - [04/Mar/2025:10:12:55 +0000] "GET /api/me" 200 "Authorization: Bearer '
       '<SECRET>"\n',
       jwt("jwt-log", {"sub": "42", "scope": "admin", "exp": 1741083175})),
    _v("JWT", "k8s/ci-kubeconfig.yaml", "users:\n- name: ci\n  user:\n    token: <SECRET>\n",
       jwt("jwt-k8s", {"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:ci"})),
    _v("JWT", "fixtures/session.json", '{"user": 42, "session": "<SECRET>"}\n',
       jwt("jwt-json", {"sid": fake("sid", 16), "aud": "web"})),
    # Connection strings with their passwords.
    _v("PostgreSQL", ".env", f"DATABASE_URL={POSTGRES_URL}\n", POSTGRES_PASSWORD),
    _v("PostgreSQL", "app/settings.py", f'DATABASE_URL = "{PSYCOPG_URL}"\n', PSYCOPG_PASSWORD),
    _v("MongoDB", ".env", f"MONGODB_URI={MONGO_SRV_URL}\n", MONGO_SRV_PASSWORD),
    _v("MongoDB", "docker-compose.yml",
       f"services:\n  api:\n    environment:\n      MONGO_URL: {MONGO_URL}\n", MONGO_PASSWORD),
    _v("Redis", "worker/celeryconfig.py", f'broker_url = "{REDIS_URL}"\n', REDIS_PASSWORD),
    _v("Redis", ".env", f"REDIS_URL={REDISS_URL}\n", REDISS_PASSWORD),
    _v("MySQL", "config/database.yml", f"production:\n  url: {MYSQL_URL}\n", MYSQL_PASSWORD),
    _v("RabbitMQ", "worker/settings.py", f'CELERY_BROKER_URL = "{AMQP_URL}"\n', AMQP_PASSWORD),
    # Generic assignments (gitleaks' generic-api-key).
    _v("Generic", "app/settings.py", 'API_KEY = "<SECRET>"\n', fake("generic-api", 32)),
    _v("Generic", "config/app.yml", "integrations:\n  auth_token: <SECRET>\n",
       fake("generic-auth", 40, URLSAFE)),
    _v("Generic", "oauth.json", '{"client_id": "web", "client_secret": "<SECRET>"}\n',
       fake("generic-client", 40, URLSAFE)),
    _v("Generic", "shop/settings.py", 'SECRET_KEY = "<SECRET>"\n',
       fake("django-secret", 50, LOWER36 + "!@#%^&*(-_=+)")),
    _v("Generic", "app/__init__.py", 'app.config["SECRET_KEY"] = "<SECRET>"\n',
       fake("flask-secret", 32, HEX)),
    _v("Generic", "src/main/resources/application.properties",
       "spring.datasource.url=jdbc:postgresql://db:5432/app\nspring.datasource.password=<SECRET>\n",
       _password("spring")),
    _v("Generic", "web/config.js", 'export const config = { apiKey: "<SECRET>" };\n',
       fake("generic-js", 32, HEX)),
    _v("Generic", "notes.txt", "access_token=<SECRET>\n", fake("generic-access", 40)),
    # Registry and HTTP logins.
    _v("Docker registry", "memory/registry.json",
       '{"auths": {"ghcr.io": {"auth": "<SECRET>"}}}\n', DOCKER_AUTH),
    _v("HTTP Basic auth", "scripts/backup.sh",
       "curl -u <SECRET> https://backup.acme.internal/api/snapshots\n", BASIC_USER_PASSWORD),
    _v("HTTP Basic auth", "requests.http",
       "GET https://api.acme.internal/v1/users\nAuthorization: Basic <SECRET>\n",
       b64(BASIC_USER_PASSWORD.encode())),
    _v("Kubernetes Secret", "k8s/db-secret.yaml",
       "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: <SECRET>\n",
       b64(K8S_SECRET_PASSWORD.encode())),
    # One case each for the rest of gitleaks' families.
    _v("Alibaba Cloud", ".env", "ALIBABA_CLOUD_ACCESS_KEY_ID=<SECRET>\n",
       "LTAI" + fake("alibaba", 20, LOWER36)),
    _v("Adobe", ".env", "ADOBE_CLIENT_SECRET=<SECRET>\n", "p8e-" + fake("adobe", 32, LOWER36)),
    _v("Airtable", ".env", "AIRTABLE_TOKEN=<SECRET>\n",
       "pat" + fake("airtable-a", 14) + "." + fake("airtable-b", 64, HEX)),
    _v("Asana", ".env", "ASANA_ACCESS_TOKEN=<SECRET>\n",
       "1/" + fake("asana-a", 16, DIGITS) + ":" + fake("asana-b", 32, HEX)),
    _v("Clojars", "project.clj", ':deploy-repositories [["clojars" {:password "<SECRET>"}]]\n',
       "CLOJARS_" + fake("clojars", 60, LOWER36)),
    _v("Codecov", ".github/workflows/test.yml", "with:\n  token: <SECRET>\n",
       fake_uuid("codecov")),
    _v("Contentful", ".env", "CONTENTFUL_MANAGEMENT_TOKEN=<SECRET>\n",
       "CFPAT-" + fake("contentful", 43, URLSAFE)),
    _v("Dynatrace", ".env", "DT_API_TOKEN=<SECRET>\n",
       "dt0c01." + fake("dt-a", 24, UPPER36) + "." + fake("dt-b", 64, UPPER36)),
    _v("EasyPost", "shipping/client.py", 'easypost.api_key = "<SECRET>"\n',
       "EZAK" + fake("easypost", 54, LOWER36)),
    _v("Flutterwave", ".env", "FLW_SECRET_KEY=<SECRET>\n",
       "FLWSECK_TEST-" + fake("flutterwave", 32, HEX) + "-X"),
    _v("Frame.io", ".env", "FRAMEIO_TOKEN=<SECRET>\n", "fio-u-" + fake("frameio", 64, URLSAFE)),
    _v("GoCardless", ".env", "GOCARDLESS_ACCESS_TOKEN=<SECRET>\n",
       "live_" + fake("gocardless", 40, URLSAFE)),
    _v("Harness", ".env", "HARNESS_API_KEY=<SECRET>\n",
       "pat." + fake("harness-a", 22, URLSAFE) + "." + fake("harness-b", 24, HEX) + "."
       + fake("harness-c", 20)),
    _v("Infracost", ".env", "INFRACOST_API_KEY=<SECRET>\n", "ico-" + fake("infracost", 32)),
    _v("Mapbox", "web/map.js", 'mapboxgl.accessToken = "<SECRET>";\n', MAPBOX_SECRET),
    _v("MaxMind", "GeoIP.conf", "AccountID 123456\nLicenseKey <SECRET>\n",
       fake("maxmind-a", 6) + "_" + fake("maxmind-b", 29) + "_mmk"),
    _v("Microsoft Teams", "scripts/teams.sh",
       "curl -H 'Content-Type: application/json' -d @card.json '<SECRET>'\n",
       "https://acme.webhook.office.com/webhookb2/" + fake_uuid("teams-a") + "@"
       + fake_uuid("teams-b") + "/IncomingWebhook/" + fake("teams-c", 32, HEX) + "/"
       + fake_uuid("teams-d")),
    _v("Okta", "scripts/okta.sh",
       'curl -H "Authorization: SSWS <SECRET>" https://acme.okta.com/api/v1/users\n',
       "00" + fake("okta", 40, URLSAFE)),
    _v("OpenShift", "memory/oc.md", "oc login --token=<SECRET> --server=https://api.ocp:6443\n",
       "sha256~" + fake("openshift", 43, URLSAFE)),
    _v("Perplexity", ".env", "PERPLEXITY_API_KEY=<SECRET>\n", "pplx-" + fake("perplexity", 48)),
    _v("Prefect", ".env", "PREFECT_API_KEY=<SECRET>\n", "pnu_" + fake("prefect", 36, LOWER36)),
    _v("ReadMe", ".env", "README_API_KEY=<SECRET>\n", "rdme_" + fake("readme", 70, LOWER36)),
    _v("RubyGems", "memory/gem.md", "---\n:rubygems_api_key: <SECRET>\n",
       "rubygems_" + fake("rubygems", 48, HEX)),
    _v("Scalingo", ".env", "SCALINGO_API_TOKEN=<SECRET>\n",
       "tk-us-" + fake("scalingo", 48, URLSAFE)),
    _v("Brevo", ".env", "BREVO_API_KEY=<SECRET>\n",
       "xkeysib-" + fake("brevo-a", 64, HEX) + "-" + fake("brevo-b", 16)),
    _v("Shippo", ".env", "SHIPPO_API_TOKEN=<SECRET>\n", "shippo_live_" + fake("shippo", 40, HEX)),
    _v("Sourcegraph", ".env", "SRC_ACCESS_TOKEN=<SECRET>\n",
       "sgp_" + fake("sourcegraph-a", 16, HEX) + "_" + fake("sourcegraph-b", 40, HEX)),
    _v("Typeform", ".env", "TYPEFORM_TOKEN=<SECRET>\n", "tfp_" + fake("typeform", 59, URLSAFE)),
    _v("1Password", ".env", "OP_SERVICE_ACCOUNT_TOKEN=<SECRET>\n", OP_SERVICE_TOKEN),
    _v("Twitter", ".env", "TWITTER_BEARER_TOKEN=<SECRET>\n",
       "A" * 22 + fake("twitter", 90, BASE62 + "%")),
    _v("Facebook", ".env", "FACEBOOK_PAGE_TOKEN=<SECRET>\n", "EAAB" + fake("facebook", 180)),
    _v("JFrog Artifactory", ".env", "ARTIFACTORY_API_KEY=<SECRET>\n", "AKCp" + fake("jfrog", 69)),
    _v("NuGet", "scripts/pack.sh",
       "dotnet nuget push *.nupkg --api-key <SECRET> --source nuget.org\n",
       "oy2" + fake("nuget", 43, LOWER36)),
    _v("Octopus Deploy", ".env", "OCTOPUS_API_KEY=<SECRET>\n",
       "API-" + fake("octopus", 26, UPPER36)),
    _v("Notion", ".env", "NOTION_TOKEN=<SECRET>\n", "ntn_" + fake("notion", 46)),
    _v("LaunchDarkly", ".env", "LAUNCHDARKLY_SDK_KEY=<SECRET>\n", "sdk-" + fake_uuid("ld")),
    _v("Duffel", ".env", "DUFFEL_ACCESS_TOKEN=<SECRET>\n",
       "duffel_live_" + fake("duffel", 43, URLSAFE)),
    _v("Cohere", "rag/embed.py", 'co = cohere.Client("<SECRET>")\n', fake("cohere", 40)),
    _v("Groq", ".env", "GROQ_API_KEY=<SECRET>\n", "gsk_" + fake("groq", 52)),
    _v("Algolia", "search/index.py", 'client = SearchClient.create("ABC123XYZ", "<SECRET>")\n',
       fake("algolia", 32, HEX)),
    _v("Snyk", ".env", "SNYK_TOKEN=<SECRET>\n", fake_uuid("snyk")),
    _v("Sidekiq", ".env", "BUNDLE_ENTERPRISE__CONTRIBSYS__COM=<SECRET>\n",
       fake("sidekiq-a", 8, HEX) + ":" + fake("sidekiq-b", 8, HEX)),
    _v("Plaid", "bank/link.py", 'PLAID_ACCESS_TOKEN = "<SECRET>"\n',
       "access-production-" + fake_uuid("plaid")),
    _v("Zendesk", ".env", "ZENDESK_API_TOKEN=<SECRET>\n", fake("zendesk", 40)),
    _v("Yandex", ".env", "YANDEX_OAUTH_TOKEN=<SECRET>\n", "y0_" + fake("yandex", 55, URLSAFE)),
)  # fmt: skip

# Ordinary files --------------------------------------------------------------------------------

SHA256_OF_ABC = hashlib.sha256(b"abc").hexdigest()
YARN_SHA1 = fake("yarn", 40, HEX)
PNG = b64(b"\x89PNG\r\n\x1a\n" + _bytes("png", 180))
# Public examples that documentation and tests copy everywhere; put together so that this file
# holds none of them whole.
AWS_DOCS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_DOCS_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
JWT_IO_EXAMPLE = ".".join(
    (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
        "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ",
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    )
)


def _n(name: str, filename: str, text: str) -> Negative:
    return Negative(name, filename, textwrap.dedent(text).lstrip("\n"))


NEGATIVES: tuple[Negative, ...] = (
    _n("view reading a bearer token", "api/views.py", '''
        def me(request):
            token = request.headers.get("Authorization", "").removeprefix("Bearer ")
            if not token:
                return JsonResponse({"error": "missing token"}, status=401)
            return JsonResponse(profile_for(verify_token(token)))
        '''),
    _n("form with a password field", "accounts/forms.py", '''
        class SignupForm(forms.Form):
            email = forms.EmailField()
            password_field = forms.CharField(widget=forms.PasswordInput, min_length=12)
            password_confirm = forms.CharField(widget=forms.PasswordInput)
        '''),
    _n("settings reading secrets from the environment", "app/settings.py", '''
        import os

        SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
        DATABASES = {"default": {"PASSWORD": os.environ.get("DB_PASSWORD", "")}}
        AUTH_PASSWORD_VALIDATORS = [{"NAME": "django.contrib.auth.password_validation"}]
        '''),
    _n("migration with UUIDs", "accounts/migrations/0002_seed.py", f'''
        ROLES = [
            ("{fake_uuid("role-admin")}", "admin"),
            ("{fake_uuid("role-viewer")}", "viewer"),
        ]
        '''),
    _n("git log", "memory/history.txt", f'''
        commit {fake("commit-1", 40, HEX)}
        Author: Ada Lovelace <ada@example.com>
        Date:   Tue Mar 4 10:12:55 2025 +0100

            Rotate the token cache keys

        commit {fake("commit-2", 40, HEX)}
        Merge: {fake("commit-3", 7, HEX)} {fake("commit-4", 7, HEX)}
        '''),
    _n("CSS with a base64 image", "web/styles.css", f'''
        .logo {{
          background-image: url("data:image/png;base64,{PNG}");
          color: #1f2937;
        }}
        '''),
    _n("package-lock integrity", "package-lock.json", json.dumps(
        {"name": "web", "lockfileVersion": 3, "packages": {"node_modules/left-pad": {
            "version": "1.3.0",
            "resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
            "integrity": "sha512-" + fake("integrity", 86, BASE64) + "=="}}}, indent=2)),
    _n("yarn.lock", "yarn.lock", f'''
        "left-pad@^1.3.0":
          version "1.3.0"
          resolved "https://registry.yarnpkg.com/left-pad/-/left-pad-1.3.0.tgz#{YARN_SHA1}"
          integrity sha512-{fake("yarn-integrity", 86, BASE64)}==
        '''),
    _n("poetry.lock", "poetry.lock", f'''
        [[package]]
        name = "django"
        version = "5.1.4"
        files = [
            {{file = "Django-5.1.4-py3-none-any.whl", hash = "sha256:{fake("poetry", 64, HEX)}"}},
        ]

        [metadata]
        content-hash = "{fake("poetry-content", 64, HEX)}"
        '''),
    _n("go.sum", "go.sum", f'''
        github.com/pkg/errors v0.9.1 h1:{fake("gosum-1", 43, BASE64)}=
        github.com/pkg/errors v0.9.1/go.mod h1:{fake("gosum-2", 43, BASE64)}=
        '''),
    _n("Cargo.lock", "Cargo.lock", f'''
        [[package]]
        name = "serde"
        version = "1.0.217"
        source = "registry+https://github.com/rust-lang/crates.io-index"
        checksum = "{fake("cargo", 64, HEX)}"
        '''),
    _n("pip requirements with hashes", "requirements.txt", f'''
        django==5.1.4 \\
            --hash=sha256:{fake("pip-1", 64, HEX)} \\
            --hash=sha256:{fake("pip-2", 64, HEX)}
        '''),
    _n("pnpm lock", "pnpm-lock.yaml", f'''
        packages:
          left-pad@1.3.0:
            resolution: {{integrity: sha512-{fake("pnpm", 86, BASE64)}==}}
        '''),
    _n(".env.example with placeholders", ".env.example", '''
        OPENAI_API_KEY=YOUR_API_KEY
        STRIPE_SECRET_KEY=sk_live_...
        DATABASE_URL=postgres://localhost/app
        '''),
    _n("README with a token placeholder", "README.md", '''
        ## Setup

        Create a token and export it before running the CLI:

            export API_TOKEN=<token>
            curl -H "Authorization: Bearer $API_TOKEN" https://api.example.com/v1/me
        '''),
    _n("docs mentioning key prefixes", "docs/models.md", '''
        Set `OPENAI_API_KEY` to your key. OpenAI keys start with `sk-` (`sk-proj-...` for
        project keys), Anthropic's with `sk-ant-`. Keep them out of the repository.
        '''),
    _n("CSS colours", "web/theme.css", '''
        :root {
          --primary: #1d4ed8;
          --primary-dark: #1e3a8a;
          --accent: #f59e0b;
          --surface: rgba(15, 23, 42, 0.85);
        }
        '''),
    _n("test with a known sha256", "tests/test_digest.py", f'''
        def test_sha256_of_abc():
            assert hashlib.sha256(b"abc").hexdigest() == "{SHA256_OF_ABC}"
        '''),
    _n("test with a long hex fixture", "tests/test_signing.py", f'''
        EXPECTED_SIGNATURE = "{fake("signature", 128, HEX)}"
        EXPECTED_DIGEST = "{fake("digest", 64, HEX)}"
        '''),
    _n("URLs without credentials", "docs/endpoints.md", '''
        - https://api.github.com/repos/acme/core/pulls?state=open&per_page=100
        - https://hooks.example.com/build-status
        - git@github.com:acme/core.git
        - ssh://git@gitlab.com:22/acme/core.git
        '''),
    _n("local database URLs", "app/local_settings.py", '''
        DATABASE_URL = "postgres://localhost/db"
        CACHE_URL = "redis://localhost:6379/0"
        MONGO_URL = "mongodb://localhost:27017/test"
        REPLICA_URL = "postgres://app@replica.internal/app"
        '''),
    _n("docker-compose with variables", "docker-compose.yml", '''
        services:
          db:
            image: postgres:17
            environment:
              POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}
              POSTGRES_USER: app
        '''),
    _n("Kubernetes secretKeyRef", "k8s/deployment.yaml", '''
        env:
        - name: DB_PASSWORD
          valueFrom:
            secretKeyRef:
              name: db-credentials
              key: password
        '''),
    _n("workflow using repository secrets", ".github/workflows/ci.yml", '''
        jobs:
          test:
            steps:
              - uses: actions/checkout@v4
                with:
                  token: ${{ secrets.GITHUB_TOKEN }}
              - run: make test
                env:
                  API_KEY: ${{ secrets.API_KEY }}
        '''),
    _n("Terraform sensitive variable", "infra/variables.tf", '''
        variable "db_password" {
          type      = string
          sensitive = true
        }

        resource "aws_db_instance" "main" {
          password = var.db_password
        }
        '''),
    _n("login form script", "web/login.js", '''
        const passwordInput = document.querySelector("#password");
        const apiKeyLabel = "API key";
        if (passwordInput.value.length < 12) { showError("password too short"); }
        '''),
    _n("typed function handling keys", "billing/keys.py", '''
        def rotate_api_key(api_key: str, *, secret_store: SecretStore) -> str:
            """Replace `api_key` by a fresh one and return it."""
            return secret_store.rotate(api_key)
        '''),
    _n("changelog", "CHANGELOG.md", '''
        ## 2.1.0
        - JWT sessions replace cookies
        - API keys can be revoked from the settings page
        - Passwords need 12 characters
        '''),
    _n("notebook with a base64 PNG output", "analysis.ipynb", json.dumps(
        {"cells": [{"cell_type": "code", "outputs": [{"data": {"image/png": PNG}}]}]})),
    _n("SVG icon", "web/icons/key.svg",
       '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path d="M7 14a3 3 0 1 1 '
       '3-3h11v3h-2v3h-3v-3h-6a3 3 0 0 1-3 3z"/></svg>\n'),
    _n("minified JavaScript", "web/vendor.min.js",
       '!function(e,t){"object"==typeof exports?module.exports=t():e.lib=t()}(this,function(){'
       'var n="0123456789abcdef",r=function(e){return e.split("").map(function(c){return '
       "n.indexOf(c)})};return{hex:r,token:function(){return r(Date.now().toString(16))}}});\n"),
    _n("Dockerfile using a build secret", "Dockerfile", '''
        FROM python:3.13-slim
        ARG NPM_TOKEN
        RUN --mount=type=secret,id=npmrc,target=/root/.npmrc npm ci
        '''),
    _n("HTML with subresource integrity", "web/index.html", f'''
        <script src="https://cdn.example.com/lib.js"
                integrity="sha384-{fake("sri", 64, BASE64)}"
                crossorigin="anonymous"></script>
        '''),
    _n("nginx TLS config", "deploy/nginx.conf", '''
        server {
            listen 443 ssl;
            ssl_certificate     /etc/ssl/certs/acme.crt;
            ssl_certificate_key /etc/ssl/private/acme.key;
        }
        '''),
    _n("log with request and trace ids", "app.log", f'''
        2025-03-04T10:12:55Z INFO request_id={fake("req", 32, HEX)} path=/api/token status=200
        2025-03-04T10:12:56Z INFO trace_id={fake("trace", 32, HEX)} span_id={fake("span", 16, HEX)}
        '''),
    _n("OpenAPI security schemes", "openapi.yaml", '''
        components:
          securitySchemes:
            bearerAuth:
              type: http
              scheme: bearer
              bearerFormat: JWT
            apiKeyAuth:
              type: apiKey
              in: header
              name: X-API-Key
        '''),
    _n(".gitignore", ".gitignore", ".env\n.envrc\n*.pem\n*.tfstate\nsecrets/\n"),
    _n("i18n strings", "locales/fr.json", json.dumps(
        {"login": {"password": "Mot de passe", "forgot_password": "Mot de passe oublié ?",
                   "api_key": "Clé d'API"}}, ensure_ascii=False, indent=2)),
    _n("SQL schema", "db/schema.sql", '''
        CREATE TABLE users (
            id uuid PRIMARY KEY,
            email text NOT NULL UNIQUE,
            password_hash varchar(255) NOT NULL,
            api_key_prefix char(8)
        );
        '''),
    _n("Java entity", "src/main/java/acme/User.java", '''
        @Entity
        public class User {
            @Column(name = "password_hash")
            private String passwordHash;
            private String apiKeyPrefix;
        }
        '''),
    _n("Go struct", "internal/auth/token.go", '''
        type Token struct {
            Value     string    `json:"token"`
            ExpiresAt time.Time `json:"expires_at"`
        }
        '''),
    _n("Rust lexer", "src/lexer.rs", '''
        while let Some(token) = lexer.next_token() {
            tokens.push(token);
        }
        '''),
    _n("TypeScript interface", "web/src/types.ts", '''
        export interface Credentials {
          apiKey: string;
          password?: string;
        }
        '''),
    _n("code generating a token", "accounts/tokens.py", '''
        import secrets

        DEFAULT_TOKEN_BYTES = 32


        def new_reset_token() -> str:
            return secrets.token_urlsafe(DEFAULT_TOKEN_BYTES)
        '''),
    _n("shell prompt for a password", "scripts/login.sh", '''
        read -rsp "Password: " PASSWORD
        echo
        curl -u "$USER:$PASSWORD" https://api.example.com/login
        '''),
    _n("Makefile", "Makefile",
       "deploy:\n\taws --profile $(AWS_PROFILE) s3 sync dist/ s3://$(BUCKET)/\n"),
    _n("Ansible vault reference", "deploy/vars.yml", '''
        db_user: app
        db_password: "{{ vault_db_password }}"
        api_token: "{{ lookup('env', 'API_TOKEN') }}"
        '''),
    _n("Helm values", "chart/values.yaml", '''
        auth:
          existingSecret: db-credentials
          password: ""
          secretKeys:
            adminPasswordKey: admin-password
        '''),
    _n("CSV with UUIDs", "data/users.csv",
       "id,name,role\n" + "".join(f"{fake_uuid(f'user-{i}')},user{i},viewer\n" for i in range(4))),
    _n("image digests", "k8s/kustomization.yaml", f'''
        images:
        - name: ghcr.io/acme/api
          digest: sha256:{fake("image", 64, HEX)}
        '''),
    _n("pinned actions", ".github/workflows/lint.yml", f'''
        steps:
          - uses: actions/checkout@{fake("checkout-sha", 40, HEX)} # v4.2.2
          - uses: actions/setup-python@{fake("setup-python-sha", 40, HEX)} # v5.3.0
        '''),
    _n("test setting a dummy key", "tests/test_billing.py", '''
        def test_charge(monkeypatch):
            monkeypatch.setenv("STRIPE_API_KEY", "sk_test_dummy")
            assert charge(100).ok
        '''),
    _n("public SSH key", "docs/deploy-keys.md",
       "Add this public key to the deploy keys:\n\n    ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"
       + fake("ssh-public", 43, BASE64) + " deploy@ci\n"),
    _n("certificate", "docs/tls.md", "The CA we pin:\n\n" + pem("CERTIFICATE", "cert") + "\n"),
    _n("public key", "config/jwks.md", pem("PUBLIC KEY", "public-key") + "\n"),
    _n("PGP signature", "RELEASE.md", "v2.1.0 signed:\n\n" + pem("PGP SIGNATURE", "sig") + "\n"),
    _n("Stripe publishable key", "web/checkout.js",
       'const stripe = Stripe("pk_live_' + fake("stripe-pk", 99) + '");\n'),
    _n("Sentry DSN", "web/sentry.js",
       'Sentry.init({ dsn: "https://' + fake("sentry-dsn", 32, HEX)
       + '@o123456.ingest.sentry.io/4505" });\n'),
    _n("vault policy", "vault/policy.hcl", '''
        path "secret/data/app/*" {
          capabilities = ["read"]
        }
        '''),
    _n("AWS documentation example keys", "docs/aws.md", f'''
        Configure the CLI (these are the example values from AWS's documentation):

            aws_access_key_id = {AWS_DOCS_KEY_ID}
            aws_secret_access_key = {AWS_DOCS_ACCESS_KEY}
        '''),
    _n("token placeholder of x's", "docs/github.md",
       "export GITHUB_TOKEN=ghp_" + "x" * 36 + "  # replace with your token\n"),
    _n("jwt.io example in a test", "tests/test_jwt.py", f'''
        # The example token from jwt.io, signed with "your-256-bit-secret".
        SAMPLE = "{JWT_IO_EXAMPLE}"


        def test_decode():
            assert decode(SAMPLE, verify=False)["name"] == "John Doe"
        '''),
)  # fmt: skip

# Locations ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PathCase:
    path: str
    why: str


# Credential files runtime.credentials' catalogue did not name when this corpus was written.
LOCATIONS: tuple[PathCase, ...] = (
    PathCase(".config/npm/npmrc", "npm's per-user config under XDG: registry auth tokens"),
    PathCase(".yarnrc.yml", "Yarn Berry's config: npmAuthToken"),
    PathCase(".m2/settings.xml", "Maven's server passwords"),
    PathCase(".databrickscfg", "the Databricks CLI's host and token"),
    PathCase(".config/containers/auth.json", "podman and buildah registry logins"),
    PathCase(".cache/huggingface/token", "the Hugging Face CLI's token"),
    PathCase(".ivy2/.credentials", "sbt and Ivy repository passwords"),
    PathCase(".composer/auth.json", "Composer's global registry logins"),
    PathCase("auth.json", "Composer's per-project registry logins"),
    PathCase(".config/hub", "the hub CLI's GitHub OAuth token"),
    PathCase("env.production", "an environment file without the leading dot"),
    PathCase(".env_prod", "an environment file with an underscore"),
    PathCase(".config/rclone/rclone.conf", "rclone's cloud storage keys"),
    PathCase(".sentryclirc", "sentry-cli's auth token"),
    PathCase(".config/sops/age/keys.txt", "SOPS's age private keys"),
    PathCase(".gradle/gradle.properties", "Gradle's repository and signing passwords"),
)

ORDINARY_PATHS: tuple[PathCase, ...] = (
    PathCase("app/settings.py", "settings that read secrets from the environment"),
    PathCase("README.md", "the project's readme"),
    PathCase(".env.example", "the template a project ships for its .env"),
    PathCase("docs/secrets-management.md", "a page about handling secrets"),
    PathCase("src/auth/tokens.py", "code that issues tokens"),
    PathCase("web/src/components/PasswordInput.tsx", "a password field component"),
    PathCase("package-lock.json", "a lock file"),
    PathCase(".github/workflows/deploy.yml", "a workflow that names repository secrets"),
    PathCase("Dockerfile", "an image build"),
    PathCase("config/environments/production.rb", "Rails' production settings"),
    PathCase("environment.yml", "a conda environment"),
    PathCase("scripts/rotate_credentials.py", "a script that rotates credentials"),
    PathCase("src/keys/README.md", "a readme in a directory named keys"),
    PathCase("personas/secretary/persona.md", "a persona named secretary"),
    PathCase("tests/fixtures/tokens.json", "test fixtures named for tokens"),
)

# Measurement ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Report:
    """What the boundary made of each case: the kind `find_secret` gave a value case and the
    catalogue pattern `credential_location` gave a path case (None: not judged a credential);
    and the Kingfisher rule set it ran."""

    values: dict[Positive, str | None]
    ordinary: dict[Negative, str | None]
    locations: dict[PathCase, str | None]
    ordinary_paths: dict[PathCase, str | None]
    rules: "RuleSet"

    @property
    def found(self) -> int:
        return sum(kind is not None for kind in self.values.values())

    @property
    def recall(self) -> float:
        return self.found / len(self.values)

    @property
    def by_provider(self) -> dict[str, tuple[int, int]]:
        """Each provider's (found, cases)."""
        cases = Counter(case.provider for case in self.values)
        found = Counter(case.provider for case, kind in self.values.items() if kind is not None)
        return {provider: (found[provider], total) for provider, total in cases.items()}

    @property
    def missed(self) -> tuple[Positive, ...]:
        return tuple(case for case, kind in self.values.items() if kind is None)

    @property
    def missed_providers(self) -> tuple[str, ...]:
        return tuple(sorted(p for p, (found, _) in self.by_provider.items() if found == 0))

    @property
    def false_positives(self) -> dict[str, str]:
        """Each ordinary file judged to hold a credential, by name, and the kind it was given."""
        return {case.name: kind for case, kind in self.ordinary.items() if kind is not None}

    @property
    def locations_found(self) -> int:
        return sum(pattern is not None for pattern in self.locations.values())

    @property
    def location_recall(self) -> float:
        return self.locations_found / len(self.locations)

    @property
    def missed_locations(self) -> tuple[str, ...]:
        return tuple(case.path for case, pattern in self.locations.items() if pattern is None)

    @property
    def path_false_positives(self) -> dict[str, str]:
        """Each ordinary path judged a credential location, and the pattern it fell under."""
        return {c.path: pattern for c, pattern in self.ordinary_paths.items() if pattern}


def measure() -> Report:
    # Imported here, not at the top: runtime is a Django app, imported once Django is set up
    # (by main(), or by pytest-django under test).
    from runtime.credentials import credential_location, find_secret
    from runtime.secret_rules import rule_set

    def location(path: str) -> str | None:
        match = credential_location(path)
        return match.pattern if match else None

    return Report(
        values={case: find_secret(case.snippet, filename=case.filename) for case in POSITIVES},
        ordinary={case: find_secret(case.text, filename=case.filename) for case in NEGATIVES},
        locations={case: location(case.path) for case in LOCATIONS},
        ordinary_paths={case: location(case.path) for case in ORDINARY_PATHS},
        rules=rule_set(),
    )


def _percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)"


def _rule_set(rules: "RuleSet") -> list[str]:
    """What was run: Kingfisher's rules, how many needed translating from Rust's syntax, how
    many the prefilter runs on every text, and each one not run, by reason."""
    translated = sum(rule.pattern != rule.regex.pattern for rule in rules.rules)
    uncompiled = sum(why.startswith("does not compile") for why in rules.skipped.values())
    lines = [
        f"rule set              Kingfisher {rules.version}: {rules.exported} rules; "
        f"{len(rules.rules)} run ({translated} translated, {len(rules.always)} on every text), "
        f"{len(rules.skipped)} not run ({uncompiled} do not compile)",
    ]
    by_reason: dict[str, list[str]] = {}
    for rule_id, reason in rules.skipped.items():
        by_reason.setdefault(reason, []).append(rule_id)
    lines += ["", f"Rules not run ({len(rules.skipped)}):"]
    for reason, ids in by_reason.items():
        lines.append(f"  {reason} ({len(ids)}):")
        lines += textwrap.wrap(", ".join(ids), 98, initial_indent="    ",
                               subsequent_indent="    ", break_on_hyphens=False)  # fmt: skip
    return lines


def render(report: Report) -> str:
    """The table `main()` prints."""
    providers = report.by_provider
    lines = [
        f"VX-SEC-16 secret corpus: {len(POSITIVES)} credentials from {len(providers)} providers, "
        f"{len(NEGATIVES)} ordinary files, {len(LOCATIONS)} + {len(ORDINARY_PATHS)} paths",
        "",
        *_rule_set(report.rules)[:1],
        f"value recall          {_percent(report.found, len(POSITIVES))}",
        f"false positives       {_percent(len(report.false_positives), len(NEGATIVES))}",
        f"location recall       {_percent(report.locations_found, len(LOCATIONS))}",
        f"path false positives  {_percent(len(report.path_false_positives), len(ORDINARY_PATHS))}",
        "",
        "Recall by provider (found/cases):",
    ]
    cells = [f"{name[:22]:<22} {found:>2}/{total:<2}" for name, (found, total) in
             sorted(providers.items(), key=lambda item: item[0].lower())]  # fmt: skip
    lines += ["  " + "   ".join(cells[i : i + 3]).rstrip() for i in range(0, len(cells), 3)]
    lines += ["", f"Providers missed entirely ({len(report.missed_providers)}):"]
    lines += textwrap.wrap(", ".join(report.missed_providers), 98, initial_indent="  ",
                           subsequent_indent="  ")  # fmt: skip
    lines += ["", f"Missed credentials ({len(report.missed)}):"]
    lines += [f"  {case.provider:<22} {case.filename}" for case in report.missed]
    lines += ["", f"Missed locations ({len(report.missed_locations)}):"]
    lines += textwrap.wrap(", ".join(report.missed_locations), 98, initial_indent="  ",
                           subsequent_indent="  ")  # fmt: skip
    lines += ["", f"False positives ({len(report.false_positives)}):"]
    lines += [f"  {name:<40} {kind}" for name, kind in report.false_positives.items()]
    lines += [f"  {path:<40} location {pattern}"
              for path, pattern in report.path_false_positives.items()]  # fmt: skip
    lines += _rule_set(report.rules)[1:]
    return "\n".join(lines)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.test_settings")
    django.setup()
    print(render(measure()))


if __name__ == "__main__":
    main()
