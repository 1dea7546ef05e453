"""What counts as secret credential material (VX-SEC-14): where it is kept, and what it looks like.

Two judgements, each made here and nowhere else:

- **Locations** (`CREDENTIAL_LOCATIONS`, `is_secret_path`): the files and directories where tools
  keep credentials (`.envrc`, `.aws/`, `.kube/`, `*.tfstate`...). A path is judged by its name,
  as asked and as it resolves on disk (runtime.tools.workspace), before any byte of it is read, so
  listing can hide it without opening it.
- **Values** (`find_secret`, `looks_secret`): a credential in text, found by MongoDB
  Kingfisher's rules (Betterleaks' and Veles', runtime.secret_rules, VX-SEC-16) and by the
  plugins of Yelp's detect-secrets for what none of those rules has, both pinned in
  requirements/base.txt and called directly on the text: no scan settings, baselines or
  verification requests. What a call carries, what a read hands out and what a record keeps
  (VX-SEC-7, runtime.redaction) are all judged by `find_secret`.

The default stays positive: text that merely mentions a password, a secret or a key is not a
secret value; docs/decisions.md (160) records which heuristics keep ordinary code readable, and
why high-entropy strings are never judged on their own. `python -m tests.secret_corpus`
measures what is found and what is wrongly refused.
"""

import fnmatch
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from detect_secrets.filters import heuristic
from detect_secrets.plugins import keyword
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.util.filetype import determine_file_type

from runtime.secret_rules import rule_set

# Locations ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CredentialLocation:
    """Where credentials are kept. `pattern` is one or more path segments, `/` between them, each
    a case-insensitive shell pattern; it matches a run of consecutive segments anywhere in a path,
    and everything below a match is covered too (a directory hides all it holds)."""

    pattern: str
    reason: str

    def __post_init__(self) -> None:
        segments = self.pattern.split("/")
        if not all(segments) or self.pattern != self.pattern.lower():
            raise ValueError(f"{self.pattern!r}: lower-case segments, '/' between them")


L = CredentialLocation

