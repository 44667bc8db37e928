"""The attack search: hypothesis draws DSI instances nobody picked and checks every lossless
claim of the registry on them, exactly.

Instances (`instances`): n-gram pairs (context-free or bigram) over 2–3 tokens, with and without
an EOS token, rows of small integer weights (so zeros and ties are common), drafter and target
latency laws with 1–3 support points, every tie rule (`TIE_RULES`), queue policy, lookahead 1–3,
sp_degree 1–4 and budgets up to ``max_new_tokens``. Each example draws one lossless claim (a
DSI rule and a scheduler class the registry says it is lossless under) and an instance of that
class (constant latencies for ``oblivious``), and checks it with `check_instance`. A refuting
instance is shrunk by hypothesis and reported as a `Refutation`: it becomes a lossy row of the
registry, with that witness.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ..audit.schedulers import SchedulerClass
from ..base.errors import PathLimitError
from .instances import TIE_RULES, Finding, Instance, check_instance
from .registry import CLAIMS, DSI_RULES, DSIRule

__all__ = ["LARGE", "SMALL", "AttackReport", "Budget", "Refutation", "attack", "instances",
           "lossless_dsi_claims"]

#: Costs the latency laws draw their support points from.
DRAFTER_COSTS = (Fraction(1, 3), Fraction(1, 2), Fraction(1), Fraction(2))
TARGET_COSTS = (Fraction(1), Fraction(2), Fraction(3))


def lossless_dsi_claims() -> list[tuple[DSIRule, SchedulerClass]]:
    """Every ``(rule, class)`` the registry claims DSI lossless under: what the search attacks."""
    rules = {r.label: r for r in DSI_RULES}
    return [(rules[c.rule], c.scheduler_class) for c in CLAIMS
            if c.decoder == "dsi" and c.verdict == "lossless" and c.scheduler_class is not None]


def _law(draw: Any, costs: tuple[Fraction, ...], points: int) -> tuple[tuple[Fraction,
                                                                               Fraction], ...]:
    support = sorted(draw(st.lists(st.sampled_from(costs), min_size=points, max_size=points,
                                   unique=True)))
    weights = [draw(st.integers(1, 3)) for _ in support]
    return tuple((c, Fraction(w, sum(weights))) for c, w in zip(support, weights, strict=True))


def _row(draw: Any, vocab_size: int) -> tuple[Fraction, ...]:
    weights = draw(st.lists(st.integers(0, 3), min_size=vocab_size, max_size=vocab_size)
                   .filter(lambda w: sum(w) > 0))
    return tuple(Fraction(w, sum(weights)) for w in weights)


@dataclass(frozen=True)
class Budget:
    """How far the search reaches: examples per claim and the largest instance parameters."""

    examples: int = 3
    max_new_tokens: int = 2
    max_lookahead: int = 3
    max_sp_degree: int = 3
    max_points: int = 2
    max_runs: int = 100_000

    def __str__(self) -> str:
        return (f"{self.examples} examples per claim, N <= {self.max_new_tokens}, lookahead "
                f"1-{self.max_lookahead}, sp_degree 1-{self.max_sp_degree}, latency laws with "
                f"1-{self.max_points} support points, tie rules {'/'.join(TIE_RULES)}, queues "
                f"fifo/lifo/any; an instance past {self.max_runs:,} runs of DSI in one exact law "
                "is skipped and counted")


#: The default run's budget (a few seconds) and ``-m slow``'s (the issue's full ranges).
SMALL = Budget(examples=5, max_new_tokens=2)
LARGE = Budget(examples=25, max_new_tokens=4, max_lookahead=3, max_sp_degree=4, max_points=3,
               max_runs=20_000)


@st.composite
def instances(draw: Any, rule: DSIRule, scheduler_class: SchedulerClass,
              budget: Budget = SMALL) -> Instance:
    """A DSI instance for ``rule`` that the ``scheduler_class`` check applies to."""
    vocab_size = draw(st.integers(2, 3))
    context = draw(st.integers(0, 1))
    eos = draw(st.none() | st.integers(0, vocab_size - 1))
    keys = [()] + ([(t,) for t in range(vocab_size)] if context else [])
    target = tuple((k, _row(draw, vocab_size)) for k in keys)
    drafter = tuple((k, _row(draw, vocab_size)) for k in keys)
    constant = scheduler_class == "oblivious"
    drafter_points = 1 if constant else draw(st.integers(1, budget.max_points))
    target_points = 1 if constant else draw(st.integers(1, budget.max_points))
    return Instance(
        vocab_size, context, eos, target, drafter,
        draw(st.integers(1, budget.max_new_tokens)), draw(st.integers(1, budget.max_lookahead)),
        draw(st.integers(1, budget.max_sp_degree)),
        _law(draw, DRAFTER_COSTS, drafter_points), _law(draw, TARGET_COSTS, target_points),
        rule.verify, rule.block_windows, draw(st.sampled_from(("fifo", "lifo", "any"))),
        draw(st.sampled_from(TIE_RULES)))


@dataclass(frozen=True)
class Refutation:
    """A lossless claim refuted: the rule, the class, the shrunk instance and what was found."""

    rule: str
    scheduler_class: SchedulerClass
    instance: Instance
    finding: Finding

    def __str__(self) -> str:
        tv = self.finding.tv
        tv_text = "" if tv is None else f" TV {tv} ({float(tv):.3g})"
        return (f"{self.rule} / {self.scheduler_class}: LOSSY{tv_text} on {self.instance}; "
                f"{self.finding.detail}")


@dataclass
class AttackReport:
    """What an attack did: its budget, what it covered, and the refutations (none: every
    lossless claim held on every instance drawn)."""

    budget: Budget
    seconds: float = 0.0
    checked: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    refutations: list[Refutation] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"attack budget: {self.budget} ({self.seconds:.1f} s)",
                 "claims checked: " + ", ".join(f"{k} x{n}" for k, n in
                                                sorted(self.checked.items())),
                 "families covered: " + ", ".join(f"{k} x{n}" for k, n in
                                                  sorted(self.families.items()))]
        if self.skipped:
            lines.append(f"skipped (past the run or tie-table limit): {self.skipped}")
        lines += [str(r) for r in self.refutations] or ["no lossless claim refuted"]
        return "\n".join(lines)


def attack(budget: Budget = SMALL, *,
           claims: list[tuple[DSIRule, SchedulerClass]] | None = None,
           derandomize: bool = True, progress: bool = False) -> AttackReport:
    """Search ``budget.examples`` instances per lossless claim (`lossless_dsi_claims`, or
    ``claims``) for a refutation; shrink each one found. ``derandomize`` fixes hypothesis's seed
    (the default run is reproducible); ``False`` draws new instances each time."""
    report = AttackReport(budget)
    start = time.perf_counter()
    for rule, cls in claims if claims is not None else lossless_dsi_claims():
        _attack_one(rule, cls, budget, derandomize, report, progress)
        if progress:
            print(f"  {rule.label} / {cls}: {report.checked[f'{rule.label}/{cls}']} checked, "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
    report.seconds = time.perf_counter() - start
    return report


def _attack_one(rule: DSIRule, cls: SchedulerClass, budget: Budget, derandomize: bool,
                report: AttackReport, progress: bool = False) -> None:
    last: list[tuple[Instance, Finding]] = []

    @settings(max_examples=budget.examples, deadline=None, database=None,
              derandomize=derandomize, phases=(Phase.generate, Phase.shrink),
              suppress_health_check=list(HealthCheck))
    @given(instances(rule, cls, budget))
    def holds(instance: Instance) -> None:
        started = time.perf_counter()
        try:
            finding = check_instance(cls, instance, max_runs=budget.max_runs)
        except PathLimitError:
            report.skipped += 1
            if progress:
                print(f"    skipped (past the run limit): {instance}", flush=True)
            return
        if progress:
            print(f"    {time.perf_counter() - started:6.1f} s  {instance}", flush=True)
        report.checked[f"{rule.label}/{cls}"] += 1
        report.families.update(instance.family())
        if not finding.lossless:
            last.append((instance, finding))
            raise AssertionError(str(finding))

    try:
        holds()
    except AssertionError:
        instance, finding = last[-1]
        report.refutations.append(Refutation(rule.label, cls, instance, finding))
