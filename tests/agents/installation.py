"""A standalone Virgo holding every kind of secret an installation has, for the tests that run a
real agent under `virgo launch` and look for those secrets where the agent could reach them."""

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from serving import sandbox
from tests.live import unavailable
from tests.runtime_support import REPO, Standalone, start_standalone

HOME_ENV_SECRET = "home-env-secret-h0m3"
BROKER_PASSWORD = "redis-password-r3d1s"


@dataclass(frozen=True)
class SecretInstallation:
    standalone: Standalone

    @property
    def home(self) -> Path:
        return self.standalone.home

    def secrets(self) -> dict[str, str]:
        """Each secret by what it is: none may reach the agent."""
        kek_file = Path(self.standalone.env["VIRGO_KEY_ENCRYPTION_KEY_FILE"])
        return {
            "SECRET_KEY": self.standalone.env["SECRET_KEY"],
            "key-encryption key": kek_file.read_text().strip(),
            "broker URL": self.standalone.env["REDIS_URL"],
            "broker password": BROKER_PASSWORD,
            "database URL": self.standalone.env["DATABASE_URL"],
            "virgo.env": HOME_ENV_SECRET,
        }

    def workspace(self, persona: str) -> Path:
        return self.home / "workspaces/work/core" / self.standalone.personas[persona]

    def agent_home(self, persona: str) -> Path:
        return self.home / "run" / self.standalone.personas[persona] / "agent-home"


_MAKE_ASKER = """
from personas import services
from personas.models import Persona, RegisteredAddress
deputy = Persona.objects.get(name="Deputy")
RegisteredAddress.objects.get_or_create(path="work/core/asker")
asker = services.persona_create(
    agent=deputy.agent, actor=deputy.agent.owner, name="Asker", system_prompt="Ask first.",
    verb_subset=deputy.verb_subset, queues=["reviews"], persona_class="coder-deputy",
    address="work/core/asker", ask_first_verbs=["workspace_write"],
)
asker.refresh_from_db()
assert asker.standing is True, asker.generations.first().not_standing_reasons
print(asker.uuid)
"""


def make_asker(made: Standalone) -> dict[str, str]:
    """`prepare` for secret_installation: a persona, Asker, whose workspace_write asks first."""
    asker = made.run("shell", "-c", _MAKE_ASKER)
    assert asker.returncode == 0, asker.stderr
    return {"Asker": asker.stdout.strip().splitlines()[-1]}


def secret_installation(
    base: Path,
    *,
    prepare: Callable[[Standalone], dict[str, str]] | None = None,
    **environment: str,
) -> SecretInstallation:
    """SECRET_KEY and a broker password in the environment, a key-encryption key in a file a
    setting names, `virgo.env` in its home, the SQLite file, and a stdio server's `server.env`
    (written by `mcp config`). `prepare` runs first, on the installation before its broker is
    configured (with one, settling would wait for a worker), and names personas it made."""
    try:
        sandbox.require_bwrap()
    except sandbox.SandboxUnavailable as exc:
        unavailable(exc.reason)
    (base / "home").mkdir()
    made = start_standalone(base / "home")
    personas = dict(made.personas)
    if prepare is not None:
        personas.update(prepare(made))
    kek = subprocess.run(
        [sys.executable, "-m", "virgo.kek"], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout.strip()
    kek_file = base / "kek"
    kek_file.write_text(kek + "\n")
    kek_file.chmod(0o600)
    home_env = made.home / "virgo.env"
    home_env.write_text(f"VIRGO_PROBE_SECRET={HOME_ENV_SECRET}\n")
    home_env.chmod(0o600)
    env = {
        **made.env,
        "VIRGO_KEY_ENCRYPTION_KEY_FILE": str(kek_file),
        "REDIS_URL": f"redis://:{BROKER_PASSWORD}@127.0.0.1:9/0",
        **environment,
    }
    standalone = Standalone(made.home, env, personas)
    configured = standalone.run("mcp", "config", "--persona", "Deputy")
    assert configured.returncode == 0, configured.stderr
    return SecretInstallation(standalone)
