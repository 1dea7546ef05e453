"""The installed `virgo` command, run as a real process on a fresh installation of its own."""

import hashlib
import io
import json
import os
import secrets
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import rfc8785

REPO = Path(__file__).resolve().parent.parent
VIRGO = Path(sys.executable).with_name("virgo")
# Bounds how long a broken run hangs; not a performance assertion.
DEADLINE_SECONDS = 120


@dataclass
class Installation:
    home: Path
    env: dict[str, str]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(VIRGO), *args],
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"virgo {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
        return result

    def django(self, *args: str) -> subprocess.CompletedProcess[str]:
        """One of Django's own commands, which are manage.py's (VX-OPS-10)."""
        result = subprocess.run(
            [sys.executable, str(REPO / "manage.py"), *args],
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
        )
        if result.returncode != 0:
            raise AssertionError(f"manage.py {' '.join(args)} failed:\n{result.stderr}")
        return result

    def stamp_file(self) -> Path:
        [path] = (self.home / "personas").glob("*/generations/*/CAPABILITY-STAMP.json")
        return path

    def approve_proposals(self) -> None:
        """Approve every pending grant proposal as its persona's owner, through the service the
        admin's diff page confirms with: the command line only proposes (VX-REV-1)."""
        self.django("shell", "-c", APPROVE)


APPROVE = """
from personas import services
from personas.models import GrantProposal
for proposal in GrantProposal.objects.filter(status="pending").select_related("persona__agent"):
    services.proposal_approve(proposal=proposal, actor=proposal.persona.agent.owner)
"""


@pytest.fixture(scope="module")
def installation(tmp_path_factory: pytest.TempPathFactory) -> Installation:
    """An empty installation: its own SQLite file and VIRGO_HOME, settings left to `virgo`."""
    assert VIRGO.exists(), f"{VIRGO} is missing: `make install` installs the virgo command"
    home = tmp_path_factory.mktemp("installation")
    env = {
        key: value
        for key, value in os.environ.items()
        # mutmut's switch stays with the test process: in its stats pass a mutated function
        # called by this installation's own process would look for mutmut's configuration in
        # the installation's directory and fail.
        if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "MUTANT_UNDER_TEST")
        and not key.startswith("CELERY_")
    }
    env.update(
        VIRGO_EMBEDDED="1",
        VIRGO_HOME=str(home),
        DATABASE_URL=f"sqlite:///{home / 'virgo.sqlite3'}",
        SECRET_KEY="cli-test-" + secrets.token_hex(16),
        DJANGO_SUPERUSER_PASSWORD=secrets.token_urlsafe(16),
        PYTHONUNBUFFERED="1",
    )
    installed = Installation(home, env)
    installed.django("migrate", "--noinput", "-v", "0")
    installed.django("createsuperuser", "--noinput", "--username", "root", "--email", "r@x.example")
    return installed


def test_virgo_persona_add_suggests_and_stamps_the_first_persona(
    installation: Installation,
) -> None:
    """V1-FAC-3, V1-STAMP-1, VX-REV-1: `virgo persona add` on an empty installation suggests
    the root secretary; its grant is a proposal the command prints with its review URL, and
    nothing stands until the owner approves it; then its stamp is built and verifiable and
    `virgo check` passes."""
    result = installation.run(
        "persona", "add", "--owner", "root", "--agent", "main", "--create-agent",
        "--queues", "inbox", "--prompt", "You answer for me. You never decide for me.",
    )  # fmt: skip
    assert "suggesting the first persona 'Secretary' as a secretary at root/secretary" in (
        result.stdout
    )
    assert "It grants nothing and does not stand until you approve its grant: proposal " in (
        result.stdout
    )
    assert "/admin/personas/grantproposal/" in result.stdout
    assert "It stands" not in result.stdout
    assert not list((installation.home / "personas").glob("*/generations/*/CAPABILITY-STAMP.*"))
    installation.approve_proposals()
    path = installation.stamp_file()
    assert oct(path.stat().st_mode & 0o777) == "0o600"

    shown = installation.run("stamp", "show", "Secretary").stdout
    document = json.loads(shown[shown.index("{") :])
    assert rfc8785.dumps(document) == path.read_bytes()
    assert document["hierarchy"]["path"] == "root/secretary"

    verified = installation.run("stamp", "verify", str(path)).stdout
    assert f"{path}: OK (v3" in verified
    checked = installation.run("check")
    assert "virgo.E" not in checked.stdout + checked.stderr


