"""llama.cpp's C++ speculative examples, one process per sample.

`cpp_sampler` returns the ``seed -> tokens`` function of one `CppPath`:

* ``llama-speculative-simple --spec-type draft-simple -md DRAFTER --spec-draft-n-max k``: the
  drafter drafts greedily, the target samples every position with its sampler chain and keeps
  drafts while they equal its own samples (``common_sampler_sample_and_accept_n``);
* ``llama-speculative-simple --spec-type ngram-simple``: drafts copied from an earlier match of
  the last ``2`` tokens (``--spec-ngram-simple-size-n 2 --spec-ngram-simple-size-m k``), verified
  the same way;
* the same binary with an n-gram size that never matches a prompt this short: no drafts at all,
  plain sampling through the same loop (the control of the C++ paths);
* ``llama-speculative -md DRAFTER --spec-draft-n-max k``: stochastic verification (accept with
  ``min(1, p/q)``, else draw from the residual) of a draft that is the drafter's *most likely*
  token, not a draw from its ``q``: lossy (docs/engine-bugs.md, section 11).

Each sample is one process: the model files are loaded, the prompt is tokenized (BOS and its
bytes), ``N`` tokens are generated with the seed, and the generated text is read back from
stdout (every token of the tiny models is one byte). Seeds are the audit's 64-bit words reduced to
32 bits (`dsi_ref.backends.llama_cpp.binding.llama_seed`): consecutive small seeds give visibly
stratified draws in ``llama-speculative``, whose acceptance coins come from a
``std::default_random_engine`` (a linear congruential generator) seeded with them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...base.errors import EngineCrashError, EngineEnvironmentError, EngineOptionError
from .binding import llama_seed
from .build import FLUSH_VARIABLE
from .models import byte_token, check_same_vocabulary
from .sampling import SamplerConfig

__all__ = ["CPP_MODES", "NEVER_MATCHES", "RETRIES", "CppPath", "CppRun", "binary", "binary_dir",
           "cpp_sampler", "run_example"]

#: The C++ paths: the example and its speculative type.
CPP_MODES = ("no-draft", "draft-simple", "ngram-simple", "speculative")
#: An n-gram size no prompt of the audit reaches: ngram-simple then never drafts.
NEVER_MATCHES = 60
#: Where run.py's build step puts the binaries, under the environment's prefix.
BIN_FOLDER = "llama-cpp-bin"


def binary_dir() -> Path:
    """The folder of the built examples: ``$DSI_REF_LLAMA_BIN``, else ``llama-cpp-bin`` under
    this Python's environment (where ``python3 run.py audit --llama`` builds them)."""
    explicit = os.environ.get("DSI_REF_LLAMA_BIN")
    return Path(explicit) if explicit else Path(sys.prefix) / BIN_FOLDER


def binary(name: str) -> Path:
    """The path of example ``name``, or `EngineEnvironmentError` saying how to build it."""
    path = binary_dir() / name
    if path.is_file() and os.access(path, os.X_OK):
        return path
    found = shutil.which(name)
    if found:
        return Path(found)
    raise EngineEnvironmentError(
        f"{name} not found in {binary_dir()} nor on the PATH; `python3 run.py audit --llama` "
        "builds it (or: python -m dsi_ref.backends.llama_cpp.build --source SDIST --out DIR, "
        "then DSI_REF_LLAMA_BIN=DIR)")


@dataclass(frozen=True)
class CppPath:
    """One C++ path: ``mode`` (`CPP_MODES`), the draft length ``k`` and the drafter's GGUF file
    (``draft-simple`` and ``speculative``)."""

    mode: str
    k: int = 0
    drafter: Path | None = None

    def __post_init__(self) -> None:
        if self.mode not in CPP_MODES:
            raise EngineOptionError(f"unknown C++ path {self.mode!r}; known: "
                                    f"{', '.join(CPP_MODES)}")
        if (self.mode == "no-draft") != (self.k == 0) or self.k < 0:
            raise EngineOptionError(f"{self.mode}: k = {self.k} (0 exactly for no-draft)")
        needs = self.mode in {"draft-simple", "speculative"}
        if needs != (self.drafter is not None):
            raise EngineOptionError(f"{self.mode}: a drafter file goes with draft-simple and "
                                    "speculative only")

    @property
    def example(self) -> str:
        """The binary this path runs."""
        return "llama-speculative" if self.mode == "speculative" else "llama-speculative-simple"

    def args(self) -> list[str]:
        """The path's own flags."""
        if self.mode == "speculative":
            assert self.drafter is not None
            return ["-md", str(self.drafter), "--spec-draft-n-max", str(self.k)]
        if self.mode == "draft-simple":
            assert self.drafter is not None
            return ["--spec-type", "draft-simple", "-md", str(self.drafter),
                    "--spec-draft-n-max", str(self.k)]
        size = NEVER_MATCHES if self.mode == "no-draft" else 2
        return ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(size),
                "--spec-ngram-simple-size-m", str(max(self.k, 1))]


