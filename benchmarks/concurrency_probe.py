"""How much do concurrent target forwards overlap on one device? (explains DSI's gap on one GPU)

Runs ``forwards`` cached target forwards (query length ``--length``) on each of ``n`` sessions,
each in its own thread with its own CUDA stream and graphs, for n = 1, 2, 4, ... and prints the
wall-clock time per forward and the effective parallelism ``n * t(1) / t(n)`` (1 = the forwards
serialise, n = perfect overlap). Usage: ``python benchmarks/concurrency_probe.py --model llama-1b``.
"""

from __future__ import annotations

import argparse
import threading
import time

import torch

from dsi_ref.backends.measure import random_prompts
from dsi_ref.backends.torch_lm import TorchLM


def main() -> None:
    """Print the probe's table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="llama-1b")
    parser.add_argument("--drafter", default="llama-68m")
    parser.add_argument("--length", type=int, default=1)
    parser.add_argument("--forwards", type=int, default=50)
    parser.add_argument("--sessions", default="1,2,3,4")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    lm = TorchLM(args.model, device=device, dtype=dtype, max_seq_len=512)
    prompt = random_prompts(lm.vocab_size, 1, 64, 0)[0]
    counts = [int(x) for x in args.sessions.split(",")]
    sessions = [lm.session() for _ in range(max(counts))]
    for s in sessions:          # capture graphs, prefill
        s.rows(prompt, 1)

    def work(session_index: int) -> None:
        s = sessions[session_index]
        seq = list(prompt)
        for i in range(args.forwards):
            s.rows(seq[: len(prompt) + i] + [1] * args.length, args.length)

    base = None
    for n in counts:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        per = elapsed / args.forwards * 1e3
        base = base or per
        print(f"{args.model} length {args.length}: {n} concurrent sessions: {per:.3f} ms per "
              f"round of {n} forwards; parallelism {n * base / per:.2f}", flush=True)
    # drafter forwards while n target sessions run
    drafter = TorchLM(args.drafter, seed=1, device=device, dtype=dtype, max_seq_len=512)
    d = drafter.session()
    d.rows(prompt, 1)
    for n in (0, 1, 2):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        t0 = time.perf_counter()
        seq = list(prompt)
        for i in range(100):
            d.rows(seq[: len(prompt) + i] + [1], 1)
        per = (time.perf_counter() - t0) / 100 * 1e3
        for t in threads:
            t.join()
        print(f"drafter {args.drafter} forward with {n} busy target sessions: {per:.3f} ms",
              flush=True)


if __name__ == "__main__":
    main()
