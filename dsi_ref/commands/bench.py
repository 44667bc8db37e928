"""``dsi-ref bench``: wall-clock non-SI, SI and DSI on torch models, beside the simulator.

For a target/drafter pair it (1) measures TTFT/TPOT of both models and their acceptance rate the
paper's way (`dsi_ref.backends.engine.measure`), (2) runs non-SI, SI and DSI for real on the same
prompts (`dsi_ref.backends.engine.Engine`; decoding time after prefill), and (3) prints the
measured speedups beside the simulator's prediction for the *measured* ``c`` and ``a``, plus the
orchestration overhead per event of the DSI committer.

Besides the paper's setting (independent servers, every forward one TPOT) it predicts with two
more measured inputs: how concurrent forwards slow each other down on one device
(`measure_concurrency` → ``contention=``), and the cost ``v`` of a verification forward over
``k + 1`` tokens in TPOTs (`measure_verify_cost` → ``verify_cost=``).

Every prediction is the simulator's (`dsi_ref.expected_latency`, paper and event models) and the
SP requirement is `dsi_ref.sim.required_servers`: this command computes no closed form of its own.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import InvalidParameterError
from ..decoders.tree import TREE_VERIFY_RULES
from ..decoders.verification import VERIFY_RULES
from .args import Subparsers, check_output, nonnegative_int, positive_int

if TYPE_CHECKING:
    from ..sim.batched import BatchedCosts
    from ..sim.params import Algorithm, Contention

__all__ = ["install", "predictions"]


def predictions(c: float, a: float, lookahead: int, n_tokens: int,
                sp_degree: int) -> dict[str, Any]:
    """Predicted latencies (target forwards) of non-SI, SI and DSI for the measured ``c``, ``a``
    at lookahead ``k`` = ``lookahead``: the paper model (unlimited servers) for all three, and
    the event model with ``SP`` = ``sp_degree`` servers for DSI (``dsi_event``, or
    ``dsi_event_error`` when it cannot be computed).

    >>> round(predictions(0.1, 0.5, 2, 4, 2)["si"], 6)
    2.975
    """
    from ..sim import expected_latency

    out: dict[str, Any] = {"source": "dsi_ref.expected_latency (paper model; event model "
                           f"with sp_degree={sp_degree})"}
    for algorithm in ("nonsi", "si", "dsi"):
        out[algorithm] = float(expected_latency(algorithm, c=c, a=a, lookahead=lookahead,
                                                n_tokens=n_tokens, model="paper"))
    try:
        out["dsi_event"] = float(expected_latency("dsi", c=c, a=a, lookahead=lookahead,
                                                  n_tokens=n_tokens, model="event",
                                                  sp_degree=sp_degree))
    except Exception as error:
        out["dsi_event_error"] = str(error)
    return out


def _csv_ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def _csv_devices(text: str) -> list[str]:
    devices = [v.strip() for v in text.split(",") if v.strip()]
    if not devices:
        raise argparse.ArgumentTypeError(f"expected comma-separated devices, got {text!r}")
    return devices


def _bench(args: argparse.Namespace) -> int:
    for path in (args.json, args.table_row):   # outputs first: never fail after the run
        if path is not None:
            check_output(path)
    if args.tree:
        from .bench_tree import check_tree_args

        check_tree_args(args)
    elif args.verify not in VERIFY_RULES:
        raise InvalidParameterError(f"--verify {args.verify} is a tree rule: pass --tree too "
                                    f"(without it, one of {', '.join(VERIFY_RULES)})")
    try:
        from ..backends.torch.transformer import PRESETS
    except ImportError as error:
        raise InvalidParameterError(f"dsi-ref bench needs the [torch] extra ({error}): pip "
                                    "install 'dsi-ref[torch]'") from None
    for name in (args.target, args.drafter):
        if not Path(name).is_dir() and name not in PRESETS:
            raise InvalidParameterError(f"unknown preset {name!r} (and not a checkpoint "
                                        f"directory); known presets: {', '.join(PRESETS)}")
    from ..backends.engine import Engine
    from ..backends.engine.measure import random_prompts
    from ..backends.torch.model import TorchLM
    from ..backends.torch.transformer import canonical_device, describe_device, resolve_device

    device = resolve_device(args.device)
    canonical_device(device)   # a CUDA device this machine lacks is a BackendError, now
    max_seq = args.prompt_len + args.new_tokens + max(args.lookahead) + 2
    if args.batched:                    # measure_batched_costs: a 64-token prefix + a window
        max_seq = max(max_seq, 64 + max(args.lookahead) + 2)
    if args.tree:                       # the tree's nodes sit after the prefix in the cache
        from .bench_tree import tree_nodes

        max_seq += tree_nodes(args.tree)
    models: list[Any] = []
    for name, seed in ((args.target, args.seed), (args.drafter, args.seed + 1)):
        if Path(name).is_dir():          # a local Hugging Face checkpoint directory
            from ..backends.torch.checkpoint import CheckpointLM

            models.append(CheckpointLM(name, device=device, dtype=args.dtype))
        else:
            models.append(TorchLM(name, seed=seed, device=device, dtype=args.dtype,
                                  max_seq_len=max_seq))
    target, drafter = models
    prompts = random_prompts(target.vocab_size, args.prompts, args.prompt_len, args.seed)
    where = describe_device(device)
    print(f"# dsi-ref bench: {target.name} ({_millions(target)}M) / "
          f"{drafter.name} ({_millions(drafter)}M), {args.dtype} on {where}; "
          f"{args.prompts} prompts x {args.new_tokens} new tokens, "
          f"prompt length {args.prompt_len}, verify={args.verify}, segments={args.segments}, "
          f"frontier_yields={args.frontier_yields}, batched={args.batched}, "
          f"server devices {','.join(args.server_devices or [where])}",
          flush=True)

    if args.backend == "ray":   # DSI's servers as Ray actors (dsi_ref.backends.ray)
        from ..backends.ray import RayEngine

        engine: Engine = RayEngine(target, drafter, address=args.ray_address,
                                   join_existing=args.ray_join, num_gpus=args.ray_gpus,
                                   segments=args.segments, ship=args.ray_ship,
                                   max_replacements=args.ray_replacements)
    else:
        engine = Engine(target, drafter, segments=args.segments,   # a BackendError: main's
                        frontier_yields=args.frontier_yields, batched=args.batched,
                        server_devices=args.server_devices)
    try:
        if args.tree:
            from .bench_tree import tree_bench

            return tree_bench(engine, prompts, args)
        return _measure_and_run(engine, target, drafter, prompts, where, args)
    finally:
        engine.close()


def _measure_and_run(engine: Any, target: Any, drafter: Any, prompts: list[tuple[int, ...]],
                     where: str, args: argparse.Namespace) -> int:
    from ..backends.engine.measure import measure_concurrency, measure_pair, measure_verify_cost
    from ..backends.torch.transformer import canonical_device
    from ..base.randomness import Sampler

    pair = measure_pair(target, drafter, prompts, args.new_tokens, seed=args.seed)
    a = pair.acceptance if args.verify == "greedy" else pair.sampling_acceptance
    if not 0 < a < 1:
        print(f"measured acceptance {a} is not in (0, 1): the simulator cannot predict; use "
              "more prompts or tokens, or another --verify", file=sys.stderr)
        return 1
    print(f"measured: target TTFT {pair.target_ttft_ms:.2f} ms, TPOT {pair.target_tpot_ms:.3f} "
          f"ms; drafter TTFT {pair.drafter_ttft_ms:.2f} ms, TPOT {pair.drafter_tpot_ms:.3f} ms; "
          f"c = {pair.c:.4f}; acceptance greedy {pair.acceptance:.4f}, sampling "
          f"{pair.sampling_acceptance:.4f} (a used: {a:.4f})", flush=True)

    probe = None
    one_device = set(engine.server_devices) == {canonical_device(target.device)}
    if args.contention_forwards and one_device:
        probe = measure_concurrency(target, drafter, prompts[0], max(args.sp_degree),
                                    forwards=args.contention_forwards)
        print("measured on one device: a target forward with "
              + ", ".join(f"{m} running {t:.3f} ms" for m, t in enumerate(probe.target_ms, 1))
              + " (parallelism " + ", ".join(f"{x:.2f}" for x in probe.parallelism)
              + "); a drafter forward beside "
              + ", ".join(f"{m}: {t:.3f} ms" for m, t in enumerate(probe.drafter_ms)),
              flush=True)

    verify_costs: dict[int, float] = {}
    if args.contention_forwards:
        verify_costs = measure_verify_cost(target, prompts[0],
                                           [lookahead + 1 for lookahead in args.lookahead],
                                           forwards=args.contention_forwards)
        print("measured: a verification forward (k + 1 tokens) costs "
              + ", ".join(f"v = {verify_costs[lookahead + 1]:.3f} (k = {lookahead})"
                          for lookahead in args.lookahead)
              + " one-token forwards", flush=True)

    batched_costs: dict[int, BatchedCosts] = {}
    if args.batched and args.backend == "thread":   # the batched servers' own cost model
        from ..backends.engine.measure import measure_batched_costs

        for lookahead in args.lookahead:
            costs = batched_costs[lookahead] = measure_batched_costs(
                engine, max(args.sp_degree), lookahead)
            print(f"measured (k = {lookahead}): a batched forward of b windows of k + 1 tokens "
                  "costs " + ", ".join(f"{costs.batch_ms(b):.3f}"
                                       for b in range(1, max(args.sp_degree) + 1))
                  + f" ms (b = 1 .. {max(args.sp_degree)}), one window in a session "
                  f"{costs.verify_ms:.3f} ms", flush=True)

    if args.table_row:   # the measured inputs, in the format of `dsi-ref table --rows`
        row = pair.table_row(greedy=args.verify == "greedy", sp_degree=max(args.sp_degree))
        with open(args.table_row, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(row))
            writer.writeheader()
            writer.writerow(row)
        print(f"table row written to {args.table_row} (dsi-ref table --rows {args.table_row})")

    results: list[dict[str, Any]] = []
    contention = probe.contention() if probe is not None else None
    warm = prompts[0]
    for lookahead in args.lookahead:     # warm-up: graphs of every session, allocator, clocks
        engine.autoregressive(warm, 8, Sampler(0), greedy=args.verify == "greedy")
        engine.speculative(warm, 8, Sampler(0), lookahead=lookahead, verify=args.verify)
        for sp_degree in args.sp_degree:
            engine.dsi(warm, 8, Sampler(0), lookahead=lookahead, sp_degree=sp_degree,
                       verify=args.verify)
    for lookahead in args.lookahead:
        for sp_degree in args.sp_degree:
            results.append(_run_config(engine, prompts, args, lookahead, sp_degree,
                                       pair.target_tpot_ms, pair.c, a, contention,
                                       verify_costs.get(lookahead + 1),
                                       batched_costs.get(lookahead)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"pair": pair.as_row(), "device": where, "dtype": args.dtype,
                       "new_tokens": args.new_tokens, "segments": args.segments,
                       "frontier_yields": args.frontier_yields, "batched": args.batched,
                       "server_devices": args.server_devices,
                       "concurrency": probe.as_dict() if probe is not None else None,
                       "prompts": args.prompts, "verify": args.verify, "results": results},
                      fh, indent=2)
    return 0


def _millions(lm: Any) -> str:
    """Parameter count in millions."""
    return f"{sum(p.numel() for p in lm.model.parameters()) / 1e6:.0f}"


def _run_config(engine: Any, prompts: list[tuple[int, ...]], args: argparse.Namespace,
                lookahead: int, sp_degree: int, tpot_ms: float, c: float, a: float,
                contention: Contention | None, verify_cost: float | None,
                batched_costs: BatchedCosts | None = None) -> dict[str, Any]:
    from ..base.randomness import Sampler
    from ..sim import expected_latency, required_servers

    times: dict[str, list[float]] = {"nonsi": [], "si": [], "dsi": []}
    tokens: dict[str, int] = dict.fromkeys(times, 0)
    overhead_us: list[float] = []
    forward_us: dict[str, list[float]] = {"target": [], "drafter": []}
    greedy = args.verify == "greedy"
    for i, prompt in enumerate(prompts):   # interleaved, so that drift hits all three alike
        seed = args.seed + i
        runs = {"nonsi": engine.autoregressive(prompt, args.new_tokens, Sampler(seed),
                                               greedy=greedy),
                "si": engine.speculative(prompt, args.new_tokens, Sampler(seed),
                                         lookahead=lookahead, verify=args.verify),
                "dsi": engine.dsi(prompt, args.new_tokens, Sampler(seed), lookahead=lookahead,
                                  sp_degree=sp_degree, verify=args.verify)}
        for name, run in runs.items():
            times[name].append(float(run.time))
            tokens[name] += len(run.tokens)
        dsi_stats = runs["dsi"].stats
        overhead_us.append(dsi_stats["orchestration_us"] / max(1, dsi_stats["events"]))
        forward_us["target"].append(dsi_stats["target_forward_us"])
        forward_us["drafter"].append(dsi_stats["drafter_forward_us"])
    per_token = {n: 1e3 * sum(times[n]) / tokens[n] for n in times}       # ms per token
    predicted = predictions(c, a, lookahead, args.new_tokens, sp_degree)
    measured_speedup = {"dsi/si": per_token["si"] / per_token["dsi"],
                        "dsi/nonsi": per_token["nonsi"] / per_token["dsi"],
                        "si/nonsi": per_token["nonsi"] / per_token["si"]}
    predicted_speedup = {"dsi/si": predicted["si"] / predicted["dsi"],
                         "dsi/nonsi": predicted["nonsi"] / predicted["dsi"],
                         "si/nonsi": predicted["nonsi"] / predicted["si"]}
    if "dsi_event" in predicted:
        predicted_speedup["dsi_event/si"] = predicted["si"] / predicted["dsi_event"]
        predicted_speedup["dsi_event/nonsi"] = predicted["nonsi"] / predicted["dsi_event"]
    required = required_servers(c, lookahead)
    print(f"\nlookahead {lookahead}, sp_degree {sp_degree} (paper model needs SP >= {required})")
    print(f"  ms/token measured: non-SI {per_token['nonsi']:.3f}, SI {per_token['si']:.3f}, "
          f"DSI {per_token['dsi']:.3f}; predicted (x target TPOT {tpot_ms:.3f} ms): "
          + ", ".join(f"{n} {predicted[n] / args.new_tokens * tpot_ms:.3f}"
                      for n in ("nonsi", "si", "dsi")))
    for name, value in measured_speedup.items():
        pred = predicted_speedup[name]
        print(f"  {name:10s} measured {value:6.3f}x   predicted {pred:6.3f}x   "
              f"measured/predicted {value / pred:5.3f}")
    for name in ("dsi_event/si", "dsi_event/nonsi"):
        if name in predicted_speedup:
            print(f"  {name:16s} predicted (event model, SP={sp_degree}) "
                  f"{predicted_speedup[name]:.3f}x")
    # the same prediction with the forward times DSI's own runs saw (servers sharing one GPU)
    contended_target_ms = statistics.fmean(forward_us["target"]) / 1e3
    contended_c = statistics.fmean(forward_us["drafter"]) / 1e3 / contended_target_ms
    contended = predictions(contended_c, a, lookahead, args.new_tokens, sp_degree)
    contended_ms = contended.get("dsi_event", contended["dsi"]) / args.new_tokens \
        * contended_target_ms
    print(f"  during DSI: target forward {contended_target_ms:.3f} ms (alone {tpot_ms:.3f}), "
          f"drafter forward {contended_c * contended_target_ms:.3f} ms (c = {contended_c:.3f}); "
          f"DSI predicted with these {contended_ms:.3f} ms/token, measured/that "
          f"{per_token['dsi'] / contended_ms:.3f} (time ratio)")
    shared: dict[str, float] | None = None
    if contention is not None:   # predicted from the standalone probe, not from the DSI runs
        shared_ms = float(expected_latency("dsi", c=c, a=a, lookahead=lookahead,
                                           n_tokens=args.new_tokens, model="event",
                                           sp_degree=sp_degree, contention=contention)
                          ) / args.new_tokens * tpot_ms
        si_ms = predicted["si"] / args.new_tokens * tpot_ms
        shared = {"predicted_ms_per_token": shared_ms,
                  "dsi/si": si_ms / shared_ms,
                  "dsi/nonsi": tpot_ms / shared_ms,
                  "measured/predicted dsi/si": measured_speedup["dsi/si"] / (si_ms / shared_ms),
                  "measured/predicted dsi/nonsi":
                      measured_speedup["dsi/nonsi"] / (tpot_ms / shared_ms)}
        print(f"  one shared device (event model with the measured contention): DSI predicted "
              f"{shared_ms:.3f} ms/token; dsi/si predicted {shared['dsi/si']:.3f}x "
              f"(measured/predicted {shared['measured/predicted dsi/si']:.3f}), dsi/nonsi "
              f"{shared['dsi/nonsi']:.3f}x ({shared['measured/predicted dsi/nonsi']:.3f})")
    batched = None
    if batched_costs is not None:   # the model of the batched loop, with this device's costs
        from ..sim.batched import predict

        p = predict(batched_costs, a, sp_degree, args.new_tokens, lookahead)
        batched = {"si_ms_per_token": p.si_ms, "dsi_ms_per_token": p.dsi_ms,
                   "dsi/si": p.dsi_over_si,
                   "measured/predicted dsi/si": measured_speedup["dsi/si"] / p.dsi_over_si}
        print(f"  batched servers (the event model with this device's batched-forward costs, "
              f"dsi_ref.sim.batched): SI {p.si_ms:.3f}, DSI {p.dsi_ms:.3f} ms/token predicted; "
              f"dsi/si predicted {p.dsi_over_si:.3f}x (measured/predicted "
              f"{batched['measured/predicted dsi/si']:.3f})")
    verify = None if verify_cost is None else _with_verify_cost(
        verify_cost, c, a, lookahead, args.new_tokens, sp_degree, tpot_ms, contention, per_token)
    print(f"  DSI orchestration overhead: {statistics.fmean(overhead_us):.1f} us/event "
          f"(committer thread time outside drafter forwards and waits)", flush=True)
    return {"lookahead": lookahead, "sp_degree": sp_degree, "ms_per_token": per_token,
            "times_s": times, "measured_speedup": measured_speedup,
            "predicted": predicted, "predicted_speedup": predicted_speedup,
            "orchestration_us_per_event": statistics.fmean(overhead_us),
            "paper_required_sp": required,
            "dsi_contended": {"target_forward_ms": contended_target_ms, "c": contended_c,
                              "predicted_ms_per_token": contended_ms},
            "shared_device": shared, "verify_cost": verify, "batched_model": batched}


def _with_verify_cost(v: float, c: float, a: float, lookahead: int, n: int, sp_degree: int,
                      tpot_ms: float, contention: Contention | None,
                      per_token: dict[str, float]) -> dict[str, Any]:
    """The predictions again with a verification forward costing ``v`` TPOTs (SI's verifications
    and DSI's verification tasks; non-SI and DSI's frontier tasks stay at one TPOT), on one
    shared device when the contention was measured, else with independent servers."""
    from ..sim import expected_latency

    def ms(algorithm: Algorithm, **extra: Any) -> float:
        return float(expected_latency(algorithm, c=c, a=a, lookahead=lookahead, n_tokens=n,
                                      verify_cost=v, **extra)) / n * tpot_ms

    predicted = {"nonsi": tpot_ms, "si": ms("si"),
                 "dsi_independent": ms("dsi", model="event", sp_degree=sp_degree)}
    predicted["dsi"] = predicted["dsi_independent"] if contention is None else \
        ms("dsi", model="event", sp_degree=sp_degree, contention=contention)
    out: dict[str, Any] = {"v": v, "setting": "independent servers" if contention is None
                           else "one shared device", "predicted_ms_per_token": predicted}
    for pair in ("dsi/si", "dsi/nonsi", "si/nonsi"):
        slow, fast = pair.split("/")
        out[pair] = predicted[fast] / predicted[slow]
        out[f"measured/predicted {pair}"] = per_token[fast] / per_token[slow] / out[pair]
    print(f"  with a verification forward of v = {v:.3f} TPOT ({out['setting']}): predicted "
          f"ms/token SI {predicted['si']:.3f}, DSI {predicted['dsi']:.3f}; dsi/si "
          f"{out['dsi/si']:.3f}x (measured/predicted {out['measured/predicted dsi/si']:.3f}), "
          f"dsi/nonsi {out['dsi/nonsi']:.3f}x ({out['measured/predicted dsi/nonsi']:.3f}), "
          f"si/nonsi {out['si/nonsi']:.3f}x ({out['measured/predicted si/nonsi']:.3f})")
    return out


def install(sub: Subparsers) -> None:
    """Add the ``bench`` sub-command."""
    p = sub.add_parser("bench", help="wall-clock non-SI vs SI vs DSI on torch models",
                       description="Measure TTFT/TPOT and acceptance of a random-weight "
                       "target/drafter pair, run non-SI, SI and DSI for real (threads, CUDA "
                       "streams and graphs on a GPU) and print measured speedups beside the "
                       "simulator's prediction. Needs the [torch] extra.")
    p.add_argument("--target", default="llama-1b",
                   help="target preset (default llama-1b) or a local Hugging Face checkpoint "
                   "directory")
    p.add_argument("--drafter", default="llama-68m",
                   help="drafter preset (default llama-68m) or a checkpoint directory")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32", "fp64"))
    p.add_argument("--lookahead", type=_csv_ints, default=[5], help="comma-separated, e.g. 3,5")
    p.add_argument("--sp-degree", type=_csv_ints, default=[4], help="comma-separated, e.g. 2,4")
    p.add_argument("--new-tokens", type=positive_int, default=128)
    p.add_argument("--prompts", type=positive_int, default=5)
    p.add_argument("--prompt-len", type=positive_int, default=64)
    p.add_argument("--verify", default="greedy",
                   choices=(*VERIFY_RULES, *(r for r in TREE_VERIFY_RULES
                                             if r not in VERIFY_RULES)),
                   help="the verification rule of SI and DSI (every rule the engine runs); the "
                   "prediction uses the measured token acceptance (greedy: the greedy one), "
                   "which is block verification's lower bound. With --tree: a tree rule")
    p.add_argument("--tree", type=_csv_ints, metavar="W,W,...",
                   help="tree speculation instead: children per node at each depth (e.g. 2,2,1; "
                   "EAGLE-like), run against the chain of the same depth and non-SI, reporting "
                   "tokens per target forward (dsi_ref.commands.bench_tree); --verify a tree "
                   "rule (rrs, rrs_without_replacement, eagle_topk, traversal, greedy)")
    p.add_argument("--segments", type=positive_int, default=4,
                   help="layer segments per target-server forward (preemption points; 1: none)")
    p.add_argument("--frontier-yields", action="store_true",
                   help="one-GPU policy: frontier forwards wait while a verification forward "
                   "runs (see Engine); off = the faithful DSI")
    p.add_argument("--batched", action="store_true",
                   help="target servers as the rows of one batched forward (one GPU)")
    p.add_argument("--server-devices", type=_csv_devices, metavar="DEV,DEV,...",
                   help="devices of the DSI target servers, server i on the i-th (cycling), "
                   "e.g. cuda:1,cuda:2,cuda:3 for one GPU per server (the paper's setting); "
                   "default: all on --device with the drafter")
    p.add_argument("--contention-forwards", type=nonnegative_int, default=50, metavar="N",
                   help="forwards per timing of the two extra inputs of the prediction: how "
                   "concurrent forwards slow each other down on one device (skipped when "
                   "--server-devices puts servers on other devices) and the cost of a "
                   "verification forward of k + 1 tokens (0: skip both)")
    p.add_argument("--backend", default="thread", choices=("thread", "ray"),
                   help="DSI's target servers as threads (default) or as Ray actors")
    p.add_argument("--ray-address", metavar="HOST:PORT",
                   help="with --backend ray: join the Ray cluster at this address (default: "
                   "start a private Ray in this process, even if a cluster runs here)")
    p.add_argument("--ray-join", action="store_true",
                   help="with --backend ray and no --ray-address: join the Ray cluster of this "
                   "machine instead (RAY_ADDRESS, else the latest `ray start`, else the one Ray "
                   "running here)")
    p.add_argument("--ray-gpus", type=float, default=0.0, metavar="G",
                   help="with --backend ray: GPUs per server actor (0.25: four share one GPU)")
    p.add_argument("--ray-ship", default="auto", choices=("auto", "spec", "pickle"),
                   help="with --backend ray: each actor builds the target from its spec "
                   "(preset, seed, dtype; or the checkpoint path: auto, spec) or gets a "
                   "pickled copy through the object store (pickle)")
    p.add_argument("--ray-replacements", type=nonnegative_int, default=None, metavar="N",
                   help="with --backend ray: lost server actors replaced at most (default: "
                   "SP; 0: none)")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write everything as JSON")
    p.add_argument("--table-row", metavar="PATH.csv",
                   help="also write the measured latencies and acceptance as a row for "
                   "`dsi-ref table --rows`")
    p.set_defaults(func=_bench)
