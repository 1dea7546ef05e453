"""A fresh checkout of this tree, as a new user has it after `git clone` and `make install`.

Copying the tracked files (and the new ones not ignored) gives the checkout; its `.venv` is made
in a second, not the minutes `pip install` takes: a virtual environment of the same Python whose
path holds the checkout, then this environment's installed packages, and the console scripts
`make install` would have written (`virgo`, `virgo-web`, `celery`). So `.venv/bin/virgo` there
runs the checkout's code, finds its settings from the checkout (VIRGO_HOME is its `var/`), and
nothing of this working tree leaks in. `make` there finds `.venv` installed and installs nothing.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CONSOLE_SCRIPTS = {
    "virgo": "virgo.cli:main",
    "virgo-web": "virgo.web:main",
    "celery": "celery.__main__:main",
}


def checkout_files(repo: Path = REPO) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (repo / name).is_file()]


def make_fresh_checkout(target: Path) -> Path:
    """`target` becomes a checkout of this tree with an installed `.venv`; returns it."""
    for name in checkout_files():
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, destination)
    venv = target / ".venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The checkout first (an editable install's effect), then the packages installed here.
    (Path(purelib) / "virgo-checkout.pth").write_text(
        f"{target}\n{sysconfig.get_paths()['purelib']}\n"
    )
    for script, entry in CONSOLE_SCRIPTS.items():
        module, function = entry.split(":")
        path = venv / "bin" / script
        path.write_text(
            f"#!{python}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n"
        )
        path.chmod(0o755)
    # Newer than the requirements it was made from: `make` installs nothing.
    (venv / ".installed").touch()
    return target


def clean_environment(home: Path, *, path_first: Path | None = None) -> dict[str, str]:
    """What `env -i PATH=... HOME=...` leaves: a new shell with nothing exported by hand."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if path_first is not None:
        path = f"{path_first}{os.pathsep}{path}"
    return {"PATH": path, "HOME": str(home)}
