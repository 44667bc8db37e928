"""The paper's table: DSI vs SI vs non-SI for measured (target, drafter) pairs, in milliseconds.

A row gives TTFT/TPOT latencies (ms) of target and drafter, the acceptance rate and the SP
degree. Time unit inside: the target's TPOT, so ``c = drafter TPOT / target TPOT``, and a
model's first forward costs its TTFT (per server in the event model, as in the official online
simulator and in `dsi_ref.decoders.dsi`). Latencies are exact expectations (`expected_latency`),
converted
back to ms. Only the Phi-3-medium / Phi-3-mini / MBPP row of docs/paper.md has public inputs; users
add
rows from a TOML (``[[row]]`` tables) or CSV file with the fields of `TableRow`.
"""

from __future__ import annotations

import csv
import tomllib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, fields
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..base.errors import InvalidParameterError
from ..base.validate import check_int
from . import expected_latency

__all__ = ["PHI3_MBPP", "TableResult", "TableRow", "compute_row", "read_rows"]


def _exact(value: object, name: str) -> Fraction:
    """A measured number as an exact decimal (``100.2`` → ``501/5``): ties stay exact."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Fraction):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}")
    try:
        return Fraction(str(value)) if not isinstance(value, Fraction) else value
    except (ValueError, ZeroDivisionError):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}") from None


@dataclass(frozen=True)
class TableRow:
    """One (target, drafter, dataset) row.

    Args:
        name: a label, e.g. ``"Phi-3-medium / Phi-3-mini, MBPP"``.
        target_ttft_ms, target_tpot_ms, drafter_ttft_ms, drafter_tpot_ms: latencies (ms, > 0).
        acceptance_rate: ``a`` in ``[0, 1]``.
        sp_degree: target servers (``SP >= 1``).
        lookahead: the lookahead the source reports, if any (marked in the output).
    """

    name: str
    target_ttft_ms: Fraction
    target_tpot_ms: Fraction
    drafter_ttft_ms: Fraction
    drafter_tpot_ms: Fraction
    acceptance_rate: Fraction
    sp_degree: int = 7
    lookahead: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParameterError(f"a row's name must be a non-empty string, got "
                                        f"{self.name!r}")
        for f in fields(self):
            if f.name.endswith("_ms") or f.name == "acceptance_rate":
                value = _exact(getattr(self, f.name), f"{self.name}: {f.name}")
                object.__setattr__(self, f.name, value)
                if f.name.endswith("_ms") and not value > 0:
                    raise InvalidParameterError(f"{self.name}: {f.name} must be > 0 ms")
        if not 0 <= self.acceptance_rate <= 1:
            raise InvalidParameterError(f"{self.name}: acceptance_rate must lie in [0, 1]")
        for name in ("sp_degree", "lookahead"):
            value = getattr(self, name)
            if value is None and name == "lookahead":
                continue
            check_int(f"{self.name}: {name}", value)

    @property
    def units(self) -> dict[str, Fraction]:
        """``c``, ``target_first``, ``drafter_first`` in units of the target's TPOT."""
        tpot = self.target_tpot_ms
        return {"c": self.drafter_tpot_ms / tpot, "target_first": self.target_ttft_ms / tpot,
                "drafter_first": self.drafter_ttft_ms / tpot}


#: The one row of the paper's table whose inputs are public (docs/paper.md).
PHI3_MBPP = TableRow("Phi-3-medium / Phi-3-mini, MBPP", target_ttft_ms=Fraction("180.3"),
                     target_tpot_ms=Fraction("100.2"), drafter_ttft_ms=Fraction("57.3"),
                     drafter_tpot_ms=Fraction("3.3"), acceptance_rate=Fraction("0.94"),
                     sp_degree=7, lookahead=5)


def _int_field(value: object, where: str) -> int:
    """An int field of a rows file: an int (TOML) or the text of one (CSV); ``2.7``, ``"2.7"``,
    ``2.0`` and ``true`` are refused, never truncated."""
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise InvalidParameterError(f"{where} must be an int, got {value!r}") from None
    return check_int(where, value)


def read_rows(path: Path) -> list[TableRow]:
    """Rows from a TOML file (``[[row]]`` tables) or a CSV file (a header with the field names
    of `TableRow`; ``sp_degree`` and ``lookahead`` optional).

    A file with no row, an unknown or missing field, a malformed file and a non-integer
    ``sp_degree`` or ``lookahead`` (``2.7`` is not truncated to 2) raise
    `InvalidParameterError` naming the file and the row; a file that cannot be read raises
    `OSError`.
    """
    path = Path(path)
    try:
        if path.suffix == ".toml":
            with path.open("rb") as fh:
                raw = tomllib.load(fh).get("row")
            if not isinstance(raw, list) or not raw or not all(isinstance(r, dict) for r in raw):
                raise InvalidParameterError(f"{path}: expected one or more [[row]] tables")
            records: list[dict[str, Any]] = raw
        elif path.suffix == ".csv":
            with path.open(newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                records = [{k: v for k, v in r.items() if v not in ("", None)}
                           for r in reader]
            if None in {k for r in records for k in r}:
                raise InvalidParameterError(f"{path}: a row has more values than the header "
                                            "has fields")
        else:
            raise InvalidParameterError(f"{path}: rows must be a .toml or .csv file")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, csv.Error) as error:
        raise InvalidParameterError(f"{path}: not a valid {path.suffix[1:].upper()} file: "
                                    f"{error}") from None
    if not records:
        raise InvalidParameterError(f"{path}: no rows (a CSV needs a header line and one line "
                                    "per row)")
    known = {f.name for f in fields(TableRow)}
    rows = []
    for i, record in enumerate(records, 1):
        unknown = set(record) - known
        missing = {f.name for f in fields(TableRow)
                   if f.name not in ("sp_degree", "lookahead")} - set(record)
        if unknown or missing:
            raise InvalidParameterError(f"{path}: row {i}: unknown fields {sorted(unknown)}, "
                                        f"missing fields {sorted(missing)}")
        for name in ("sp_degree", "lookahead"):
            if name in record:
                record[name] = _int_field(record[name], f"{path}: row {i}: {name}")
        rows.append(TableRow(**record))
    return rows


