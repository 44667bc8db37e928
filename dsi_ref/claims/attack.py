"""The attack search: DSI instances nobody picked, each checked exactly against every lossless
claim of the registry it bears on.

**Drawing** (`draw_instances`). Per lossless claim (a DSI rule and a scheduler class the registry
says it is lossless under), ``budget.examples`` instances from a seeded generator. Each family the
budget names (`Budget.families`) is *stratified*: its values (``N``, lookahead, ``sp_degree``,
vocabulary 2 or 3, context-free or bigram, EOS or none, the queue policy, which models draw their
cost, how many support points a random cost has, zeros and ties forced into a row) come round in
a random order, each once every ``k`` instances of a claim, so a claim with ``examples >= k``
draws every value of the family, whatever the seed; the rest (rows of small integer weights,
cost support points and weights) is drawn freely. The oblivious class gets constant costs.

**Checking**. Each instance is checked against its claim's whole class on the instance
(`check_claim`): ``oblivious``, every rank table the runs reach (tie rule ``"every"``); ``random``,
each of its three tie rules (``"first"``, ``"last"``, ``"uniform"``) under the instance's
latency laws; ``adaptive`` and ``content-aware``, every resolution. An instance past the
budget's run limit (or past `EVERY_TIE_LIMIT` rank tables) is skipped and counted, never counted
as checked; a run that skips more than ``budget.max_skipped`` of its instances fails.

**Shrinking** (`shrink`). A refuting instance is made simpler while it stays refuting (a smaller
``N``, lookahead or ``sp_degree``, no context, no EOS, two tokens, fewer cost support points, a
simpler tie rule or queue, rows with more zeros or made uniform): the greedy first simplification
that keeps the refutation, again until none does. The checks it makes are not counted. The
refutation becomes a lossy row of the registry, with that witness.

Before issue 34, hypothesis drew the instances: with 5 examples per claim its choices of a
handful of values were far from uniform (the tie rule ``"every"`` was never drawn, no instance had
random costs on both models), its shrink replays were counted as checks, and skips passed
silently.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..audit.schedulers import SchedulerClass
from ..base.errors import InvalidParameterError, PathLimitError
from .instances import CLASS_RULES, EVERY_TIE_LIMIT, Finding, Instance, TieRule, check_instance
from .registry import CLAIMS, DSI_RULES, DSIRule

__all__ = ["COST_SHAPES", "LARGE", "QUEUES", "SMALL", "AttackReport", "Budget", "Refutation",
           "attack", "check_claim", "draw_instances", "families_of", "lossless_dsi_claims",
           "shrink"]

#: Costs the latency laws draw their support points from.
DRAFTER_COSTS = (Fraction(1, 3), Fraction(1, 2), Fraction(1), Fraction(2))
TARGET_COSTS = (Fraction(1), Fraction(2), Fraction(3))
#: The queue policies of DSI.
QUEUES = ("fifo", "lifo", "any")
#: Which forwards draw their cost (`Instance.costs`); the oblivious class has constant costs only.
COST_SHAPES = ("constant", "random on the drafter", "random on the target",
               "random on both models")
#: The tie rules each class is checked under, on every instance (`check_claim`).
CHECKED_RULES: dict[str, tuple[TieRule, ...]] = {"oblivious": ("every",),
                                             "random": CLASS_RULES["random"]}


def lossless_dsi_claims() -> list[tuple[DSIRule, SchedulerClass]]:
    """Every ``(rule, class)`` the registry claims DSI lossless under: what the search attacks."""
    rules = {r.label: r for r in DSI_RULES}
    return [(rules[c.rule], c.scheduler_class) for c in CLAIMS
            if c.decoder == "dsi" and c.verdict == "lossless" and c.scheduler_class is not None]


@dataclass(frozen=True)
class Budget:
    """How far the search reaches: instances per claim, the largest instance parameters, the
    run limit of one exact law, and the share of skipped instances that fails a run."""

    examples: int = 3
    max_new_tokens: int = 2
    max_lookahead: int = 3
    max_sp_degree: int = 3
    max_points: int = 2
    max_runs: int = 100_000
    max_skipped: Fraction = Fraction(1, 20)

    def strata(self, scheduler_class: SchedulerClass) -> dict[str, tuple[Any, ...]]:
        """The stratified parameters of an instance of ``scheduler_class`` and their values."""
        return {
            "max_new_tokens": tuple(range(1, self.max_new_tokens + 1)),
            "lookahead": tuple(range(1, self.max_lookahead + 1)),
            "sp_degree": tuple(range(1, self.max_sp_degree + 1)),
            "vocab_size": (2, 3), "context": (0, 1), "eos": (False, True), "queue": QUEUES,
            "costs": COST_SHAPES[:1] if scheduler_class == "oblivious" else COST_SHAPES,
            "points": tuple(range(2, self.max_points + 1)), "forced": ("zeros", "ties")}

    def families(self, classes: Sequence[SchedulerClass]) -> tuple[str, ...]:
        """The families a run over claims of ``classes`` draws, by the names `Instance.family`
        and the report use: each value of each stratified parameter, and the tie rules the
        classes are checked under (``"ties every"``: every rank table)."""
        names = ["context-free", "2-gram", "V=2", "V=3", "eos", "no-eos", "zeros", "ties"]
        names += [f"N={n}" for n in range(1, self.max_new_tokens + 1)]
        names += [f"lookahead={k}" for k in range(1, self.max_lookahead + 1)]
        names += [f"sp_degree={s}" for s in range(1, self.max_sp_degree + 1)]
        names += [f"queue {q}" for q in QUEUES]
        random_costs = any(c != "oblivious" for c in classes)
        names += [f"costs {shape}" for shape in (COST_SHAPES if random_costs
                                                 else COST_SHAPES[:1])]
        if random_costs:
            names += [f"{p}-point cost law" for p in range(2, self.max_points + 1)]
        names += [f"ties {rule}" for cls in dict.fromkeys(classes)
                  for rule in CHECKED_RULES.get(cls, ())]
        return tuple(dict.fromkeys(names))

    def __str__(self) -> str:
        return (f"{self.examples} instances per lossless claim, each checked against the whole "
                "class on it (oblivious: every rank table, up to "
                f"{EVERY_TIE_LIMIT}; random: ties first, last and uniform; adaptive and "
                "content-aware: every resolution); stratified, each value once every k "
                f"instances of a claim: N {_span(1, self.max_new_tokens)}, lookahead "
                f"{_span(1, self.max_lookahead)}, sp_degree {_span(1, self.max_sp_degree)}, "
                "V 2-3, context-free or bigram, EOS or none, zeros and ties, queues "
                "fifo/lifo/any, costs constant or random on the drafter, the target or both "
                f"(laws of {_span(2, self.max_points)} support points); more than "
                f"{float(self.max_skipped):.0%} skipped (past {self.max_runs:,} runs of DSI in "
                f"one exact law, or {EVERY_TIE_LIMIT} rank tables) fails the run")


def _span(low: int, high: int) -> str:
    return str(low) if high <= low else f"{low}-{high}"


#: The default run's budget (a second or two) and ``-m slow``'s (the issue's full ranges).
SMALL = Budget(examples=5, max_new_tokens=2)
LARGE = Budget(examples=25, max_new_tokens=4, max_lookahead=3, max_sp_degree=4, max_points=3,
               max_runs=20_000)


def _weights(gen: np.random.Generator, vocab_size: int) -> list[int]:
    """A row's integer weights, 0-3 each, not all 0."""
    weights = [0] * vocab_size
    while not any(weights):
        weights = [int(w) for w in gen.integers(0, 4, size=vocab_size)]
    return weights


