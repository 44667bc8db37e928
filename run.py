#!/usr/bin/env python3
"""Bootstrap for the README's quick start: needs only Python >= 3.11 and pip.

    python3 run.py audit    # create/reuse .venv, install dsi-ref, run `dsi-ref audit`
                            # (`audit --hf` also installs the [torch] extra for the HF audit)
    python3 run.py test     # create/reuse .venv, install dsi-ref[dev], run the test suite
    python3 run.py docs     # create/reuse .venv, install dsi-ref[docs], build the docs site
                            # strictly into ./site (`docs --serve` serves it with live reload)

Anything after the command is passed on (`python3 run.py test -m slow`,
`python3 run.py audit --help`, `python3 run.py docs --serve --dev-addr 127.0.0.1:8001`).
The virtual environment lives in ./.venv and is reinstalled only when pyproject.toml changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
EXTRAS = {"audit": "plot", "test": "dev,plot,torch,ray", "docs": "docs"}


def _stamp(extras: str) -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    return f"{digest}:{extras}"


def ensure_env(extras: str) -> None:
    """Create .venv if needed and install the project with the given extras (once per pyproject)."""
    if sys.version_info < (3, 11):  # noqa: UP036 - run.py runs under whatever python3 is
        sys.exit(f"dsi-ref needs Python >= 3.11 (this is {sys.version.split()[0]})")
    if not PY.exists():
        print(f"[run.py] creating virtual environment in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    marker = VENV / ".dsi-ref-installed"
    wanted = _stamp(extras)
    have = marker.read_text().split() if marker.exists() else []
    if wanted in have:
        return
    print(f"[run.py] installing dsi-ref[{extras}] into {VENV}", flush=True)
    subprocess.run(
        [str(PY), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-e", f"{ROOT}[{extras}]"],
        check=True,
    )
    marker.write_text("\n".join([*have, wanted]) + "\n")


def docs(rest: list[str]) -> int:
    """Build the docs site strictly into ./site, or serve it (``--serve``); mkdocs.yml says how."""
    serve = "--serve" in rest
    rest = [arg for arg in rest if arg != "--serve"]
    mkdocs = [str(PY), "-m", "mkdocs", *(["serve"] if serve else ["build", "--strict"]), *rest]
    # Material's end-of-life banner is for the maintainers (mkdocs.yml notes it), not every build.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(mkdocs, cwd=ROOT, env=env).returncode


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in EXTRAS:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    extras = EXTRAS[command]
    if command == "audit" and ("--hf" in rest or "hf" in rest):  # HF needs torch + transformers
        extras = "plot,torch"
    ensure_env(extras)
    if command == "audit":
        return subprocess.run([str(BIN / "dsi-ref"), "audit", *rest], cwd=ROOT).returncode
    if command == "docs":
        return docs(rest)
    return subprocess.run([str(PY), "-m", "pytest", *rest], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
