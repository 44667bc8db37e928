"""Build llama.cpp's C++ speculative examples from the llama-cpp-python sdist of a lock.

The binding's source archive carries llama.cpp (``vendor/llama.cpp``), so the examples are built
from exactly the sources the binding was built from: `fetch_sdist` downloads the archive the lock
pins (pip checks its hashes), `build_examples` configures llama.cpp with cmake (static, Release,
examples only, no curl, no OpenSSL) and builds `TARGETS`, and copies the binaries into the output
folder, which `dsi_ref.backends.llama_cpp.cpp` searches. ``run.py``'s build step for the llama
environment is::

    .venv-llama/bin/python -m dsi_ref.backends.llama_cpp.build --lock locks/py311-llama.txt \\
        --out .venv-llama/llama-cpp-bin

A missing tool raises `ToolchainMissingError`, a failed step `EngineBuildError`, each in one
line that names the fix or the log.

**One opt-in line is added to each example** (`add_flush_at_exit`): before ``main`` returns,
``if (std::getenv("DSI_REF_FLUSH_LOG")) common_log_pause(common_log_main());``. The examples
print through a logger whose queue a thread drains and which is never flushed at exit
(ggml-org/llama.cpp#22142), so a short run often loses its whole output, on a busy machine
almost always; pausing the logger joins that thread once it has written everything (what
llama.cpp's own ``llama-completion`` does before it exits). Without the variable the binaries
behave as released; `dsi_ref.backends.llama_cpp.cpp` sets it, and still repeats a run whose
output is missing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ...base.errors import EngineBuildError, ToolchainMissingError

__all__ = ["FLUSH_VARIABLE", "PACKAGE", "TARGETS", "add_flush_at_exit", "build_examples",
           "check_toolchain", "fetch_sdist", "main", "pinned_requirement"]

#: The distribution whose sdist carries llama.cpp.
PACKAGE = "llama-cpp-python"
#: The examples built (the speculative ones).
TARGETS = ("llama-speculative", "llama-speculative-simple")
#: The sources of `TARGETS` inside llama.cpp.
SOURCES = ("examples/speculative/speculative.cpp",
           "examples/speculative-simple/speculative-simple.cpp")
#: The environment variable that makes the examples flush their logger at exit.
FLUSH_VARIABLE = "DSI_REF_FLUSH_LOG"
_FLUSH = (f'    if (std::getenv("{FLUSH_VARIABLE}")) {{ common_log_pause(common_log_main()); }}'
          "  // dsi-ref\n")
#: llama.cpp's cmake options: the examples only, static, nothing that needs a network library.
CMAKE_OPTIONS = ("-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF",
                 "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_SERVER=OFF",
                 "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_CURL=OFF",
                 "-DLLAMA_OPENSSL=OFF")


def check_toolchain() -> dict[str, str]:
    """The paths of cmake and of a C and a C++ compiler (``$CC``/``$CXX`` first), or
    `ToolchainMissingError` naming the one that is missing."""
    found: dict[str, str] = {}
    wanted = {"cmake": ["cmake"], "C compiler": [os.environ.get("CC", ""), "cc", "gcc", "clang"],
              "C++ compiler": [os.environ.get("CXX", ""), "c++", "g++", "clang++"]}
    for tool, names in wanted.items():
        path = next((p for n in names if n for p in [shutil.which(n)] if p), None)
        if path is None:
            raise ToolchainMissingError(
                f"building llama.cpp needs a {tool} ({' or '.join(n for n in names if n)}) on the "
                "PATH; install it (e.g. apt-get install cmake g++) and run the build again")
        found[tool] = path
    return found


def pinned_requirement(lock: Path) -> str:
    """The lock's requirement of `PACKAGE`, with its hashes, as one requirements-file line."""
    text = Path(lock).read_text()
    match = re.search(rf"^{re.escape(PACKAGE)}==(\S+)((?:\s*\\\s*\n\s*--hash=\S+)+)", text,
                      re.MULTILINE | re.IGNORECASE)
    if match is None:
        raise EngineBuildError(f"{lock} pins no {PACKAGE} with hashes; run "
                               "`python3 run.py lock llama`")
    hashes = re.findall(r"--hash=\S+", match[2])
    return f"{PACKAGE}=={match[1]} " + " ".join(hashes)


def _run(command: Sequence[str], log: Path, what: str, cwd: Path | None = None) -> None:
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(command)}\n")
        fh.flush()
        done = subprocess.run(list(command), stdout=fh, stderr=subprocess.STDOUT, cwd=cwd,
                              check=False)
    if done.returncode != 0:
        lines = log.read_text(errors="replace").splitlines()
        first = next((line.strip() for line in lines if re.search(r"error|Error|ERROR", line)),
                     lines[-1].strip() if lines else "no output")
        raise EngineBuildError(f"{what} failed (exit {done.returncode}): {first[:300]} "
                               f"(full log: {log})")