def _row(weights: Sequence[int]) -> tuple[Fraction, ...]:
    return tuple(Fraction(w, sum(weights)) for w in weights)


def _law(gen: np.random.Generator, costs: tuple[Fraction, ...], points: int
         ) -> tuple[tuple[Fraction, Fraction], ...]:
    support = sorted(costs[i] for i in gen.choice(len(costs), size=points, replace=False))
    weights = [int(w) for w in gen.integers(1, 4, size=points)]
    return tuple((c, Fraction(w, sum(weights))) for c, w in zip(support, weights, strict=True))


def _forced(gen: np.random.Generator, weights: list[int], kind: str) -> list[int]:
    """``weights`` with a zero (``"zeros"``) or two equal entries (``"ties"``) forced in."""
    i, j = (int(x) for x in gen.choice(len(weights), size=2, replace=False))
    out = list(weights)
    if kind == "zeros":
        out[i] = 0
        if not any(out):
            out[j] = 1
    else:
        out[i] = out[j] = max(out[j], 1)
    return out


def _instance(gen: np.random.Generator, rule: DSIRule, scheduler_class: SchedulerClass,
              values: dict[str, Any]) -> Instance:
    vocab_size, context = values["vocab_size"], values["context"]
    keys = [()] + ([(t,) for t in range(vocab_size)] if context else [])
    weights = [[_weights(gen, vocab_size) for _ in keys] for _ in range(2)]
    table, at = int(gen.integers(2)), int(gen.integers(len(keys)))
    weights[table][at] = _forced(gen, weights[table][at], values["forced"])
    target, drafter = ([(k, _row(w)) for k, w in zip(keys, rows, strict=True)]
                       for rows in weights)
    shape = values["costs"]
    drafter_points = values["points"] if shape in COST_SHAPES[1::2] else 1
    target_points = values["points"] if shape in COST_SHAPES[2:] else 1
    eos = int(gen.integers(vocab_size)) if values["eos"] else None
    tie_rule = CHECKED_RULES.get(scheduler_class, ("first",))[0]
    return Instance(vocab_size, context, eos, tuple(target), tuple(drafter),
                    values["max_new_tokens"], values["lookahead"], values["sp_degree"],
                    _law(gen, DRAFTER_COSTS, drafter_points), _law(gen, TARGET_COSTS,
                                                                    target_points),
                    rule.verify, rule.block_windows, values["queue"], tie_rule)


