"""How much do concurrent target forwards overlap on one device? (explains DSI's gap on one GPU)

A thin front end to `dsi_ref.backends.engine.measure.measure_concurrency`: ``n`` threads, each
with its own session (KV cache, CUDA stream and graphs), run ``--forwards`` target forwards of
query length ``--length`` at once, for n = 1 .. ``--sp-degree`` (DSI's SP: its servers all
busy); it prints the wall time per forward, the effective parallelism ``n · t(1) / t(n)`` (1 =
the forwards serialise, n = perfect overlap), the drafter's forward time beside ``n`` busy
targets, and the slowdowns `dsi_ref.Contention` takes (what ``dsi-ref bench`` feeds the
shared-device prediction).
Usage: ``python benchmarks/concurrency_probe.py --model llama-1b``.
"""

from __future__ import annotations

import argparse

import torch

from dsi_ref.backends.engine.measure import measure_concurrency, random_prompts
from dsi_ref.backends.torch.model import TorchLM


def main() -> None:
    """Print the probe's table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="llama-1b")
    parser.add_argument("--drafter", default="llama-68m")
    parser.add_argument("--length", type=int, default=1)
    parser.add_argument("--forwards", type=int, default=50)
    parser.add_argument("--sp-degree", type=int, default=4,
                        help="the most target forwards at once (SP, default 4)")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    lm = TorchLM(args.model, device=device, dtype=dtype, max_seq_len=512)
    drafter = TorchLM(args.drafter, seed=1, device=device, dtype=dtype, max_seq_len=512)
    prompt = random_prompts(lm.vocab_size, 1, 64, 0)[0]
    probe = measure_concurrency(lm, drafter, prompt, args.sp_degree, forwards=args.forwards,
                                length=args.length)
    for n, (per, par) in enumerate(zip(probe.target_ms, probe.parallelism, strict=True), 1):
        print(f"{args.model} length {args.length}: {n} concurrent sessions: {per:.3f} ms per "
              f"round of {n} forwards; parallelism {par:.2f}", flush=True)
    for n, per in enumerate(probe.drafter_ms):
        print(f"drafter {args.drafter} forward with {n} busy target sessions: {per:.3f} ms")
    print(f"slowdowns: {probe.contention()}")


if __name__ == "__main__":
    main()