@dataclass
class TableResult:
    """Expected latencies (ms) of one row, per lookahead and SP degree."""

    row: TableRow
    n_tokens: int
    lookaheads: list[int]
    sp_degrees: list[int]
    nonsi_ms: float
    si_ms: dict[int, float] = field(default_factory=dict)
    dsi_ms: dict[tuple[int, int], float] = field(default_factory=dict)   # event model
    paper_dsi_ms: dict[int, float] = field(default_factory=dict)

    def speedup(self, over: str, lookahead: int, sp_degree: int) -> float:
        """Event-model DSI speedup over ``"si"`` (same ``k`` = ``lookahead``) or ``"nonsi"``."""
        base = self.si_ms[lookahead] if over == "si" else self.nonsi_ms
        return base / self.dsi_ms[(lookahead, sp_degree)]

    def paper_speedup(self, over: str, lookahead: int) -> float:
        """Paper-model DSI speedup over ``"si"`` (same ``k`` = ``lookahead``) or ``"nonsi"``."""
        base = self.si_ms[lookahead] if over == "si" else self.nonsi_ms
        return base / self.paper_dsi_ms[lookahead]

    def best(self, sp_degree: int) -> dict[str, float | int]:
        """Each algorithm at its own best lookahead, event model with ``SP`` = ``sp_degree``
        servers."""
        si = min(self.lookaheads, key=lambda lookahead: self.si_ms[lookahead])
        dsi = min(self.lookaheads, key=lambda lookahead: self.dsi_ms[(lookahead, sp_degree)])
        return {"si_lookahead": si, "dsi_lookahead": dsi,
                "dsi_vs_si": self.si_ms[si] / self.dsi_ms[(dsi, sp_degree)],
                "dsi_vs_nonsi": self.nonsi_ms / self.dsi_ms[(dsi, sp_degree)]}

    def csv_rows(self) -> Iterator[list[object]]:
        """One CSV row per (lookahead, SP)."""
        for lookahead in self.lookaheads:
            for sp_degree in self.sp_degrees:
                pair = (lookahead, sp_degree)
                yield [self.row.name, self.n_tokens, lookahead, sp_degree, self.nonsi_ms,
                       self.si_ms[lookahead], self.dsi_ms[pair], self.paper_dsi_ms[lookahead],
                       self.speedup("si", *pair), self.speedup("nonsi", *pair),
                       self.paper_speedup("si", lookahead)]

    CSV_HEADER = ("row", "n_tokens", "lookahead", "sp_degree", "nonsi_ms", "si_ms",
                  "dsi_event_ms", "dsi_paper_ms", "dsi_vs_si", "dsi_vs_nonsi",
                  "paper_dsi_vs_si")


def _event_ms(args: tuple[dict[str, Any], int, int, float]) -> float:
    common, lookahead, sp_degree, tpot = args
    return tpot * float(expected_latency("dsi", lookahead=lookahead, model="event",
                                         sp_degree=sp_degree, **common))


def compute_row(row: TableRow, *, n_tokens: int, lookaheads: Sequence[int],
                sp_degrees: Sequence[int], jobs: int = 1,
                progress: Callable[[Iterator[Any], int], Iterator[Any]] | None = None
                ) -> TableResult:
    """Exact expected latencies (ms) of non-SI, SI, paper-model DSI and event-model DSI
    (the event model in ``jobs`` processes, one task per (lookahead, SP))."""
    if not isinstance(row, TableRow):
        raise InvalidParameterError(f"row must be a TableRow, got {row!r}")
    jobs = check_int("jobs", jobs)
    for name, given in (("lookaheads", lookaheads), ("sp_degrees", sp_degrees)):
        if not given:
            raise InvalidParameterError(f"{name} must not be empty")
        for item in given:
            check_int(f"each of {name}", item)
    u, a, tpot = row.units, row.acceptance_rate, float(row.target_tpot_ms)
    common: dict[str, Any] = {"c": u["c"], "a": a, "n_tokens": n_tokens,
                              "target_first": u["target_first"],
                              "drafter_first": u["drafter_first"]}
    result = TableResult(row, n_tokens, list(lookaheads), list(sp_degrees),
                         nonsi_ms=tpot * float(expected_latency("nonsi", **common)))
    pairs = [(lookahead, sp_degree) for lookahead in lookaheads for sp_degree in sp_degrees]
    for lookahead in lookaheads:
        result.si_ms[lookahead] = tpot * float(expected_latency("si", lookahead=lookahead,
                                                                **common))
        result.paper_dsi_ms[lookahead] = tpot * float(expected_latency("dsi", lookahead=lookahead,
                                                                       **common))
    tasks = [(common, lookahead, sp_degree, tpot) for lookahead, sp_degree in pairs]
    with ProcessPoolExecutor(jobs) if jobs > 1 else nullcontext() as pool:
        values: Iterator[float] = (pool.map(_event_ms, tasks) if pool is not None
                                   else map(_event_ms, tasks))
        if progress is not None:
            values = progress(values, len(tasks))
        for pair, value in zip(pairs, values, strict=True):
            result.dsi_ms[pair] = value
    return result