def draw_instances(budget: Budget, claims: Sequence[tuple[DSIRule, SchedulerClass]] | None = None,
                   seed: int | None = 0) -> list[tuple[DSIRule, SchedulerClass, Instance]]:
    """``budget.examples`` instances per claim (`lossless_dsi_claims`, or ``claims``), drawn with
    ``numpy.random.default_rng(seed)`` (``None``: fresh entropy), every stratified parameter
    cycling through its values in a random order (module docstring)."""
    gen = np.random.default_rng(seed)
    out = []
    for rule, cls in claims if claims is not None else lossless_dsi_claims():
        strata = budget.strata(cls)
        orders = {name: [values[int(i)] for i in gen.permutation(len(values))]
                  for name, values in strata.items()}
        for j in range(budget.examples):
            picked = {name: order[j % len(order)] for name, order in orders.items()}
            out.append((rule, cls, _instance(gen, rule, cls, picked)))
    return out


def check_claim(scheduler_class: SchedulerClass, instance: Instance, *,
                max_runs: int | None = None) -> tuple[Finding, Instance]:
    """``instance`` checked against the whole of ``scheduler_class`` on it: under each tie rule
    of `CHECKED_RULES` for the classes that fix their ties. The worst finding, and the instance
    with the tie rule that gave it (the first rule where all are lossless).

    Raises:
        PathLimitError: past ``max_runs`` runs in one exact law, or `EVERY_TIE_LIMIT` tables.
    """
    worst: tuple[Finding, Instance] | None = None
    for rule in CHECKED_RULES.get(scheduler_class, (instance.tie_rule,)):
        ruled = dataclasses.replace(instance, tie_rule=rule)
        finding = check_instance(scheduler_class, ruled, max_runs=max_runs)
        if worst is None or (worst[0].lossless and not finding.lossless):
            worst = (finding, ruled)
    assert worst is not None
    return worst


def families_of(scheduler_class: SchedulerClass, instance: Instance) -> tuple[str, ...]:
    """The families one check of ``instance`` against ``scheduler_class`` covers: the
    instance's (`Instance.family`) and the tie rules it is checked under."""
    return (*instance.family(), *(f"ties {r}" for r in CHECKED_RULES.get(scheduler_class, ())))


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
    """What an attack did: its budget, what it drew and checked, and the refutations (none:
    every lossless claim held on every instance checked)."""

    budget: Budget
    seed: int | None = 0
    seconds: float = 0.0
    drawn: int = 0
    checked: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    refutations: list[Refutation] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"attack budget: {self.budget} ({self.seconds:.1f} s)",
                 f"instances: {self.drawn} drawn (seed {self.seed}), "
                 f"{sum(self.checked.values())} checked, {self.skipped} skipped",
                 "claims checked: " + ", ".join(f"{k} x{n}" for k, n in
                                                sorted(self.checked.items())),
                 "families drawn and checked: " + ", ".join(
                     f"{k} x{n}" for k, n in sorted(self.families.items()))]
        lines += [str(r) for r in self.refutations] or ["no lossless claim refuted"]
        return "\n".join(lines)