def test_check_fails_on_a_stamp_missing_a_tool_and_restore_brings_it_back(
    installation: Installation,
) -> None:
    """V1-BOOT-1, V1-INV-2, VX-OPS-4: with a tool cut from the active stamp file, `virgo check`
    fails naming the persona and the exact missing tool, and quarantines the persona: the next
    check still fails (virgo.E012) and `virgo stamp show` says QUARANTINED with the reason.
    `virgo stamp restore` sets the file aside, puts the stored stamp back and lifts it."""
    if not list((installation.home / "personas").glob("*")):
        installation.run(
            "persona", "add", "--owner", "root", "--agent", "main", "--create-agent",
            "--queues", "inbox", "--prompt", "You answer for me.",
        )  # fmt: skip
        installation.approve_proposals()
    path = installation.stamp_file()
    original = path.read_bytes()
    document = json.loads(original)
    document["tools"] = [t for t in document["tools"] if t["name"] != "send_human_message"]
    altered = rfc8785.dumps(document)
    path.write_bytes(altered)
    try:
        checked = installation.run("check", check=False)
        assert checked.returncode == 1
        assert "virgo.E007" in checked.stderr
        assert "not standing: missing tool send_human_message" in checked.stderr
        assert "persona 'Secretary'" in checked.stderr

        again = installation.run("check", check=False)
        assert again.returncode == 1
        assert "virgo.E012" in again.stderr and "is quarantined" in again.stderr
        assert "missing tool send_human_message" in again.stderr
        assert "virgo stamp restore" in again.stderr
        shown = installation.run("stamp", "show", "Secretary").stdout
        assert "QUARANTINED:" in shown and f"stamp file {path} was altered" in shown

        restored = installation.run("stamp", "restore", "Secretary").stdout
        assert "quarantine lifted: it stands again" in restored
        [aside] = path.parent.glob("CAPABILITY-STAMP.json.set-aside-*")
        assert aside.read_bytes() == altered
        assert path.read_bytes() == original
    finally:
        if path.read_bytes() != original:
            path.write_bytes(original)
            installation.run("stamp", "restore", "Secretary", check=False)
    assert installation.run("check").returncode == 0


def test_virgo_persona_import_of_a_bad_archive_is_one_line_and_status_1(
    installation: Installation, tmp_path: Path
) -> None:
    """VX-SEC-1: a snapshot the importer cannot take is refused in one line naming the problem,
    with no traceback and a non-zero status, and nothing is imported."""

    def virgo(*args: str) -> subprocess.CompletedProcess[str]:
        # Run beside VIRGO_HOME, not in it: a directory there named like an app (`personas/`)
        # would shadow that app, since Celery's Django fixup puts the working directory first
        # on sys.path.
        return subprocess.run(
            [str(VIRGO), *args],
            env=installation.env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
        )

    if not list((installation.home / "personas").glob("*")):
        virgo(
            "persona", "add", "--owner", "root", "--agent", "main", "--create-agent",
            "--queues", "inbox", "--prompt", "You answer for me.",
        )  # fmt: skip
        installation.approve_proposals()
    [persona] = [path.name for path in (installation.home / "personas").iterdir()]
    archive = tmp_path / "secretary.tar.gz"
    exported = virgo("persona", "export", persona, str(archive))
    assert exported.returncode == 0, exported.stderr
    with tarfile.open(archive) as tar:
        members = {info.name: tar.extractfile(info).read() for info in tar}
    members["persona.json"] = b"{not json"
    manifest = json.loads(members["manifest.json"])
    manifest["files"]["persona.json"] = hashlib.sha256(members["persona.json"]).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    refused = virgo("persona", "import", str(bad), "--agent", "1")
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("CommandError: persona.json is not valid JSON")
    assert len(list((installation.home / "personas").iterdir())) == 1
