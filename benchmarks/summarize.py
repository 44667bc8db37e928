"""Markdown tables from ``dsi-ref bench --json`` files: measured vs predicted, per configuration.

Usage: ``python benchmarks/summarize.py docs/gpu-results/bench-*.json`` (one table per file), and
``python benchmarks/summarize.py --shared docs/gpu-results/probe.log FILE...``: the measured DSI
beside the event model's prediction for one *shared* device (`dsi_ref.Contention`), with the
slowdowns taken from the file's own ``concurrency`` probe or, for files written before the bench
measured it, from the length-1 block of a ``benchmarks/concurrency_probe.py`` log of the same
target model. Nothing here looks at the DSI runs' own forward times.

``python benchmarks/summarize.py --verify FILE...``: the same with the file's measured cost ``v``
of a verification forward (``k + 1`` tokens, in TPOTs; `dsi_ref.expected_latency`'s
``verify_cost``), for SI and DSI alike: every input of the prediction measured, none taken from
the runs being predicted. Predictions are recomputed here from the file's measured inputs.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import dsi_ref as dr


def table(path: str) -> str:
    """One markdown table for one bench JSON file."""
    with open(path) as fh:
        data = json.load(fh)
    pair = data["pair"]
    a = pair["acceptance"] if data["verify"] == "greedy" else pair["sampling_acceptance"]
    c = pair["drafter_tpot_ms"] / pair["target_tpot_ms"]
    lines = [f"**{pair['name']}**, verify={data['verify']}, {data['device']}; "
             f"target TPOT {pair['target_tpot_ms']:.2f} ms, drafter TPOT "
             f"{pair['drafter_tpot_ms']:.3f} ms (c = {c:.3f}), a = {a:.3f}, "
             f"{data['prompts']} prompts x {data['new_tokens']} tokens", "",
             "| k | SP | ms/token non-SI / SI / DSI | DSI/SI measured (paper, event pred.) "
             "| DSI/non-SI measured (paper, event pred.) | target fwd in DSI (ms) "
             "| DSI / contended pred. | overhead us/event |",
             "|---|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        ms, m, p = r["ms_per_token"], r["measured_speedup"], r["predicted_speedup"]
        cont = r["dsi_contended"]
        lines.append(
            f"| {r['lookahead']} | {r['sp_degree']} | {ms['nonsi']:.2f} / {ms['si']:.2f} / "
            f"{ms['dsi']:.2f} | {m['dsi/si']:.2f} ({p['dsi/si']:.2f}, "
            f"{p.get('dsi_event/si', float('nan')):.2f}) | {m['dsi/nonsi']:.2f} "
            f"({p['dsi/nonsi']:.2f}, {p.get('dsi_event/nonsi', float('nan')):.2f}) | "
            f"{cont['target_forward_ms']:.2f} | "
            f"{ms['dsi'] / cont['predicted_ms_per_token']:.2f} | "
            f"{r['orchestration_us_per_event']:.0f} |")
    return "\n".join(lines)


def probe_contention(log: str, model: str) -> dr.Contention | None:
    """The slowdowns in the first (length-1) block of a concurrency-probe log of ``model``."""
    target: dict[int, float] = {}
    drafter: dict[int, float] = {}
    for line in log.splitlines():
        hit = re.match(rf"{re.escape(model)} length 1: (\d+) concurrent sessions: ([\d.]+) ms",
                       line)
        if hit:
            target[int(hit[1])] = float(hit[2])
            continue
        hit = re.match(r"drafter \S+ forward with (\d+) busy target sessions: ([\d.]+) ms", line)
        if hit and target and int(hit[1]) not in drafter:
            drafter[int(hit[1])] = float(hit[2])
        elif hit is None and drafter:
            break                               # the end of the first block
    if not target or 1 not in target or 0 not in drafter:
        return None
    return dr.Contention.from_times([target[m] for m in sorted(target)],
                                    [drafter[m] for m in sorted(drafter)])


def shared_rows(path: str, probe_log: str | None) -> tuple[str, list[dict[str, Any]]]:
    """Measured DSI against the shared-device prediction, one row per configuration."""
    with open(path) as fh:
        data = json.load(fh)
    pair = data["pair"]
    model = pair["name"].split("/")[0]
    if data.get("server_devices"):
        return f"{path}: servers on devices of their own, nothing shared to predict", []
    if data.get("concurrency"):
        probe = data["concurrency"]
        contention = dr.Contention.from_times(probe["target_ms"], probe["drafter_ms"])
        source = "the file's own probe"
    else:
        contention = probe_contention(probe_log, model) if probe_log else None
        source = "the probe log"
    if contention is None:
        return f"{path}: no contention measured for {model}", []
    a = pair["acceptance"] if data["verify"] == "greedy" else pair["sampling_acceptance"]
    c = pair["drafter_tpot_ms"] / pair["target_tpot_ms"]
    n, tpot = data["new_tokens"], pair["target_tpot_ms"]
    rows = []
    for r in data["results"]:
        lookahead, sp_degree = r["lookahead"], r["sp_degree"]
        dsi = float(dr.expected_latency("dsi", c=c, a=a, lookahead=lookahead, n_tokens=n,
                                        model="event", sp_degree=sp_degree,
                                        contention=contention))
        si = float(dr.expected_latency("si", c=c, a=a, lookahead=lookahead, n_tokens=n))
        ms = r["ms_per_token"]
        rows.append({"lookahead": lookahead, "sp_degree": sp_degree, "dsi_ms": ms["dsi"],
                     "pred_dsi_ms": dsi / n * tpot,
                     "dsi/si": r["measured_speedup"]["dsi/si"], "pred dsi/si": si / dsi,
                     "dsi/nonsi": r["measured_speedup"]["dsi/nonsi"],
                     "pred dsi/nonsi": n / dsi,
                     "indep dsi/si": r["predicted_speedup"].get("dsi_event/si", float("nan"))})
    head = (f"**{pair['name']}**, verify={data['verify']}, {data['device']}: contention "
            f"from {source}: target x" + ", x".join(f"{s:.2f}" for s in contention.target)
            + " with 1.. forwards running; drafter x"
            + ", x".join(f"{s:.2f}" for s in contention.drafter) + " beside 0.. of them")
    return head, rows


def shared_table(path: str, probe_log: str | None) -> str:
    """`shared_rows` as a markdown table."""
    head, rows = shared_rows(path, probe_log)
    if not rows:
        return head
    lines = [head, "", "| k | SP | DSI ms/token measured / shared pred. | DSI/SI measured "
             "(shared pred.; independent servers) | measured / shared pred. | DSI/non-SI "
             "measured (shared pred.) | measured / shared pred. |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['lookahead']} | {r['sp_degree']} | {r['dsi_ms']:.2f} / {r['pred_dsi_ms']:.2f} | "
            f"{r['dsi/si']:.2f} ({r['pred dsi/si']:.2f}; {r['indep dsi/si']:.2f}) | "
            f"{r['dsi/si'] / r['pred dsi/si']:.2f} | {r['dsi/nonsi']:.2f} "
            f"({r['pred dsi/nonsi']:.2f}) | {r['dsi/nonsi'] / r['pred dsi/nonsi']:.2f} |")
    return "\n".join(lines)


def verify_rows(path: str) -> tuple[str, list[dict[str, Any]]]:
    """Measured non-SI, SI and DSI against the prediction with the measured contention (one
    shared device; independent servers when the file has no probe) and verification cost."""
    with open(path) as fh:
        data = json.load(fh)
    pair = data["pair"]
    if not data["results"] or data["results"][0].get("verify_cost") is None:
        return f"{path}: no verification cost measured (a bench from before it did)", []
    probe = data.get("concurrency")
    contention = dr.Contention.from_times(probe["target_ms"], probe["drafter_ms"]) \
        if probe else None
    a = pair["acceptance"] if data["verify"] == "greedy" else pair["sampling_acceptance"]
    tpot = pair["target_tpot_ms"]
    c, n = pair["drafter_tpot_ms"] / tpot, data["new_tokens"]
    rows = []
    for r in data["results"]:
        lookahead, sp_degree, v = r["lookahead"], r["sp_degree"], r["verify_cost"]["v"]
        si = float(dr.expected_latency("si", c=c, a=a, lookahead=lookahead, n_tokens=n,
                                       verify_cost=v))
        dsi = float(dr.expected_latency("dsi", c=c, a=a, lookahead=lookahead, n_tokens=n,
                                        model="event", sp_degree=sp_degree,
                                        contention=contention, verify_cost=v))
        ms = r["ms_per_token"]
        rows.append({"lookahead": lookahead, "sp_degree": sp_degree, "v": v, "ms": ms,
                     "pred_si_ms": si / n * tpot,
                     "pred_dsi_ms": dsi / n * tpot,
                     "dsi/si": ms["si"] / ms["dsi"], "pred dsi/si": si / dsi,
                     "dsi/nonsi": ms["nonsi"] / ms["dsi"], "pred dsi/nonsi": n / dsi,
                     "si/nonsi": ms["nonsi"] / ms["si"], "pred si/nonsi": n / si})
    where = "one shared device" if contention is not None else "independent servers"
    head = (f"**{pair['name']}**, verify={data['verify']}, {data['device']}, {where}: "
            f"target TPOT {tpot:.2f} ms, c = {c:.3f}, a = {a:.3f}, {data['prompts']} prompts "
            f"x {n} tokens"
            + ("" if contention is None else "; target x" + ", x".join(
                f"{s:.2f}" for s in contention.target) + " with 1.. forwards running")
            + ("; --frontier-yields" if data.get("frontier_yields") else ""))
    return head, rows


def verify_table(path: str) -> str:
    """`verify_rows` as a markdown table."""
    head, rows = verify_rows(path)
    if not rows:
        return head
    lines = [head, "", "| k | SP | v | ms/token non-SI / SI / DSI measured | SI / DSI pred. "
             "| DSI/SI measured (pred.) | meas./pred. | DSI/non-SI measured (pred.) "
             "| meas./pred. | SI/non-SI meas./pred. |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ms = r["ms"]
        lines.append(
            f"| {r['lookahead']} | {r['sp_degree']} | {r['v']:.2f} | "
            f"{ms['nonsi']:.2f} / {ms['si']:.2f} / "
            f"{ms['dsi']:.2f} | {r['pred_si_ms']:.2f} / {r['pred_dsi_ms']:.2f} | "
            f"{r['dsi/si']:.2f} ({r['pred dsi/si']:.2f}) | "
            f"{r['dsi/si'] / r['pred dsi/si']:.2f} | {r['dsi/nonsi']:.2f} "
            f"({r['pred dsi/nonsi']:.2f}) | {r['dsi/nonsi'] / r['pred dsi/nonsi']:.2f} | "
            f"{r['si/nonsi'] / r['pred si/nonsi']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+", help="dsi-ref bench --json files")
    parser.add_argument("--shared", metavar="PROBE_LOG", nargs="?", const="",
                        help="the shared-device comparison (a probe log for older files)")
    parser.add_argument("--verify", action="store_true",
                        help="the prediction with the measured verification cost and contention")
    args = parser.parse_args()
    if args.verify:
        print("\n\n".join(verify_table(p) for p in args.files))
        return
    if args.shared is None:
        print("\n\n".join(table(p) for p in args.files))
        return
    log = Path(args.shared).read_text() if args.shared and Path(args.shared).is_file() else None
    print("\n\n".join(shared_table(p, log) for p in args.files))


if __name__ == "__main__":
    main()