#: Flags every run gets: one thread, float32 KV caches (target and drafter), a small context.
COMMON_FLAGS = ("-t", "1", "-tb", "1", "-td", "1", "-tbd", "1", "-c", "64", "-ctk", "f32",
                "-ctv", "f32", "-ctkd", "f32", "-ctvd", "f32")


@dataclass(frozen=True)
class CppRun:
    """One sample's result: the generated tokens, the counters the example printed, and how many
    runs it took (see `run_example`)."""

    tokens: tuple[int, ...]
    n_drafted: int | None
    n_accept: int | None
    attempts: int = 1


def _counter(stderr: str, name: str) -> int | None:
    for line in stderr.splitlines():
        parts = line.replace("=", " = ").split()
        if name in parts and "=" in parts:
            try:
                return int(parts[parts.index("=", parts.index(name)) + 1])
            except (ValueError, IndexError):
                return None
    return None


#: How many times a run whose output the logger lost is repeated (the same seed: the same
#: tokens) before the sample is given up as a crash.
RETRIES = 50
_PIN = threading.local()
_NEXT_CORE = itertools.count()


def _pinned(command: list[str]) -> list[str]:
    """``command`` pinned to one core (``taskset``), a core per calling thread: the examples lose
    their output far less often when their two threads share a core (module docstring)."""
    taskset = shutil.which("taskset")
    if taskset is None or not hasattr(os, "sched_getaffinity"):
        return command
    if not hasattr(_PIN, "core"):
        cores = sorted(os.sched_getaffinity(0))
        _PIN.core = cores[next(_NEXT_CORE) % len(cores)]
    return [taskset, "-c", str(_PIN.core), *command]


def _one_run(command: list[str], example: str) -> tuple[bytes, str] | None:
    env = {**os.environ, FLUSH_VARIABLE: "1"}
    done = subprocess.run(_pinned(command), capture_output=True, check=False, timeout=120,
                          env=env)
    stderr = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        last = [line for line in stderr.splitlines() if line.strip()][-3:]
        raise EngineCrashError(f"{example} exited with {done.returncode}: "
                               f"{' | '.join(last) or 'no output'}")
    if _counter(stderr, "n_accept") is None:     # the last line it logs: the rest was lost
        return None
    return done.stdout, stderr


def run_example(target: Path, path: CppPath, prompt: bytes, n_tokens: int, seed: int,
                config: SamplerConfig, extra: Sequence[str] = ()) -> CppRun:
    """Run ``path``'s example once: ``n_tokens`` new tokens after ``prompt`` with ``seed``.

    The examples log their output through a queue that a thread drains, and the logger is never
    flushed at exit (ggml-org/llama.cpp#22142): a short run can lose everything it logged after
    its first line, the more often the busier the machine (from a few percent of the runs, pinned
    to one core, to almost all of them beside other work). The examples built by
    `dsi_ref.backends.llama_cpp.build` flush it when ``DSI_REF_FLUSH_LOG`` is set, as it is
    here; a run whose last line (the counters) is missing all the same (another build) is
    repeated with the same seed; `CppRun.attempts` counts the runs."""
    command = [str(binary(path.example)), "-m", str(target), *path.args(), "-p",
               prompt.decode("ascii"), "-n", str(n_tokens), "-s", str(llama_seed(seed)),
               *COMMON_FLAGS, *config.cli_args(), *extra]
    for attempt in range(1, RETRIES + 1):
        result = _one_run(command, path.example)
        if result is None:
            continue
        out, stderr = result
        start = out.find(prompt)
        if start < 0:
            raise EngineCrashError(f"{path.example}: the prompt is not in its output "
                                   f"({out[:80]!r})")
        generated = out[start + len(prompt):].rstrip(b"\n")
        tokens = tuple(byte_token(b) for b in generated)
        return CppRun(tokens, _counter(stderr, "n_drafted"), _counter(stderr, "n_accept"),
                      attempt)
    raise EngineCrashError(f"{path.example}: {RETRIES} runs with seed {seed} all lost their "
                           "output (ggml-org/llama.cpp#22142)")


def cpp_sampler(target: Path, path: CppPath, prompt: bytes, n_tokens: int,
                config: SamplerConfig) -> Callable[[int], tuple[int, ...]]:
    """``seed -> the generated tokens`` of ``path`` (at least ``n_tokens`` unless it stopped)."""
    binary(path.example)                      # fail now, in one line, if it is not built
    if path.drafter is not None:
        check_same_vocabulary(target, path.drafter)

    def sample(seed: int) -> tuple[int, ...]:
        return run_example(target, path, prompt, n_tokens, seed, config).tokens

    return sample