# Decided by name alone, whatever the file holds: a name cannot say whether today's copy has a
# token in it, and listing must be able to hide an entry without opening it. `.npmrc`, `.pypirc`
# and `.git-credentials` are refused always for that reason (decision 160).
CREDENTIAL_LOCATIONS: tuple[CredentialLocation, ...] = (
    # Environment files.
    L(".env", "a dotenv file: an application's secrets, one variable a line"),
    L(".env.*", "a variant of .env (.env.production, .env.local; a template cannot be told apart)"),
    L("*.env", "an environment file by another name (prod.env)"),
    L(".env_*", "a variant of .env with an underscore (.env_prod, .env_local)"),
    L("env.prod*", "production variables in an environment file without the leading dot"),
    L(".envrc", "direnv's file: exported variables such as AWS_SECRET_ACCESS_KEY"),
    # Logins kept by command-line tools.
    L(".netrc", "machine logins and passwords for curl, git and ftp"),
    L("_netrc", "machine logins and passwords (the Windows spelling of .netrc)"),
    L(".pgpass", "PostgreSQL passwords"),
    L(".my.cnf", "the MySQL client's password"),
    L(".git-credentials", "git's credential store: URLs with their tokens in clear"),
    L(
        ".git",
        "git's internals: every version of every file, compressed where no scan reads it, "
        "a secret removed from the worktree included",
    ),
    L(".npmrc", "npm's config: registry auth tokens"),
    L("npmrc", "npm's config by its other names (.config/npm/npmrc, the global etc/npmrc)"),
    L(".yarnrc.yml", "Yarn's config: npmAuthToken per registry"),
    L("auth.json", "registry and CLI logins by that name: Composer's, podman's and buildah's"),
    L(".pypirc", "PyPI upload passwords and tokens"),
    L(".vault-token", "HashiCorp Vault's login token"),
    L(".htpasswd", "HTTP basic-auth password hashes"),
    L(".config/gh/hosts.yml", "the GitHub CLI's OAuth token"),
    L(".config/hub", "the hub CLI's GitHub OAuth token"),
    L(".m2/settings*.xml", "Maven's server passwords and their master password"),
    L(".gradle/gradle.properties", "Gradle's user-wide repository and signing passwords"),
    L(".credentials", "sbt's and Ivy's repository passwords (.ivy2/.credentials)"),
    L(".sentryclirc", "sentry-cli's auth token"),
    L(".databrickscfg", "the Databricks CLI's hosts and tokens"),
    L("*huggingface/token", "the Hugging Face CLI's token (.cache/huggingface, .huggingface)"),
    L("*huggingface/stored_tokens", "the Hugging Face CLI's other saved tokens"),
    L("rclone.conf", "rclone's remotes: cloud storage keys and tokens"),
    L(".boto", "boto and gsutil access keys"),
    L(".s3cfg", "s3cmd access keys"),
    # Cloud and cluster credentials.
    L(".aws", "the AWS CLI's credentials, config and SSO token cache"),
    L(".azure", "the Azure CLI's tokens and service-principal secrets"),
    L(".config/gcloud", "gcloud's credentials: application-default credentials, access tokens"),
    L("application_default_credentials.json", "a gcloud application-default credential"),
    L("*service-account*.json", "a Google Cloud service-account key"),
    L(".kube", "kubeconfig files: cluster bearer tokens and client keys"),
    L("kubeconfig", "a kubeconfig kept outside ~/.kube"),
    L("*.kubeconfig", "a kubeconfig kept outside ~/.kube"),
    L(".docker/config.json", "Docker registry logins (base64 user:password)"),
    L(".dockercfg", "Docker's older registry login file"),
    # Terraform.
    L("*.tfvars", "Terraform variables: provider credentials and passwords"),
    L("*.tfvars.json", "Terraform variables: provider credentials and passwords"),
    L("*.tfstate", "Terraform state: generated passwords and keys in clear"),
    L("*.tfstate.*", "a Terraform state backup (terraform.tfstate.backup)"),
    L(".terraformrc", "the Terraform CLI's registry tokens"),
    L("terraform.rc", "the Terraform CLI's registry tokens (the Windows spelling)"),
    # Keys and key stores.
    L(".ssh", "SSH private keys and their configuration"),
    L(".gnupg", "GnuPG private keyrings"),
    L("sops/age", "SOPS's age private keys (keys.txt)"),
    L("id_rsa*", "an SSH key pair"),
    L("id_dsa*", "an SSH key pair"),
    L("id_ecdsa*", "an SSH key pair"),
    L("id_ed25519*", "an SSH key pair"),
    L("*.pem", "PEM keys and certificates (the name cannot say which it holds)"),
    L("*.key", "a private key"),
    L("*.ppk", "a PuTTY private key"),
    L("*.p12", "a PKCS#12 key store"),
    L("*.pfx", "a PKCS#12 key store"),
    L("*.jks", "a Java key store"),
    L("*.keystore", "a key store"),
    L("*.kdbx", "a KeePass password database"),
    # Credential stores by name.
    L("credentials*", "a credential store (credentials.json, .aws/credentials, credentials.toml)"),
    L("secrets*", "a secret store by name (secrets.yaml, secrets.json)"),
    L("secret", "a secret by name"),
    L("secret.*", "a secret by name"),
    L("*.token", "a token file"),
)


def _segment_matcher(pattern: str) -> Callable[[str], re.Match[str] | None]:
    return re.compile(fnmatch.translate(pattern)).match


_LOCATION_MATCHERS = tuple(
    (location, tuple(_segment_matcher(part) for part in location.pattern.split("/")))
    for location in CREDENTIAL_LOCATIONS
)


def credential_location(path: str) -> CredentialLocation | None:
    """The catalogue entry a normalised relative path falls under, if any."""
    parts = [part.lower() for part in path.split("/") if part]
    for location, matchers in _LOCATION_MATCHERS:
        for start in range(len(parts) - len(matchers) + 1):
            if all(match(parts[start + i]) for i, match in enumerate(matchers)):
                return location
    return None


def is_secret_path(path: str) -> bool:
    """Whether a normalised relative path is, or lies inside, a known credential location."""
    return credential_location(path) is not None


# Values ---------------------------------------------------------------------------------------

