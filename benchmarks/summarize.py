"""Markdown tables from ``dsi-ref bench --json`` files: measured vs predicted, per configuration.

Usage: ``python benchmarks/summarize.py docs/gpu-results/bench-*.json``.
"""

from __future__ import annotations

import json
import sys


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


if __name__ == "__main__":
    print("\n\n".join(table(p) for p in sys.argv[1:]))
