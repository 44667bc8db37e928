"""The process that runs one OpenVINO GenAI pipeline for
`dsi_ref.backends.openvino.engine.EngineProcess`.

``python -m dsi_ref.backends.openvino.worker`` reads one JSON request per line on stdin and
answers each with one JSON line on stdout; everything else the process prints goes to stderr.
Requests: ``start`` (build ``openvino_genai.LLMPipeline``), ``generate`` (one request per seed,
in order), ``memory`` (peak resident memory), ``quit``. An error is answered as
``{"error": class name, "message": one line}``: `EngineOptionError` for a configuration GenAI
refuses, `EngineEnvironmentError` when openvino_genai cannot be imported, `EngineCrashError`
when a request raises (with the index of the seed that raised); after a crash the pipeline is
dropped, since GenAI's speculative pipeline does not recover from one (later requests never
accept a draft).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import IO, Any

__all__ = ["main"]


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    # GenAI's checks read "Check '...' failed at /build/path/src/FILE:LINE:" then the reason:
    # keep both, with the path from the source tree's src/ on (the build folder says nothing)
    text = " ".join(lines[:2]) if lines else type(error).__name__
    text = re.sub(r" at \S*?/(src/\S+?:\d+):?", r" at \1", text)
    return f"{type(error).__name__}: {text}"[:600]


class _Engine:
    def __init__(self) -> None:
        self.pipe: Any = None
        self.spec: dict[str, Any] = {}

    def start(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            import openvino_genai as genai
        except ImportError as error:
            return {"error": "EngineEnvironmentError",
                    "message": f"openvino_genai cannot be imported here ({_one_line(error)}): "
                               "build the environment with `python3 run.py audit --openvino`"}
        config = request["config"]
        self.spec = config
        properties: dict[str, Any] = dict(config["properties"])
        kwargs: dict[str, Any] = dict(properties)
        if config["prefix_caching"] is not None:
            scheduler = genai.SchedulerConfig()
            scheduler.enable_prefix_caching = bool(config["prefix_caching"])
            scheduler.cache_size = 1  # GiB of KV cache: plenty for 3 tokens
            kwargs["scheduler_config"] = scheduler
        if config["attention_backend"]:
            kwargs["ATTENTION_BACKEND"] = config["attention_backend"]
        if config["mode"] == "draft":
            kwargs["draft_model"] = genai.draft_model(request["drafter"], "CPU", **properties)
        elif config["mode"] == "prompt_lookup":
            kwargs["prompt_lookup"] = True
        try:
            self.pipe = genai.LLMPipeline(request["target"], "CPU", **kwargs)
        except (RuntimeError, ValueError, TypeError) as error:
            return {"error": "EngineOptionError",
                    "message": f"openvino-genai {genai.__version__.split('-')[0]} refuses "
                               f"{config['label']}: {_one_line(error)}"}
        return {"ok": True, "openvino_genai": genai.__version__.split("-")[0]}

    def generate(self, request: dict[str, Any]) -> dict[str, Any]:
        import numpy as np
        import openvino as ov
        import openvino_genai as genai

        from .sampling import Sampling

        fields = Sampling.from_dict(request["sampling"]).config()
        fields |= {"max_new_tokens": int(request["max_tokens"]), "ignore_eos": True}
        if self.spec["mode"] != "none":
            fields |= dict(self.spec["generation"])
        ids = ov.Tensor(np.array([request["prompt"]], dtype=np.int64))
        outputs: list[list[int]] = []
        start = time.perf_counter()
        for index, seed in enumerate(request["seeds"]):
            config = genai.GenerationConfig()
            for key, value in fields.items():
                setattr(config, key, value)
            config.rng_seed = int(seed)
            try:
                result = self.pipe.generate(ids, config)
            except RuntimeError as error:
                self.pipe = None
                return {"error": "EngineCrashError",
                        "message": f"request {index + 1} of the batch (seed {seed}) raised "
                                   f"{_one_line(error)}", "done": outputs}
            except (TypeError, ValueError) as error:
                return {"error": "EngineOptionError", "message": _one_line(error)}
            outputs.append([int(t) for t in result.tokens[0]])
        return {"outputs": outputs, "seconds": time.perf_counter() - start}


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    """Serve requests until ``quit`` or the end of stdin."""
    protocol: IO[str] = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the engine's own prints go to stderr, not into the protocol
    sys.stdout = sys.stderr
    engine = _Engine()
    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        if op == "quit":
            break
        if op == "start":
            reply = engine.start(request)
        elif op == "generate" and engine.pipe is None:
            reply = {"error": "EngineCrashError", "message": "the engine crashed earlier"}
        elif op == "generate":
            reply = engine.generate(request)
        elif op == "memory":
            reply = {"peak_rss_mb": _peak_rss_mb()}
        else:
            reply = {"error": "BackendError", "message": f"unknown request {op!r}"}
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