# Kingfisher's rules (runtime.secret_rules) know the token families; these plugins find, each
# by a format of its own, what none of its rules does: AWS's secret key quoted a few characters
# after `aws` (in a call's arguments too: Betterleaks' AWS secret-key rule only backs its key-id
# rule), Discord's and Telegram's bot tokens wherever they stand (Betterleaks asks for the
# provider's name beside them), Slack's `xox?-` tokens of any length (Veles' config-token rule
# asks exactly 166 characters), and PuTTY's and SSH2's private-key headers.
FORMAT_DETECTORS: tuple[RegexBasedDetector, ...] = (
    AWSKeyDetector(),
    DiscordBotTokenDetector(),
    PrivateKeyDetector(),
    SlackDetector(),
    TelegramBotTokenDetector(),
)
# `scheme://user:password@host`: the password is chosen by a person, so the value filters below
# apply (a doc's `https://user:<password>@host` is not a credential).
PASSWORD_IN_URL = BasicAuthDetector()

# A name that says "secret" (the keyword detector's own list of words) assigned a quoted value:
# `password = "..."`, `"api_key": "..."`. `secretary` is one of Virgo's persona classes and
# otherwise starts like `secret`, so a line that names it is not read as an assignment of one.
KEYWORDS = keyword.KeywordDetector(keyword_exclude=r"secretar(?:y|ies)")
# The same assignments written unquoted (`AWS_SECRET_ACCESS_KEY=...` in a shell or notes file)
# count only when the value is one random-looking token: above the entropy limit of the
# library's base64 plugin, which no word, identifier or short password reaches. High entropy is
# never judged on its own: hashes, digests, ids and lock files would all be refused.
ENTROPY = Base64HighEntropyString()
# What a rule or a format detector captures must reach this many bits per character to count:
# the least random credential the corpus holds (Sidekiq's two runs of 8 hex digits) has 3.3, a
# prefix and one letter repeated (`ghp_xxx...`) less than 1; gitleaks asks 3.5 of its
# generic-api-key.
ENTROPY_FLOOR = 3.0
_UNQUOTED_ASSIGNMENTS = {
    keyword.FOLLOWED_BY_EQUAL_SIGNS_REGEX: 5,
    keyword.FOLLOWED_BY_COLON_REGEX: 4,
}
_KEYWORD = re.compile(keyword.DENYLIST_REGEX)
_LOWER_CASE_WORDS = re.compile(r"[a-z]+(?:[-_. ][a-z]+)*")
# Some patterns backtrack over a line in time that grows with the square of its length (a JWT's
# over a run of `eyJ`), so no line longer than this reaches them whole: a longer one is minified
# code or data, read by the rules and the format detectors in overlapping windows (a credential
# up to half a window long lies whole in one) and not by the keyword detector (no person wrote an
# assignment there).
_LONG_LINE = 4096
_LONG_WORD = 64


def _stand_in(value: str) -> bool:
    """The value filters `detect-secrets scan` applies by default, less its UUID one: a template,
    a variable, a sequence, no letter at all. And two of Virgo's (decision 160), for a name or a
    setting rather than a secret: a value that itself spells a secret-sounding word
    (`SECRET_VALUE = "secret-value"`, `field = "password"`, `https://user:password@host` in a
    doc), and one made of lower-case words alone (`secretName: web-tls`,
    `secret_backend = "vault"`, `password: changeme`), which no generated credential is and
    few chosen ones are."""
    return (
        heuristic.is_sequential_string(value)
        or heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_not_alphanumeric_string(value)
        or _KEYWORD.search(value.lower().replace("-", "_")) is not None
        or _LOWER_CASE_WORDS.fullmatch(value) is not None
    )


def _placeholder(value: str) -> bool:
    """A stand-in, or a UUID (an id under a secret-sounding name): what a keyword assignment or a
    URL's password is not counted for. A Kingfisher rule that asks for a UUID by its provider's
    name (Heroku's, Snyk's keys) means one, so its captures are judged as stand-ins only."""
    return _stand_in(value) or heuristic.is_potential_uuid(value)