def attack(budget: Budget = SMALL, *,
           claims: Sequence[tuple[DSIRule, SchedulerClass]] | None = None,
           seed: int | None = 0, progress: bool = False) -> AttackReport:
    """Check every instance `draw_instances` draws for ``budget`` against its claim's whole
    class (`check_claim`); shrink each refutation (`shrink`). ``seed`` fixes the draws (the
    default run is reproducible); ``None`` draws new instances each time.

    Raises:
        PathLimitError: more than ``budget.max_skipped`` of the instances were skipped (past the
            run limit or the rank-table limit): the report's text says how many.
    """
    report = AttackReport(budget, seed)
    start = time.perf_counter()
    drawn = draw_instances(budget, claims, seed)
    report.drawn = len(drawn)
    refuted: set[tuple[str, str]] = set()
    for rule, cls, instance in drawn:
        if (rule.label, cls) in refuted:
            continue
        started = time.perf_counter()
        try:
            finding, ruled = check_claim(cls, instance, max_runs=budget.max_runs)
        except PathLimitError:
            report.skipped += 1
            if progress:
                print(f"    skipped (past the run limit): {instance}", flush=True)
            continue
        if progress:
            print(f"    {time.perf_counter() - started:6.1f} s  {rule.label}/{cls}  {instance}",
                  flush=True)
        report.checked[f"{rule.label}/{cls}"] += 1
        report.families.update(families_of(cls, instance))
        if not finding.lossless:
            refuted.add((rule.label, cls))
            small, small_finding = shrink(cls, ruled, finding, max_runs=budget.max_runs)
            report.refutations.append(Refutation(rule.label, cls, small, small_finding))
    report.seconds = time.perf_counter() - start
    if report.skipped > budget.max_skipped * report.drawn:
        raise PathLimitError(f"the attack skipped {report.skipped} of {report.drawn} instances, "
                             f"more than {float(budget.max_skipped):.0%}: raise the budget's "
                             f"max_runs or shrink its ranges\n{report}")
    return report


def _renormalised(row: Sequence[Fraction]) -> tuple[Fraction, ...] | None:
    total = sum(row, Fraction(0))
    return None if total == 0 else tuple(p / total for p in row)


def _simpler_rows(rows: tuple[tuple[tuple[int, ...], tuple[Fraction, ...]], ...]
                  ) -> Iterator[tuple[tuple[tuple[int, ...], tuple[Fraction, ...]], ...]]:
    for at, (key, row) in enumerate(rows):
        support = [p for p in row if p > 0]
        uniform = tuple(Fraction(1, len(support)) if p > 0 else Fraction(0) for p in row)
        candidates = [_renormalised([Fraction(0) if i == z else p for i, p in enumerate(row)])
                      for z in range(len(row)) if row[z] > 0]
        for new in (*candidates, uniform):
            if new is not None and new != row:
                yield rows[:at] + ((key, new),) + rows[at + 1:]


def _simpler(inst: Instance) -> Iterator[Instance]:
    """Simpler instances than ``inst``, the most reducing first."""
    replace = dataclasses.replace
    for name in ("max_new_tokens", "lookahead", "sp_degree"):
        if getattr(inst, name) > 1:
            yield replace(inst, **{name: getattr(inst, name) - 1})
    if inst.context:
        yield replace(inst, context=0, target_rows=inst.target_rows[:1],
                      drafter_rows=inst.drafter_rows[:1])
    if inst.eos is not None:
        yield replace(inst, eos=None)
    if inst.vocab_size == 3 and inst.eos != 2:  # token 2 dropped, the rows renormalised
        two = [[(k, _renormalised(r[:2])) for k, r in table if 2 not in k]
               for table in (inst.target_rows, inst.drafter_rows)]
        tables = [tuple((k, r) for k, r in table if r is not None) for table in two]
        if all(len(t) == len(w) for t, w in zip(tables, two, strict=True)):
            yield replace(inst, vocab_size=2, target_rows=tables[0], drafter_rows=tables[1])
    for name in ("drafter_latency", "target_latency"):
        law = getattr(inst, name)
        for drop in range(len(law) if len(law) > 1 else 0):
            rest = [w for i, (_, w) in enumerate(law) if i != drop]
            total = sum(rest, Fraction(0))
            yield replace(inst, **{name: tuple((c, w / total) for i, (c, w) in enumerate(law)
                                               if i != drop)})
    rank = {"first": 0, "last": 1}
    for simpler_rule in ("first", "last"):
        if rank[simpler_rule] < rank.get(inst.tie_rule, 2):
            yield replace(inst, tie_rule=simpler_rule)
    if inst.queue != "fifo":
        yield replace(inst, queue="fifo")
    for rows in _simpler_rows(inst.target_rows):
        yield replace(inst, target_rows=rows)
    for rows in _simpler_rows(inst.drafter_rows):
        yield replace(inst, drafter_rows=rows)


def shrink(scheduler_class: SchedulerClass, instance: Instance, finding: Finding, *,
           max_runs: int | None = None) -> tuple[Instance, Finding]:
    """A simpler instance on which ``scheduler_class`` is still lossy (module docstring), with
    its finding: the first simplification that stays lossy, repeatedly, until none does. A
    candidate whose check is past ``max_runs`` or whose tie rule the class does not have is
    passed over."""
    current, current_finding = instance, finding
    progress = True
    while progress:
        progress = False
        for candidate in _simpler(current):
            try:
                found = check_instance(scheduler_class, candidate, max_runs=max_runs)
            except (PathLimitError, InvalidParameterError):
                continue
            if not found.lossless:
                current, current_finding, progress = candidate, found, True
                break
    return current, current_finding
