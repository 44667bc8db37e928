"""The locks in locks/ agree with pyproject.toml, and the suite runs in the environment they lock.

`python3 run.py lock` makes the locks; `run.py` installs them hash-checked. These tests fail when
someone edits pyproject's requirements without re-locking, when a lock pins a version that
pyproject does not allow, when a pin has no hash, when the per-command locks disagree with each
other, or when the environment running the suite is not the one the lock describes.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _load_run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dsi_ref_run_py", ROOT / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUN = _load_run()
PYPROJECT = RUN.read_toml((ROOT / "pyproject.toml").read_text())
LOCKS = [(name, python) for python in RUN.PYTHONS for name in RUN.ENVS]


def _direct_requirements(extras: str, python: str) -> list[Requirement]:
    """pyproject's requirements of dsi-ref[extras] (self-references expanded), plus the build
    requirements, with markers evaluated for CPython ``python`` on Linux."""
    project = PYPROJECT["project"]
    optional = project["optional-dependencies"]
    todo, seen, reqs = list(extras.split(",")), set(), list(project["dependencies"])
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in optional[extra]:
            req = Requirement(line)
            if canonicalize_name(req.name) == "dsi-ref":
                todo += sorted(req.extras)
            else:
                reqs.append(line)
    reqs += PYPROJECT["build-system"]["requires"]
    env = {"python_version": python, "python_full_version": f"{python}.0",
           "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "os_name": "posix", "implementation_name": "cpython"}
    parsed = [Requirement(line) for line in reqs]
    return [r for r in parsed if r.marker is None or Marker(str(r.marker)).evaluate(env)]


def _lock_entries(path: Path) -> list[tuple[str, str, list[str]]]:
    """(name, version, hashes) of every requirement in a lock file."""
    entries: list[tuple[str, str, list[str]]] = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text()):
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", block)
        if match:
            entries.append((canonicalize_name(match[1]), match[2],
                            re.findall(r"--hash=sha256:([0-9a-f]{64})", block)))
    return entries


@pytest.mark.parametrize(("name", "python"), LOCKS)
def test_every_lock_exists_and_was_made_from_this_pyproject(name: str, python: str) -> None:
    path = RUN.lock_path(name, python)
    assert path.exists(), f"{path.name} is missing: run python3 run.py lock"
    digest = re.search(r"^# input-digest: (\S+)$", path.read_text(), re.M)
    assert digest, f"{path.name} has no input-digest line: run python3 run.py lock"
    assert digest[1] == RUN.input_digest((ROOT / "pyproject.toml").read_bytes()), (
        f"pyproject.toml's requirements changed since {path.name} was made: "
        "run python3 run.py lock")


@pytest.mark.parametrize(("name", "python"), LOCKS)
def test_every_pin_is_allowed_by_pyproject_and_hashed(name: str, python: str) -> None:
    entries = _lock_entries(RUN.lock_path(name, python))
    pinned = {n: v for n, v, _ in entries}
    assert len(pinned) == len(entries), "a package is pinned twice"
    assert all(hashes for _, _, hashes in entries), "a pin has no hash"
    for req in _direct_requirements(RUN.ENVS[name], python):
        key = canonicalize_name(req.name)
        assert key in pinned, f"{name}/{python}: {req} is not in the lock"
        assert req.specifier.contains(Version(pinned[key]), prereleases=True), (
            f"{name}/{python}: the lock pins {req.name}=={pinned[key]}, pyproject says {req}")


@pytest.mark.parametrize("python", RUN.PYTHONS)
def test_the_command_locks_agree_with_the_test_lock(python: str) -> None:
    test = {n: (v, set(h)) for n, v, h in _lock_entries(RUN.lock_path("test", python))}
    for name in RUN.ENVS:
        for pkg, version, hashes in _lock_entries(RUN.lock_path(name, python)):
            assert pkg in test, f"{name}/{python}: {pkg} is not in the test lock"
            assert test[pkg][0] == version, f"{name}/{python}: {pkg} {version} vs {test[pkg][0]}"
            assert set(hashes) == test[pkg][1], f"{name}/{python}: {pkg}'s hashes differ"


ENGINE_LOCKS = [(name, python) for name, spec in RUN.ENGINE_ENVS.items()
                for python in spec["pythons"]]


@pytest.mark.parametrize(("name", "python"), ENGINE_LOCKS)
def test_every_engine_lock_was_made_from_its_inputs_and_is_hashed(name: str, python: str) -> None:
    """An engine environment's lock (run.py ENGINE_ENVS): made from locks/NAME.in and this
    pyproject's core, every pin hashed, every requirement of NAME.in and of the core pinned at
    an allowed version, and the omitted packages absent."""
    path = RUN.lock_path(name, python)
    assert path.exists(), f"{path.name} is missing: run python3 run.py lock {name}"
    digest = re.search(r"^# input-digest: (\S+)$", path.read_text(), re.M)
    assert digest, f"{path.name} has no input-digest line"
    assert digest[1] == RUN.engine_digest(name, (ROOT / "pyproject.toml").read_bytes()), (
        f"locks/{name}.in or pyproject's core changed since {path.name} was made: "
        f"run python3 run.py lock {name}")
    entries = _lock_entries(path)
    pinned = {n: v for n, v, _ in entries}
    assert len(pinned) == len(entries), "a package is pinned twice"
    assert all(hashes for _, _, hashes in entries), "a pin has no hash"
    lines = [line.split("#", 1)[0].strip() for line in RUN.engine_input(name).read_text()
             .splitlines()]
    wanted = [Requirement(line) for line in lines if line] + [
        Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    for req in wanted:
        key = canonicalize_name(req.name)
        assert key in pinned, f"{name}/{python}: {req} is not in the lock"
        assert req.specifier.contains(Version(pinned[key]), prereleases=True), (
            f"{name}/{python}: the lock pins {req.name}=={pinned[key]}, {name}.in says {req}")
    for omitted in RUN.ENGINE_ENVS[name]["omit"]:
        assert canonicalize_name(omitted) not in pinned, f"{omitted} must stay out of the lock"


def test_an_engine_lock_input_edit_changes_its_digest() -> None:
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    for name in RUN.ENGINE_ENVS:
        digest = RUN.engine_digest(name, pyproject)
        edited = pyproject.decode().replace('"numpy>=1.26",', '"numpy>=1.27",').encode()
        assert RUN.engine_digest(name, edited) != digest


def test_a_pyproject_edit_changes_the_digest_and_formatting_does_not() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    digest = RUN.input_digest(text.encode())
    assert RUN.input_digest(text.replace('"numpy>=1.26",', '"numpy>=1.27",').encode()) != digest
    assert RUN.input_digest(text.replace("transformers>=", "transformers >=").encode()) != digest
    # reordering the base dependencies is not a change of requirements
    data = RUN.read_toml(text)
    deps = data["project"]["dependencies"]
    swapped = text.replace(f'"{deps[0]}",\n    "{deps[1]}",', f'"{deps[1]}",\n    "{deps[0]}",')
    assert swapped != text
    assert RUN.input_digest(swapped.encode()) == digest


def test_the_floor_run_uses_pyprojects_floor() -> None:
    req = next(Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["torch"]
               if r.startswith(RUN.FLOOR_PACKAGE))
    floor = RUN.floor_of(RUN.FLOOR_PACKAGE)
    assert (">=", floor) in {(spec.operator, spec.version) for spec in req.specifier}


def test_pins_reads_every_lock_line() -> None:
    for name, python in LOCKS:
        path = RUN.lock_path(name, python)
        assert RUN.pins(path) == {n: v for n, v, _ in _lock_entries(path)}


def _installed() -> dict[str, str]:
    """What is installed in the environment's site-packages (not what other paths on sys.path
    hold: Ray puts its vendored psutil on it once imported)."""
    site = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return {canonicalize_name(d.metadata["Name"]): d.version
            for d in importlib.metadata.distributions(path=site)}


def test_the_suite_runs_in_the_locked_environment() -> None:
    """Under `run.py test` (.venv) every installed package is the locked version."""
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip(f"not the locked .venv ({sys.prefix}): --latest / --oldest or a hand-made "
                    "environment")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python not in RUN.PYTHONS:
        pytest.skip(f"no lock for Python {python}")
    locked = RUN.pins(RUN.lock_path("test", python))
    installed = _installed()
    wrong = {n: (installed[n], v) for n, v in locked.items()
             if n in installed and installed[n] != v}
    missing = sorted(set(locked) - set(installed))
    extra = sorted(set(installed) - set(locked) - {"dsi-ref", "pip", "setuptools", "wheel"})
    assert not wrong and not missing and not extra, (wrong, missing, extra)


def test_ensure_env_is_additive_within_a_lock_and_rebuilds_across_locks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    env = tmp_path / "env"

    def create(path: Path, *, clear: bool = False) -> None:
        calls.append(("create", clear))
        RUN.bin_dir(path).mkdir(parents=True, exist_ok=True)
        RUN.python_of(path).write_text("")
        (path / ".dsi-ref-installed").unlink(missing_ok=True)

    generation = ["g1"]
    monkeypatch.setattr(RUN, "create", create)
    monkeypatch.setattr(RUN, "install_locked", lambda e, name: calls.append(("install", name)))
    monkeypatch.setattr(RUN, "lock_generation", lambda python: generation[0])
    RUN.ensure_env("test", env)
    RUN.ensure_env("audit", env)
    RUN.ensure_env("test", env)       # already there: nothing
    assert calls == [("create", True), ("install", "test"), ("install", "audit")]
    generation[0] = "g2"               # the locks changed: start afresh
    RUN.ensure_env("audit", env)
    assert calls[3:] == [("create", True), ("install", "audit")]
    assert (env / ".dsi-ref-installed").read_text().split() == ["g2", "audit"]


def test_a_drift_run_names_each_unaudited_engine_release_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run.py test --latest` says in one line each which installed engine release has no
    findings section, and tells the suite (which then skips those findings tests)."""
    import transformers

    env = Path(sys.prefix)
    version = transformers.__version__
    if (ROOT / "benchmarks" / "findings" / f"transformers-{version}.md").exists():
        assert ("transformers", version) not in RUN.unaudited(env)
    (tmp_path / "benchmarks" / "findings").mkdir(parents=True)
    monkeypatch.setattr(RUN, "ROOT", tmp_path)   # a checkout whose findings audit nothing
    assert ("transformers", version) in RUN.unaudited(env)
    environ = RUN.drift_environ(env)
    assert "transformers" in environ[RUN.UNAUDITED_VARIABLE].split(",")
    lines = [line for line in capsys.readouterr().out.splitlines() if "UNAUDITED" in line]
    assert sum(f"transformers {version} has no findings section" in line for line in lines) == 1
    (tmp_path / "benchmarks" / "findings" / f"transformers-{version}.md").write_text("audited")
    assert ("transformers", version) not in RUN.unaudited(env)
