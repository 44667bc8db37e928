"""One OpenVINO GenAI pipeline configuration, run in a process of its own.

An `EngineConfig` names what a user passes to ``openvino_genai.LLMPipeline``: no speculation, a
draft model (``draft_model=openvino_genai.draft_model(dir, "CPU")``) with
``num_assistant_tokens = k`` or an ``assistant_confidence_threshold``, or prompt lookup
(``prompt_lookup=True``, ``max_ngram_size``); the attention backend (``"PA"``, the continuous
batching pipeline, GenAI's default on a CPU; ``"SDPA"``, the stateful one); whether the KV
cache's prefix caching is set by hand (``None``: as the pipeline sets it); and the device
properties. Every engine runs in float32 by default (``INFERENCE_PRECISION_HINT=f32``,
``KV_CACHE_PRECISION=f32``, one inference thread): on a CPU with bf16 instructions the plugin's
defaults are bfloat16 inference and an 8-bit KV cache, whose logits are 4e-2 from the float64
reference's (the audit is of the decoding, not of the arithmetic).

`EngineProcess` starts the pipeline in a fresh Python process
(`dsi_ref.backends.openvino.worker`) and sends it batches of seeds; each seed is one
``generate`` call on the prompt's token ids with ``GenerationConfig(rng_seed=seed,
ignore_eos=True)``; the tokens come back as ids.
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
from .sampling import Sampling

__all__ = ["F32", "MODES", "EngineConfig", "EngineProcess", "worker_python"]

#: The speculative modes of ``LLMPipeline`` on a CPU (``none``: the control).
MODES = ("none", "draft", "prompt_lookup")
#: The device properties of every engine of the audit: float32 arithmetic, one thread.
F32: tuple[tuple[str, Any], ...] = (("INFERENCE_PRECISION_HINT", "f32"),
                                    ("KV_CACHE_PRECISION", "f32"),
                                    ("INFERENCE_NUM_THREADS", 1))
_ERRORS: dict[str, type[BackendError]] = {
    "EngineCrashError": EngineCrashError, "EngineEnvironmentError": EngineEnvironmentError,
    "EngineOptionError": EngineOptionError,
    "ModelDirectoryError": ModelDirectoryError, "VocabularyMismatchError": VocabularyMismatchError,
}


@dataclass(frozen=True)
class EngineConfig:
    """An ``LLMPipeline``: the speculative mode, its drafter and options.

    Attributes:
        mode: ``none``, ``draft`` or ``prompt_lookup`` (`MODES`).
        drafter: the draft model's folder (``draft``): a converted IR folder, or a name the
            matrix resolves (``near``, ``independent``).
        drafter_name: a short name of the drafter for labels.
        k: ``num_assistant_tokens`` (``None`` with a confidence threshold).
        confidence: ``assistant_confidence_threshold`` (``None``: a fixed ``k``).
        max_ngram_size: prompt lookup's n-gram size.
        attention_backend: ``""`` (GenAI's default, ``PA`` on a CPU) or ``"SDPA"``.
        prefix_caching: ``None`` leaves the scheduler as ``LLMPipeline`` makes it; ``False``
            passes a ``SchedulerConfig`` without prefix caching (the workaround of the crash).
        properties: device properties (`F32` by default).
    """

    mode: str = "none"
    drafter: str | None = None
    drafter_name: str = ""
    k: int | None = 2
    confidence: float | None = None
    max_ngram_size: int = 2
    attention_backend: str = ""
    prefix_caching: bool | None = None
    properties: tuple[tuple[str, Any], ...] = F32

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise EngineOptionError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "draft" and not self.drafter:
            raise EngineOptionError("a draft-model pipeline needs a drafter folder")
        if self.mode != "none" and (self.k is None) == (self.confidence is None):
            raise EngineOptionError("give num_assistant_tokens (k) or an "
                                    "assistant_confidence_threshold, not both")
        if self.k is not None and not 1 <= self.k <= 16:
            raise EngineOptionError(f"num_assistant_tokens must lie in 1..16, got {self.k}")
        if self.confidence is not None and not 0 < self.confidence < 1:
            raise EngineOptionError("assistant_confidence_threshold must lie in (0, 1), got "
                                    f"{self.confidence}")
        if self.attention_backend not in {"", "PA", "SDPA"}:
            raise EngineOptionError(f"attention_backend must be PA or SDPA, got "
                                    f"{self.attention_backend!r}")

    @property
    def label(self) -> str:
        """``no speculation``, ``draft(near) k=2``, ``prompt lookup k=2 n=2``..."""
        if self.mode == "none":
            out = "no speculation"
        else:
            size = f"k={self.k}" if self.k is not None else f"confidence {self.confidence:g}"
            if self.mode == "draft":
                name = self.drafter_name or Path(str(self.drafter)).name
                out = f"draft({name}) {size}"
            else:
                out = f"prompt lookup {size} n={self.max_ngram_size}"
        if self.attention_backend:
            out += f" {self.attention_backend}"
        if self.prefix_caching is False:
            out += " [no prefix caching]"
        elif self.prefix_caching:
            out += " [prefix caching]"
        if self.properties != F32:
            out += " [device defaults]" if not self.properties else " [properties]"
        return out

    def generation(self) -> dict[str, Any]:
        """The speculative fields of ``GenerationConfig``."""
        if self.mode == "none":
            return {}
        out: dict[str, Any] = ({"num_assistant_tokens": self.k} if self.k is not None
                               else {"assistant_confidence_threshold": self.confidence})
        if self.mode == "prompt_lookup":
            out["max_ngram_size"] = self.max_ngram_size
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (what the worker is sent)."""
        return {"mode": self.mode, "drafter": self.drafter, "label": self.label,
                "prefix_caching": self.prefix_caching,
                "attention_backend": self.attention_backend,
                "properties": dict(self.properties), "generation": self.generation()}


def worker_python() -> str:
    """The interpreter that runs the engines: ``$DSI_REF_OPENVINO_PYTHON``, else this one."""
    return os.environ.get("DSI_REF_OPENVINO_PYTHON") or sys.executable


@dataclass
class EngineProcess:
    """A started pipeline in its own process (a context manager: the process ends on exit).
    ``target`` and the config's drafter are converted IR folders
    (`dsi_ref.backends.openvino.models.convert`)."""

    config: EngineConfig
    target: str | Path
    start_seconds: float = 0.0
    version: str = ""
    _process: subprocess.Popen[str] | None = field(default=None, repr=False)
    _log: IO[str] | None = field(default=None, repr=False)

    def _check(self) -> None:
        from ..vllm.models import check_same_vocabulary
        from .models import is_ir_folder

        for name, folder in (("target", self.target), ("drafter", self.config.drafter)):
            if folder is not None and not is_ir_folder(folder):
                raise ModelDirectoryError(f"{name} {str(folder)!r} is not an OpenVINO IR folder "
                                          "with its tokenizers (convert it with "
                                          "dsi_ref.backends.openvino.models.convert)")
        if self.config.mode == "draft":
            check_same_vocabulary(self.target, str(self.config.drafter))

    def __enter__(self) -> EngineProcess:
        self._check()
        self._log = tempfile.TemporaryFile(mode="w+")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        try:
            self._process = subprocess.Popen(
                [worker_python(), "-m", "dsi_ref.backends.openvino.worker"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                env=env)
        except OSError as error:
            raise EngineEnvironmentError(f"cannot start {worker_python()} ({error}): build the "
                                         "OpenVINO environment with `python3 run.py audit "
                                         "--openvino`") from None
        start = time.perf_counter()
        try:
            reply = self._call({"op": "start", "target": str(self.target),
                                "drafter": self.config.drafter, "config": self.config.as_dict()})
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.perf_counter() - start
        self.version = str(reply.get("openvino_genai", ""))
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

    def _stderr_tail(self, lines: int = 8) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        text = [line for line in self._log.read().splitlines() if line.strip()]
        return "\n".join(text[-lines:])

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        if self._process is None:
            raise BackendError("the engine process is not running")
        assert self._process.stdin is not None and self._process.stdout is not None
        with contextlib.suppress(BrokenPipeError):  # a dead process: its output says why
            self._process.stdin.write(json.dumps(message) + "\n")
            self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait()
            tail = self._stderr_tail()
            if "No module named" in tail:
                raise EngineEnvironmentError(
                    f"{worker_python()} cannot import openvino_genai (or dsi-ref): build the "
                    "OpenVINO environment with `python3 run.py audit --openvino` (it makes "
                    ".venv-openvino), or point DSI_REF_OPENVINO_PYTHON at a Python that has it")
            last = tail.splitlines()[-1] if tail else "no output"
            raise EngineCrashError(f"the OpenVINO engine process ended (exit {code}): {last}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise _ERRORS.get(reply["error"], BackendError)(reply["message"])
        return reply

    def generate(self, prompt: Sequence[int], max_tokens: int, sampling: Sampling,
                 seeds: Sequence[int]) -> list[tuple[int, ...]]:
        """The tokens of one request per seed (same prompt and settings), in seed order."""
        reply = self._call({"op": "generate", "prompt": [int(t) for t in prompt],
                            "max_tokens": int(max_tokens), "sampling": sampling.as_dict(),
                            "seeds": [int(s) for s in seeds]})
        return [tuple(int(t) for t in out) for out in reply["outputs"]]

    def batches(self, prompt: Sequence[int], max_tokens: int, sampling: Sampling,
                seeds: Sequence[int], batch: int = 1000) -> Iterator[list[tuple[int, ...]]]:
        """`generate` in batches of ``batch`` seeds (for a progress bar)."""
        for start in range(0, len(seeds), batch):
            yield self.generate(prompt, max_tokens, sampling, seeds[start:start + batch])

    def peak_rss_mb(self) -> float:
        """The engine process's peak resident memory so far, in MiB (``VmHWM``)."""
        return float(self._call({"op": "memory"})["peak_rss_mb"])
