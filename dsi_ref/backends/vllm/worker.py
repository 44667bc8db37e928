"""The process that runs one vLLM engine for `dsi_ref.backends.vllm.engine.EngineProcess`.

``python -m dsi_ref.backends.vllm.worker`` reads one JSON request per line on stdin and answers
each with one JSON line on stdout; everything else the process prints (vLLM's logs) goes to
stderr. Requests: ``start`` (install the expand shim, and `dsi_ref.backends.vllm.mutants`'
counter and negative control; build ``vllm.LLM``), ``generate`` (one batch of seeded requests,
with the drafts verified and accepted in it), ``memory`` (peak resident memory), ``quit``. An
error is answered as ``{"error": class name, "message": one line}``: `EngineOptionError` for a
configuration vLLM refuses, `EngineEnvironmentError` for a vLLM that cannot be imported.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import IO, Any

__all__ = ["main"]


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    # pydantic's validation errors put the reason on the second line
    text = " ".join(lines[:3]) if lines else type(error).__name__
    return f"{type(error).__name__}: {text}"[:600]


class _Engine:
    def __init__(self) -> None:
        self.llm: Any = None

    def start(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            import vllm
        except ImportError as error:
            return {"error": "EngineEnvironmentError",
                    "message": f"vLLM cannot be imported here ({_one_line(error)}): build the "
                               "environment with `python3 run.py audit --vllm`"}
        from .mutants import install as install_counter
        from .patches import install

        config = request["config"]
        install(config["expand"])
        install_counter(config.get("mutant"))
        kwargs: dict[str, Any] = {
            "model": request["target"], "enforce_eager": True, "dtype": "float32",
            "max_model_len": 64, "seed": 0, "gpu_memory_utilization": 0.2,
            "kv_cache_memory_bytes": 128 * 2**20, "disable_log_stats": True,
        }
        if request["speculative_config"] is not None:
            kwargs["speculative_config"] = request["speculative_config"]
        try:
            self.llm = vllm.LLM(**kwargs)
        except (ValueError, TypeError, NotImplementedError, AssertionError, ImportError,
                RuntimeError, KeyError, AttributeError) as error:
            return {"error": "EngineOptionError",
                    "message": f"vLLM {vllm.__version__} refuses {request['speculative_config']}"
                               f": {_one_line(error)}"}
        return {"ok": True, "vllm": vllm.__version__}

    def generate(self, request: dict[str, Any]) -> dict[str, Any]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        from .sampling import Sampling

        settings = Sampling.from_dict(request["sampling"]).params()
        params = [SamplingParams(**settings, seed=int(seed), max_tokens=request["max_tokens"],
                                 ignore_eos=True, detokenize=False)
                  for seed in request["seeds"]]
        prompt = TokensPrompt(prompt_token_ids=list(request["prompt"]))
        from vllm.exceptions import VLLMClientError

        start = time.perf_counter()
        try:
            outputs = self.llm.generate([prompt] * len(params), params, use_tqdm=False)
        except (VLLMClientError, ValueError, TypeError) as error:  # the request is refused
            return {"error": "EngineOptionError", "message": _one_line(error)}
        except Exception as error:
            self.llm = None
            return {"error": "EngineCrashError", "message": _one_line(error)}
        from .mutants import take_counts

        drafted, accepted = take_counts()
        return {"outputs": [list(o.outputs[0].token_ids) for o in outputs],
                "seconds": time.perf_counter() - start, "drafted": drafted,
                "accepted": accepted}


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    """Serve requests until ``quit`` or the end of stdin."""
    protocol: IO[str] = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # vLLM's own prints go to stderr, not into the protocol
    sys.stdout = sys.stderr
    engine = _Engine()
    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        if op == "quit":
            break
        if op == "start":
            reply = engine.start(request)
        elif op == "generate" and engine.llm is None:
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