def fetch_sdist(requirement: str, folder: Path, log: Path) -> Path:
    """Download the sdist of ``requirement`` (a pinned line with hashes) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    req = folder / "requirement.txt"
    req.write_text(requirement + "\n")
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
          ":all:", "--require-hashes", "-r", str(req), "-d", str(folder)], log,
         f"downloading the {PACKAGE} sdist")
    found = sorted(folder.glob("*.tar.gz"))
    if not found:
        raise EngineBuildError(f"pip downloaded no sdist of {requirement.split()[0]} (log: {log})")
    return found[0]


def add_flush_at_exit(root: Path, log: Path) -> list[str]:
    """Add the opt-in flush (module docstring) before the last ``return 0;`` of each of
    `SOURCES` under ``root``; returns the files changed (one missing is logged, not fatal: the
    runs are then repeated until their output is complete)."""
    changed = []
    for name in SOURCES:
        path = root / name
        text = path.read_text() if path.is_file() else ""
        at = text.rfind("    return 0;\n}")
        if at < 0 or FLUSH_VARIABLE in text:
            with log.open("a") as fh:
                fh.write(f"dsi-ref: flush at exit not added to {name} (no final return 0)\n")
            continue
        text = "#include <cstdlib>\n" + text[:at] + _FLUSH + text[at:]
        path.write_text(text)
        changed.append(name)
    return changed


def build_examples(source: Path, out: Path, *, jobs: int | None = None,
                   log: Path | None = None, targets: Sequence[str] = TARGETS) -> dict[str, Path]:
    """Build ``targets`` from ``source`` (an sdist ``.tar.gz`` or a llama.cpp source folder)
    and copy them into ``out``; returns ``{target: path}``."""
    check_toolchain()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if log is None:
        log = out / "build.log"
        log.write_text("")
    with tempfile.TemporaryDirectory(prefix="dsi-ref-llama-build-") as tmp:
        root = Path(source)
        if root.is_file():
            try:
                with tarfile.open(root) as archive:
                    archive.extractall(tmp, filter="data")
            except (tarfile.TarError, OSError) as error:
                raise EngineBuildError(f"{root} is not a readable source archive: {error}"
                                       ) from None
            tops = [p for p in Path(tmp).iterdir() if p.is_dir()]
            root = tops[0] / "vendor" / "llama.cpp" if tops else Path(tmp)
        if not (root / "CMakeLists.txt").is_file():
            raise EngineBuildError(f"{source}: no llama.cpp sources (no CMakeLists.txt at "
                                   f"{root})")
        if Path(source).is_file():                  # a folder given by the user stays as it is
            add_flush_at_exit(root, log)
        build = Path(tmp) / "build"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run(["cmake", "-S", str(root), "-B", str(build), *generator, *CMAKE_OPTIONS], log,
             "configuring llama.cpp (cmake)")
        _run(["cmake", "--build", str(build), "--target", *targets, "-j",
              str(jobs or os.cpu_count() or 1)], log, "building llama.cpp's examples")
        built: dict[str, Path] = {}
        for target in targets:
            found = next((p for p in build.rglob(target) if p.is_file() and os.access(p, os.X_OK)),
                         None)
            if found is None:
                raise EngineBuildError(f"the build made no {target} (log: {log})")
            built[target] = Path(shutil.copy2(found, out / target))
    return built


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dsi_ref.backends.llama_cpp.build``: fetch the locked sdist, build, copy."""
    parser = argparse.ArgumentParser(prog="python -m dsi_ref.backends.llama_cpp.build",
                                     description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--lock", type=Path, help="a lock pinning llama-cpp-python (hashes)")
    source.add_argument("--source", type=Path, help="an sdist or a llama.cpp source folder")
    parser.add_argument("--out", type=Path, required=True, help="where the binaries go")
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        log = args.out / "build.log"
        log.write_text("")
        if args.lock is not None:
            with tempfile.TemporaryDirectory(prefix="dsi-ref-llama-sdist-") as tmp:
                sdist = fetch_sdist(pinned_requirement(args.lock), Path(tmp), log)
                built = build_examples(sdist, args.out, jobs=args.jobs, log=log)
        else:
            built = build_examples(args.source, args.out, jobs=args.jobs, log=log)
    except (ToolchainMissingError, EngineBuildError) as error:
        print(f"dsi-ref: error: {error}", file=sys.stderr)
        return 2
    print(f"[dsi-ref] built {', '.join(built)} into {args.out} in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
