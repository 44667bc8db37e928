"""Concrete DSI instances: what a claim is checked on, and what a lossy claim's witness is.

An `Instance` is plain data (rows as `Fraction`s, latency laws as ``{cost: probability}``), so a
witness prints as Python that rebuilds it, and the check of a claim on it is exact. The scheduler
classes are checked exactly as `dsi_ref.audit.schedulers` states them; on an instance:

* ``oblivious`` and ``random``: the instance's latency laws (``oblivious`` needs them constant),
  ties at equal times broken by the instance's tie rule: for oblivious ``"first"``, ``"last"`` or
  ``"every"`` (every rank table the runs reach, `oblivious_schedules`: the whole class), for
  random ``"first"``, ``"last"`` or ``"uniform"`` (each one of its schedulers);
* ``adaptive``: every resolution of every tie and queue choice, under the instance's latency laws;
* ``content-aware``: as adaptive, with drafts sampled when their forward starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from ..audit.exact import Witness, exact_distribution
from ..audit.laws import compare_laws, target_distribution
from ..audit.schedulers import TIE_RULES as CLASS_TIE_RULES
from ..audit.schedulers import SchedulerClass, oblivious_schedules, tie_rule_law
from ..base.errors import InvalidParameterError, ScheduleDependenceError
from ..base.latency import Latency
from ..base.models import TableLM
from ..decoders.dsi import dsi

__all__ = ["CLASS_RULES", "EVERY_TIE_LIMIT", "TIE_RULES", "Finding", "Instance", "TieRule",
           "check_instance"]

TieRule = Literal["first", "last", "uniform", "every"]
#: The tie rules an instance can name: the ``random`` class's (`dsi_ref.audit.schedulers.TIE_RULES`)
#: and ``"every"``, every oblivious rank table the runs reach.
TIE_RULES: tuple[TieRule, ...] = (*CLASS_TIE_RULES, "every")
#: The tie rules of each class that fixes its ties: its schedulers, or (``"every"``) all of them.
CLASS_RULES: dict[str, tuple[TieRule, ...]] = {"oblivious": ("first", "last", "every"),
                                               "random": CLASS_TIE_RULES}
#: The most oblivious schedules the ``"every"`` tie rule enumerates on one instance.
EVERY_TIE_LIMIT = 256

Rows = tuple[tuple[tuple[int, ...], tuple[Fraction, ...]], ...]
Law = tuple[tuple[Fraction, Fraction], ...]


def _law(law: Law) -> Fraction | dict[Fraction, Fraction]:
    return law[0][0] if len(law) == 1 else dict(law)


def _law_text(law: Law) -> str:
    if len(law) == 1:
        return str(law[0][0])
    return "{" + ", ".join(f"{v}: {p}" for v, p in law) + "}"


def _rows_text(rows: Rows) -> str:
    return "{" + ", ".join(f"{key}: ({', '.join(str(p) for p in row)})"
                           for key, row in rows) + "}"


@dataclass(frozen=True)
class Instance:
    """One DSI instance: a pair of n-gram models, the budget, DSI's parameters and the
    latency laws, and the tie rule of the classes that fix their ties.

    Attributes:
        vocab_size, context, eos: the models' vocabulary, n-gram context (0: context-free) and
            EOS token (``None``: none); both models share them.
        target_rows, drafter_rows: ``(context, row)`` pairs, rows of exact probabilities.
        max_new_tokens, lookahead, sp_degree: ``N``, ``k`` and ``SP``.
        drafter_latency, target_latency: ``(cost, probability)`` pairs (one pair: constant).
        verify, block_windows, queue: DSI's verification rule, block rule and queue policy.
        tie_rule: ``"first"``, ``"last"``, ``"uniform"`` (the random class) or ``"every"``
            (every oblivious rank table: the oblivious class on the instance).
    """

    vocab_size: int
    context: int
    eos: int | None
    target_rows: Rows
    drafter_rows: Rows
    max_new_tokens: int
    lookahead: int
    sp_degree: int
    drafter_latency: Law
    target_latency: Law
    verify: str = "rejection"
    block_windows: Literal["fixed", "maximal"] = "fixed"
    queue: Literal["fifo", "lifo", "any"] = "fifo"
    tie_rule: TieRule = "first"

    def models(self) -> tuple[TableLM, TableLM]:
        """``(target, drafter)``."""
        return tuple(TableLM(self.vocab_size, self.context, dict(rows), eos=self.eos, name=name)
                     for name, rows in (("target", self.target_rows),
                                        ("drafter", self.drafter_rows)))  # type: ignore[return-value]

    def latency(self) -> Latency:
        """The forward costs: constant where a law has one support point."""
        return Latency(drafter=_law(self.drafter_latency), target=_law(self.target_latency))

    @property
    def constant_latency(self) -> bool:
        """Whether both latency laws are point masses (an ``oblivious`` instance)."""
        return len(self.drafter_latency) == 1 and len(self.target_latency) == 1

    def dsi_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `dsi` (lean runs that keep no time: the same law of tokens,
        far more merging)."""
        return {"lookahead": self.lookahead, "sp_degree": self.sp_degree,
                "latency": self.latency(), "verify": self.verify, "queue": self.queue,
                "block_windows": self.block_windows, "record": False, "keep_time": False}

    def family(self) -> tuple[str, ...]:
        """The families this instance belongs to, by the names `dsi_ref.claims.attack.Budget`
        promises (the tie rule is the check's, not the instance's: see the attack)."""
        rows = [row for _, row in (*self.target_rows, *self.drafter_rows)]
        out = ["context-free" if self.context == 0 else f"{self.context + 1}-gram",
               f"V={self.vocab_size}", "eos" if self.eos is not None else "no-eos"]
        if any(p == 0 for row in rows for p in row):
            out.append("zeros")
        if any(len(set(row)) < len(row) for row in rows):
            out.append("ties")
        out += [f"N={self.max_new_tokens}", f"lookahead={self.lookahead}",
                f"sp_degree={self.sp_degree}", f"queue {self.queue}", f"costs {self.costs}"]
        out += sorted({f"{len(law)}-point cost law" for law in (self.drafter_latency,
                                                                 self.target_latency)
                       if len(law) > 1})
        return tuple(out)

    @property
    def costs(self) -> str:
        """Which forwards draw their cost: ``"constant"``, ``"random on the drafter"``, ``"random
        on the target"`` or ``"random on both models"``."""
        drafter, target = len(self.drafter_latency) > 1, len(self.target_latency) > 1
        return ("random on both models" if drafter and target else
                "random on the drafter" if drafter else
                "random on the target" if target else "constant")

    def __str__(self) -> str:
        return (f"V={self.vocab_size}, context={self.context}, eos={self.eos}, "
                f"target={_rows_text(self.target_rows)}, "
                f"drafter={_rows_text(self.drafter_rows)}, N={self.max_new_tokens}, "
                f"lookahead={self.lookahead}, sp_degree={self.sp_degree}, "
                f"drafter cost {_law_text(self.drafter_latency)}, "
                f"target cost {_law_text(self.target_latency)}, verify={self.verify!r}, "
                f"block_windows={self.block_windows!r}, queue={self.queue!r}, "
                f"ties {self.tie_rule!r}")