def _keyword_placeholder(value: str, line: str) -> bool:
    """What `detect-secrets scan` also filters for the keyword detector, judged on the line (less
    its allowlist comment, which whoever wrote the file could add): an id, a call or lookup."""
    return (
        _placeholder(value)
        or heuristic.is_likely_id_string(value, line, KEYWORDS)
        or heuristic.is_indirect_reference(line)
    )


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(value).values()
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts)


def _random_token(value: str) -> bool:
    return not any(char.isspace() for char in value) and (
        ENTROPY.calculate_shannon_entropy(value) > ENTROPY.entropy_limit
    )


def _pieces(text: str) -> Iterator[str]:
    """`text` in pieces no line of which is longer than `_LONG_LINE`: runs of whole lines, and
    overlapping windows of a longer line."""
    if len(text) <= _LONG_LINE or max(map(len, text.splitlines())) <= _LONG_LINE:
        yield text
        return
    run: list[str] = []
    for line in text.splitlines():
        if len(line) <= _LONG_LINE:
            run.append(line)
            continue
        if run:
            yield "\n".join(run)
            run = []
        step = _LONG_LINE // 2
        for start in range(0, len(line) - step, step):
            yield line[start : start + _LONG_LINE]
    if run:
        yield "\n".join(run)


def _keyword_lines(text: str) -> Iterator[str]:
    """Each line of `text` that names a secret-sounding word.

    Left out: a line longer than `_LONG_LINE`, and one where such a word runs on past
    `_LONG_WORD` characters: neither is an assignment a person wrote, and the keyword patterns
    backtrack over a long word in time that grows with the cube of its length.
    """
    for line in text.splitlines():
        if len(line) > _LONG_LINE:
            continue
        # The library's words are lower case: searching a lowered line is the same search as
        # its case-blind one, ten times faster.
        words = [match.group() for match in _KEYWORD.finditer(line.lower())]
        if words and all(len(word) <= _LONG_WORD for word in words):
            yield line.rstrip()


def _keyword_secret(text: str, filename: str) -> bool:
    if filename and (heuristic.is_lock_file(filename) or heuristic.is_swagger_file(filename)):
        return False
    # The library's choice per file type: config files (.ini, .toml, .yaml...) take unquoted
    # values, code and anything else only quoted ones.
    quoted = keyword.REGEX_BY_FILETYPE.get(
        determine_file_type(filename), keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
    )
    for line in _keyword_lines(text):
        for value in KEYWORDS.analyze_string(line, denylist_regex_to_group=quoted):
            if not _keyword_placeholder(value, line):
                return True
        for value in KEYWORDS.analyze_string(line, denylist_regex_to_group=_UNQUOTED_ASSIGNMENTS):
            if _random_token(value) and not _keyword_placeholder(value, line):
                return True
    return False


def _credential(secret: str, *, generic: bool) -> bool:
    """Whether a match holds a credential: not a run of a few characters repeated (`ghp_` and 36
    x's in a doc), nor, when only the words around it told it apart (a generic rule), a
    stand-in (`"$USER:$PASSWORD"`, `password: ""`)."""
    value = secret.strip("\"'` ")
    return _entropy(value) >= ENTROPY_FLOOR and not (generic and _stand_in(value))


def find_secret(text: str, *, filename: str = "") -> str | None:
    """The kind of the first secret credential value in `text` (a Kingfisher rule's id or a
    plugin's secret type), or None.

    `filename`, when the text is a file's, lets the keyword detector read it as its type. The
    rules read runs of lines at once: one pass finds what a pass per line would, many times
    faster.
    """
    rules = rule_set()
    for piece in _pieces(text):
        for rule, secret in rules.matches(piece):
            if _credential(secret, generic=rule.generic):
                return rule.id
        for detector in FORMAT_DETECTORS:
            if any(_credential(value, generic=False) for value in detector.analyze_string(piece)):
                return str(detector.secret_type)
        if any(not _placeholder(value) for value in PASSWORD_IN_URL.analyze_string(piece)):
            return str(PASSWORD_IN_URL.secret_type)
    if _keyword_secret(text, filename):
        return str(KEYWORDS.secret_type)
    return None


def looks_secret(value: str) -> bool:
    """Whether a string holds what looks like a secret credential value."""
    return find_secret(value) is not None
