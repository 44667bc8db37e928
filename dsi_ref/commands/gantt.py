"""Timelines: a run's trace as a Gantt chart, non-SI, SI and DSI side by side.

Every decoder records a trace of `dsi_ref.base.result.Event` spans on the virtual clock. Here they
become
rows — the drafter, then each target server (``target`` for non-SI and SI, ``target-<i>`` for DSI
server ``i``), a ``queue`` row for verification tasks preempted before they got a server — and a
mark per commit. Span kinds and their colours (`KIND_STYLE`):

* ``draft`` — a drafter forward;
* ``verify`` — a target forward over drafts whose result was used (verified);
* ``forward`` — a target forward with no drafts (non-SI, DSI's frontier task);
* ``preempted`` — a forward (or a queued task) cut short because it was built on a rejected
  draft, or made stale by the frontier moving;
* ``wait`` — a task waiting for a free server (drawn thin, under the row).

`compare_runs` runs the three decoders on the same model, prompt and seed; `plot_timelines`
draws them (matplotlib, the ``[plot]`` extra, imported lazily); `timeline_text` gives the same
information as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..base.errors import InvalidParameterError
from ..base.latency import Latency
from ..base.models import LanguageModel
from ..base.randomness import Sampler
from ..base.result import Event, Run
from ..decoders.autoregressive import autoregressive
from ..decoders.dsi import QueuePolicy, dsi
from ..decoders.speculative import speculative
from ..decoders.verification import VerifyRule
from .args import check_figure_format

__all__ = ["KIND_STYLE", "compare_runs", "plot_timelines", "timeline_rows", "timeline_text"]

#: colour and legend label of each span kind
KIND_STYLE: dict[str, tuple[str, str]] = {
    "draft": ("#7fb3e6", "draft (drafter forward)"),
    "verify": ("#2e9e4f", "verified (target forward over drafts)"),
    "forward": ("#1f5f3a", "target forward, no drafts (non-SI / frontier task)"),
    "preempted": ("#d62728", "preempted"),
    "wait": ("#f2c14e", "waiting for a server"),
}


def timeline_rows(run: Run) -> list[str]:
    """The rows of a run's chart, top to bottom: the drafter, the target server(s), the queue
    (only when a queued task was preempted), the committer."""
    resources = {e.resource for e in run.trace}
    rows = ["drafter"] if "drafter" in resources else []
    targets = sorted((r for r in resources if r == "target" or r.startswith("target-")),
                     key=lambda r: (len(r), r))
    rows += targets
    if "queue" in resources:
        rows.append("queue")
    return [*rows, "committer"]


def _fmt_time(t: Fraction | float) -> str:
    return str(t) if isinstance(t, Fraction) else f"{t:.4g}"


def timeline_text(run: Run, title: str = "") -> str:
    """The trace as text, one line per span, grouped by row; commits list the token committed."""
    lines = [f"{title}: tokens {run.tokens}, time {_fmt_time(run.time)}" if title
             else f"tokens {run.tokens}, time {_fmt_time(run.time)}"]
    for row in timeline_rows(run):
        lines.append(f"  {row}:")
        for e in (e for e in run.trace if e.resource == row):
            where = ",".join(map(str, e.positions))
            if e.kind == "commit":
                token = run.tokens[e.positions[0]] if e.positions[0] < len(run.tokens) else "?"
                lines.append(f"    t={_fmt_time(e.start)}  commit position {where} = {token}"
                             f"  ({e.note})")
            else:
                lines.append(f"    [{_fmt_time(e.start)}, {_fmt_time(e.end)})  {e.kind:<9} "
                             f"positions {where}" + (f"  {e.note}" if e.note else ""))
    return "\n".join(lines)


def compare_runs(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                 max_new_tokens: int, seed: int, *, lookahead: int = 2, sp_degree: int = 3,
                 latency: Latency | None = None, verify: VerifyRule = "rejection",
                 queue: QueuePolicy = "fifo") -> dict[str, Run]:
    """Non-SI, SI and DSI on the same model, prompt, budget, latencies and `Sampler` seed."""
    latency = latency or Latency()
    return {
        "non-SI": autoregressive(target, prompt, max_new_tokens, Sampler(seed), latency=latency,
                                 greedy=verify == "greedy"),
        "SI": speculative(target, drafter, prompt, max_new_tokens, Sampler(seed), lookahead,
                          verify, latency=latency),
        "DSI": dsi(target, drafter, prompt, max_new_tokens, Sampler(seed), lookahead,
                   sp_degree, latency, verify, queue),
    }


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - depends on the environment
        raise InvalidParameterError("timelines need matplotlib: pip install 'dsi-ref[plot]'"
                                    ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_timelines(runs: Mapping[str, Run], path: Path | str, *, title: str = "") -> Path:
    """One Gantt panel per run (stacked, same time axis): a row per resource, spans coloured by
    kind (`KIND_STYLE`), commits marked with the committed token. Writes a PNG (or a PDF or an
    SVG, by the suffix of ``path``: `dsi_ref.commands.args.FIGURE_SUFFIXES`); returns its path.

    Raises:
        InvalidParameterError: no run, or ``path`` has another suffix.
    """
    if not runs:
        raise InvalidParameterError("plot_timelines needs at least one run")
    check_figure_format(path)
    plt = _pyplot()
    from matplotlib.patches import Patch

    path = Path(path)
    heights = [len(timeline_rows(r)) + 1 for r in runs.values()]
    fig, axes = plt.subplots(len(runs), 1, sharex=True, squeeze=False,
                             figsize=(11, 0.45 * sum(heights) + 1.6),
                             gridspec_kw={"height_ratios": heights})
    horizon = float(max(r.time for r in runs.values())) or 1.0
    for ax, (name, run) in zip(axes[:, 0], runs.items(), strict=True):
        rows = timeline_rows(run)
        y = {row: len(rows) - 1 - i for i, row in enumerate(rows)}
        for e in run.trace:
            if e.kind == "commit" or e.resource not in y:
                continue
            _draw_span(ax, e, y[e.resource])
        commits: dict[float, list[str]] = {}  # several positions may commit at one instant
        for e in run.trace:
            if e.kind == "commit":
                token = run.tokens[e.positions[0]] if e.positions[0] < len(run.tokens) else "?"
                commits.setdefault(float(e.start), []).append(str(token))
        for when, tokens in commits.items():
            ax.plot([when], [y["committer"]], marker="v", color="black", markersize=7)
            ax.annotate(",".join(tokens), (when, y["committer"]), textcoords="offset points",
                        xytext=(0, 6), ha="center", fontsize=7)
        ax.set_yticks(list(y.values()), list(y.keys()), fontsize=8)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_title(f"{name}: {len(run.tokens)} tokens in {float(run.time):.3g} target "
                     f"forwards", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlim(0, horizon * 1.02)
    axes[-1, 0].set_xlabel("virtual time (target forwards)")
    handles = [Patch(color=colour, label=label) for colour, label in KIND_STYLE.values()]
    handles.append(plt.Line2D([], [], marker="v", color="black", linestyle="",
                              label="commit (tokens above)"))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.09, 1, 0.97 if title else 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _draw_span(ax: Any, e: Event, y: float) -> None:
    colour = KIND_STYLE.get(e.kind, ("#999999", e.kind))[0]
    start, width = float(e.start), float(e.end) - float(e.start)
    if e.kind == "wait":  # thin, under the row: the server is busy with another task meanwhile
        ax.broken_barh([(start, width)], (y - 0.42, 0.14), facecolors=colour)
        return
    hatch = "//" if e.kind == "preempted" else None
    ax.broken_barh([(start, width)], (y - 0.25, 0.5), facecolors=colour, edgecolors="white",
                   linewidth=0.5, hatch=hatch)
    if e.positions and width > 0:
        label = (str(e.positions[0]) if len(e.positions) == 1
                 else f"{e.positions[0]}-{e.positions[-1]}")
        ax.text(start + width / 2, y, label, ha="center", va="center", fontsize=6,
                color="white")