@dataclass(frozen=True)
class Finding:
    """The exact result of one class on one instance.

    Attributes:
        lossless: every scheduler of the class gives the target law on the instance.
        tv: the largest exact TV distance found (``None`` for a schedule-dependence witness,
            whose two options give different laws).
        detail: the schedule or witness that is lossy (empty when lossless).
    """

    lossless: bool
    tv: Fraction | None
    detail: str = ""


def check_instance(scheduler_class: SchedulerClass, instance: Instance, *,
                   max_runs: int | None = None) -> Finding:
    """Check DSI on ``instance`` against every scheduler of ``scheduler_class``, exactly (each
    exact law within ``max_runs`` runs of DSI; ``None``: no limit).

    Raises:
        InvalidParameterError: ``oblivious`` on an instance with random latencies, or a tie
            rule that is not the class's (`CLASS_RULES`).
        PathLimitError: the ``"every"`` tie rule meets more than `EVERY_TIE_LIMIT` tables, or an
            exact law more than ``max_runs`` runs.
    """
    if scheduler_class == "oblivious" and not instance.constant_latency:
        raise InvalidParameterError("the oblivious class fixes latencies: this instance draws "
                                    "them (check it against 'random')")
    rules = CLASS_RULES.get(scheduler_class)
    if rules is not None and instance.tie_rule not in rules:
        raise InvalidParameterError(
            f"the {scheduler_class} class breaks ties by {', '.join(map(repr, rules))}, not "
            f"{instance.tie_rule!r} (dsi_ref.audit.schedulers states the classes)")
    target, drafter = instance.models()
    kwargs = instance.dsi_kwargs()
    if scheduler_class == "content-aware":
        kwargs["sample_drafts_at"] = "start"
    greedy = instance.verify == "greedy"
    n = instance.max_new_tokens

    def program(rng: Any) -> tuple[int, ...]:
        return tuple(dsi(target, drafter, (), n, rng, **kwargs).tokens)

    reference = target_distribution(target, (), n, greedy=greedy)
    if scheduler_class in ("oblivious", "random"):
        laws: list[tuple[object, dict[Any, Fraction]]]
        if instance.tie_rule == "every":
            laws = list(oblivious_schedules(program, max_schedules=EVERY_TIE_LIMIT,
                                            max_runs=max_runs))
        else:
            laws = [(f"{instance.tie_rule!r}",
                     tie_rule_law(program, instance.tie_rule, max_runs=max_runs))]
        worst: tuple[Fraction, str] = (Fraction(0), "")
        for schedule, law in laws:
            report = compare_laws(law, reference)
            if not report.equal and report.tv_distance >= worst[0]:
                worst = (report.tv_distance, f"ties {schedule}")
        return Finding(not worst[1], worst[0], worst[1])
    try:
        law = exact_distribution(program, witness="shortest", max_runs=max_runs)
    except ScheduleDependenceError as error:
        witness: Witness | None = error.witness
        return Finding(False, None, str(witness))
    report = compare_laws(law, reference)
    return Finding(report.equal, report.tv_distance, "" if report.equal else str(report))

