"""Sections of the ``dsi-ref audit`` report: each runs a family of checks and returns a table.

A section is registered in `SECTIONS` as a `SectionSpec`; later work adds sections (DSI, the zoo
of wrong decoders, the theorems) without touching the CLI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tqdm import tqdm

from .audit import check_lossless
from .registry import DECODERS
from .suite import default_suite

__all__ = ["SECTIONS", "Section", "SectionSpec", "progress_bar", "render_section"]

T = TypeVar("T")


@dataclass
class Section:
    """The result of one section: a table, a verdict and the time it took."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    ok: bool = True
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {"name": self.name, "title": self.title, "ok": self.ok, "seconds": self.seconds,
                "notes": self.notes, "rows": [dict(zip(self.columns, r, strict=True))
                                              for r in self.rows]}


@dataclass(frozen=True)
class SectionSpec:
    """A named section and the function that computes it."""

    name: str
    run: Callable[..., Section]


def progress_bar(items: Iterable[T], *, total: int, desc: str, enabled: bool) -> Iterator[T]:
    """A tqdm progress bar on stderr (or the bare iterable when disabled)."""
    if not enabled:
        yield from items
        return
    yield from tqdm(items, total=total, desc=desc, leave=False, unit="check")


def render_section(section: Section) -> str:
    """A plain-text table with a title line and notes."""
    cells = [tuple(str(c) for c in section.columns)] + [tuple(_fmt(c) for c in r)
                                                         for r in section.rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(section.columns))]
    line = "  ".join("-" * w for w in widths)
    out = [f"\n== {section.title} ({'PASS' if section.ok else 'FAIL'}, "
           f"{section.seconds:.1f} s) =="]
    out.append("  ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)))
    out.append(line)
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells[1:]]
    out += [f"note: {n}" for n in section.notes]
    return "\n".join(out)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.3e}"
    return str(value)


def decoders_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Exact audit of every registered decoder × variant × suite model × lookahead."""
    section = Section("decoders", "Exact losslessness of every registered decoder",
                      ("decoder", "rule", "model", "params", "outcomes", "TV", "verdict", "s"))
    lookaheads = (2,) if quick else (1, 2, 3)
    jobs = []
    for spec in DECODERS.values():
        for variant in spec.variants:
            for pair in default_suite():
                for params in _param_grid(spec.params, lookaheads):
                    jobs.append((spec, variant, pair, params))
    start = time.perf_counter()
    for spec, variant, pair, params in progress_bar(jobs, total=len(jobs), desc="decoders",
                                                   enabled=progress):
        t0 = time.perf_counter()
        program = spec.program(pair.target, pair.drafter, pair.prompt, pair.max_new_tokens,
                               variant, **params)
        report = check_lossless(program, pair.target, pair.prompt, pair.max_new_tokens,
                                greedy=variant.greedy)
        section.ok &= report.equal
        section.rows.append((spec.name, variant.label, pair.name,
                             " ".join(f"{k}={v}" for k, v in params.items()) or "-",
                             report.outcomes, str(report.tv_distance),
                             "lossless" if report.equal else "LOSSY",
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    return section


def _param_grid(names: tuple[str, ...], lookaheads: tuple[int, ...]) -> list[dict[str, int]]:
    if "lookahead" in names:
        return [{"lookahead": k} for k in lookaheads]
    return [{}]


#: The sections of ``dsi-ref audit``, in order.
SECTIONS: list[SectionSpec] = [
    SectionSpec("decoders", decoders_section),
]
