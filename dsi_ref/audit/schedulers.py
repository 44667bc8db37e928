"""Schedulers as adversaries: classes of schedulers and the exact check of a decoder against one.

Losslessness of a concurrent decoder is a claim about *every* scheduler of a class. The classes
(docs/design.md):

* ``oblivious`` — fixed latencies, and every choice fixed in advance, independent of content: the
  scheduler is a table ``rank(key, n)`` that, at a ``choose`` among ``n`` options named ``key``
  (for DSI: ``("tie", time)`` or ``("queue", time)``), takes the option of that rank in the
  decoder's canonical order. The checker enumerates *every* such table over the decision points
  the runs reach (`oblivious_schedules`), not only the two uniform rules "first" and "last"
  (ranks all 0, ranks all ``n − 1``), which are two of them.
* ``random`` — latencies drawn from a law independently of content (every forward's cost an
  independent draw from the `Latency` passed), and ties at equal times broken by one of the tie
  rules `TIE_RULES`: ``"first"`` and ``"last"`` (the canonical order, or its reverse) and
  ``"uniform"`` (each tie broken uniformly at random, independently).
  The checker takes the latency draws (and uniform ties) as probabilistic choices and checks
  the latency law it is given under each of the three rules. A claim that a decoder is lossless
  under ``random`` quantifies over *every* law of finite support, which no finite check covers:
  the registry's attack search (`dsi_ref.claims.attack`) draws laws with 1–3 support points for
  the drafter and the target, under each tie rule.
* ``adaptive`` (history-adaptive) — under the latency law given (constant or random), every tie
  and every queue choice may depend on the whole history delivered so far: committed tokens,
  delivered drafts, timings. The exact checker quantifies over every resolution of every
  ``choose`` (witness: the shortest path).
* ``content-aware`` — additionally sees the content of forwards still in flight (a draft
  token before it is delivered): DSI samples drafts when their forward starts
  (``sample_drafts_at="start"``) and the checker quantifies as for ``adaptive``.

**Their order is not a chain** (`CONTAINED_IN` states it exactly; tests/test_schedulers_classes.py
shows each pair it leaves out apart). ``oblivious`` and ``random`` are both contained in
``adaptive``, which is contained in ``content-aware``; neither of the first two contains the
other:

* ``oblivious ⊆ adaptive``: a rank table is a resolution of every ``choose`` that reads the
  history only through the choice's key (the time), under a constant latency law.
* ``random ⊆ adaptive`` (up to mixtures): "first" and "last" are rank tables, and "uniform" is a
  mixture of resolutions; if every scheduler of a class gives the target law, so does every
  mixture of them, since the law under a mixture is the same mixture of their laws.
* ``adaptive ⊆ content-aware``: a scheduler that sees the drafts in flight may ignore them
  (the check samples drafts when their forward starts, which, under a scheduler that does not
  look, is the same draw made earlier).
* ``oblivious ⊄ random``: random's ties follow one of three rules, oblivious's any rank table; a
  decoder whose bias under the table "option 0 at the first tie, option 1 at the second" is
  cancelled by the opposite table is lossless under first, last and uniform, and lossy under
  oblivious.
* ``random ⊄ oblivious``: random draws its latencies, oblivious fixes them: block verification
  with maximal windows is lossless under every oblivious scheduler and lossy under random costs
  (the claims registry's witness).

So a decoder lossy under a class is lossy under every class that contains it, and lossless
under a class is lossless under every class it contains: the claims registry's rows follow
`CONTAINED_IN`. `SCHEDULER_CLASSES` is only the order of the tables' columns (before issue 34
this docstring called it "from weakest to strongest" and a test read it as a chain).

`check_scheduler_class` returns a `ClassVerdict`: lossless, or the shortest witness;
`minimal_witness` also minimises the budget (the smallest ``max_new_tokens`` that is lossy). The
classes DSI is claimed lossless under, per verification rule, are rows of the claims registry
(`dsi_ref.claims.registry`; the audit's ``schedulers`` section checks them both ways, the attack
search tries to refute them, docs/dsi-walkthrough.md explains them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, TypeVar

from ..base.errors import InvalidParameterError, PathLimitError, ScheduleDependenceError
from ..base.exact_hooks import ExactHooks, ForwardedHooks, exact_hooks
from ..base.latency import Latency
from ..base.models import LanguageModel
from ..base.randomness import Key, Randomness
from ..base.validate import check_choice
from ..decoders.dsi import dsi
from ..decoders.verification import as_rule
from .exact import Witness, exact_distribution
from .laws import LosslessReport, compare_laws, target_distribution

__all__ = [
    "CONTAINED_IN",
    "SCHEDULER_CLASSES",
    "TIE_RULES",
    "ClassVerdict",
    "ObliviousSchedule",
    "SchedulerClass",
    "TieRule",
    "check_scheduler_class",
    "default_random_latency",
    "minimal_witness",
    "oblivious_schedules",
    "tie_rule_law",
    "witness_summary",
]

SchedulerClass = Literal["oblivious", "random", "adaptive", "content-aware"]
#: The classes, in the order of the tables (not a chain: `CONTAINED_IN`).
SCHEDULER_CLASSES: tuple[SchedulerClass, ...] = ("oblivious", "random", "adaptive",
                                                 "content-aware")
#: The order of the classes, exactly: ``(a, b)`` when every scheduler of ``a`` is a scheduler of
#: ``b`` or a mixture of them, so that a decoder lossy under ``a`` is lossy under ``b`` (closed
#: under transitivity; the module docstring gives the argument for each pair, and why
#: ``oblivious`` and ``random`` do not contain each other).
CONTAINED_IN: frozenset[tuple[SchedulerClass, SchedulerClass]] = frozenset({
    ("oblivious", "adaptive"), ("oblivious", "content-aware"),
    ("random", "adaptive"), ("random", "content-aware"),
    ("adaptive", "content-aware"),
})



T = TypeVar("T")
TieRule = Literal["first", "last", "uniform"]
#: The tie rules of the ``random`` class.
TIE_RULES: tuple[TieRule, ...] = ("first", "last", "uniform")


#: ``(1, ..., 1)`` per number of options (`_UniformTies.choose`).
_EQUAL_WEIGHTS: dict[int, tuple[Fraction, ...]] = {}


class _UniformTies:
    """``rng`` with every ``choose`` made a uniform draw (the ``"uniform"`` tie rule): the exact
    engine takes it as a probabilistic choice, a sampler as a fair die."""

    def __init__(self, rng: Randomness) -> None:
        self._rng = rng

    def categorical(self, weights: Sequence[Fraction | float], key: Key = None) -> int:
        """``rng``'s own categorical draw."""
        return self._rng.categorical(weights, key)

    def bernoulli(self, p: Fraction | float, key: Key = None) -> bool:
        """``rng``'s own Bernoulli draw."""
        return self._rng.bernoulli(p, key)

    def uniform(self, key: Key = None, bits: int | None = None) -> float:
        """``rng``'s own uniform."""
        return self._rng.uniform(key, bits)

    def choose(self, options: Sequence[T], key: Key = None) -> T:
        """A uniform draw among ``options`` (a probabilistic choice, not a scheduler's)."""
        count = len(options)
        weights = _EQUAL_WEIGHTS.get(count)
        if weights is None:  # one tuple per count: the engine caches a row's options by identity
            weights = _EQUAL_WEIGHTS[count] = (Fraction(1),) * count
        index: int = self._rng.categorical(weights)
        return options[index]


class _UniformTiesHooks(_UniformTies, ForwardedHooks):
    """`_UniformTies` of the exact checker: it is the checker's offer too, forwarded
    (`dsi_ref.base.exact_hooks.ForwardedHooks`), so that a decoder under uniform ties merges and
    resumes as it does under the checker itself (the wrapper keeps no state)."""

    def __init__(self, rng: Randomness, hooks: ExactHooks) -> None:
        _UniformTies.__init__(self, rng)
        ForwardedHooks.__init__(self, hooks)


def _uniform_ties(rng: Randomness) -> _UniformTies:
    """``rng`` with uniform ties (`_UniformTies`), still the checker's offer when it is one."""
    hooks = exact_hooks(rng)
    return _UniformTies(rng) if hooks is None else _UniformTiesHooks(rng, hooks)


def tie_rule_law(program: Callable[[Any], Any], tie_rule: TieRule, **exact_kwargs: Any
                 ) -> dict[Any, Fraction]:
    """The exact law of ``program(rng)`` with ties broken by ``tie_rule``."""
    check_choice("tie_rule", tie_rule, TIE_RULES)
    if tie_rule == "uniform":
        return exact_distribution(lambda rng: program(_uniform_ties(rng)), **exact_kwargs)
    return exact_distribution(program, scheduler=tie_rule, **exact_kwargs)


#: The most oblivious schedules `oblivious_schedules` enumerates before it gives up.
DEFAULT_MAX_SCHEDULES = 4096


@dataclass(frozen=True)
class ObliviousSchedule:
    """One oblivious scheduler: a rank fixed in advance for every decision point it met.

    Attributes:
        ranks: ``(key, n, rank)`` triples: at a ``choose`` named ``key`` among ``n`` options, take
            the option of index ``rank`` (``0 <= rank < n``) in the decoder's canonical order.
            Points the runs never reached are absent (no choice there changes anything).
    """

    ranks: tuple[tuple[Key, int, int], ...]

    def policy(self) -> Callable[[Sequence[object], Key], int]:
        """The schedule as a policy of `exact_distribution` / `Sampler` (``scheduler=``)."""
        table = {(key, n): rank for key, n, rank in self.ranks}
        return lambda options, key: table[(key, len(options))]

    def __str__(self) -> str:
        if not self.ranks:
            return "no scheduler choice"
        return ", ".join(f"{key!r} among {n}: option {rank}" for key, n, rank in self.ranks)


class _Undecided(Exception):
    """A run reached a decision point the schedule being built does not fix yet."""

    def __init__(self, key: Key, n: int) -> None:
        super().__init__(key, n)
        self.point = (key, n)


def oblivious_schedules(program: Callable[[Any], Any], *,
                        max_schedules: int = DEFAULT_MAX_SCHEDULES, **exact_kwargs: Any
                        ) -> list[tuple[ObliviousSchedule, dict[Any, Fraction]]]:
    """The exact law of ``program(rng)`` under every oblivious scheduler, one entry per schedule.

    An oblivious scheduler fixes its choices in advance and sees no content: at a ``choose``
    named ``key`` among ``n`` options it takes the option of a fixed rank ``rank(key, n)``. Two
    schedules that agree on every decision point the runs reach give the same law, so the
    enumeration is lazy: it fixes a rank for a point only when some run reaches it, and branches
    over the ``n`` ranks there. The uniform rules ``"first"`` and ``"last"`` are two of the
    schedules. Because the policy is a function of ``(options, key)`` only, the decoders'
    merge points stay sound (DSI's keys carry the virtual time, which is part of its state).

    Keyword arguments go to `exact_distribution` (not ``scheduler``).

    Raises:
        PathLimitError: more than ``max_schedules`` schedules (shrink the instance or raise it).

    >>> for schedule, law in oblivious_schedules(lambda rng: rng.choose("ab", key="k")):
    ...     print(schedule, law)
    'k' among 2: option 0 {'a': Fraction(1, 1)}
    'k' among 2: option 1 {'b': Fraction(1, 1)}
    """
    if "scheduler" in exact_kwargs:
        raise InvalidParameterError("oblivious_schedules chooses the schedulers itself: do not "
                                    "pass scheduler=")
    results: list[tuple[ObliviousSchedule, dict[Any, Fraction]]] = []
    stack: list[tuple[tuple[tuple[Key, int], int], ...]] = [()]
    while stack:
        fixed = stack.pop()
        table = dict(fixed)

        def policy(options: Sequence[object], key: Key,
                   table: dict[tuple[Key, int], int] = table) -> int:
            point = (key, len(options))
            if point not in table:
                raise _Undecided(key, len(options))
            return table[point]

        try:
            law = exact_distribution(program, scheduler=policy, **exact_kwargs)
        except _Undecided as undecided:
            stack.extend(fixed + ((undecided.point, rank),)
                         for rank in reversed(range(undecided.point[1])))
            continue
        results.append((ObliviousSchedule(tuple((k, n, r) for (k, n), r in fixed)), law))
        if len(results) > max_schedules:
            raise PathLimitError(f"more than {max_schedules} oblivious schedules; shrink the "
                                 "instance (max_new_tokens, lookahead, sp_degree) or raise "
                                 "max_schedules")
    return results


@dataclass(frozen=True)
class ClassVerdict:
    """The exact verdict of a decoder against a scheduler class.

    Attributes:
        scheduler_class: the class checked.
        lossless: True when every scheduler of the class gives the target law.
        reports: the law comparison for each fixed scheduler checked (every oblivious rank
            table; each tie rule of `TIE_RULES` for random), or the one law shared by all
            schedulers (adaptive/content-aware, when robust).
        witness: for a schedule-dependent decoder, the shortest path to a scheduler choice
            whose options lead to different laws.
        seconds: time the check took.
        max_new_tokens: the budget the verdict is about.
        schedules: the rank tables checked, in the order of ``reports`` (oblivious only; empty
            otherwise).
    """

    scheduler_class: SchedulerClass
    lossless: bool
    reports: tuple[LosslessReport, ...]
    witness: Witness | None
    seconds: float
    max_new_tokens: int | None = None
    schedules: tuple[ObliviousSchedule, ...] = ()

    def __str__(self) -> str:
        if self.witness is not None:
            return f"{self.scheduler_class}: LOSSY under some scheduler\n{self.witness}"
        if self.lossless:
            return f"{self.scheduler_class}: lossless"
        worst = max(range(len(self.reports)), key=lambda i: self.reports[i].tv_distance)
        under = f" under the schedule [{self.schedules[worst]}]" if self.schedules else ""
        return f"{self.scheduler_class}: {self.reports[worst]}{under}"


def check_scheduler_class(scheduler_class: SchedulerClass, target: LanguageModel,
                          drafter: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                          *, decoder: Callable[..., Any] = dsi, greedy: bool = False,
                          **decoder_kwargs: Any) -> ClassVerdict:
    """Check ``decoder`` (default `dsi`) exactly against every scheduler of ``scheduler_class``.

    ``decoder_kwargs`` go to the decoder (``lookahead``, ``sp_degree``, ``latency``, ``verify``,
    ``queue``). For ``random``, pass a ``latency`` with distributions: the check covers that law
    under each tie rule of `TIE_RULES` (a claim about every law is the registry's, attacked by
    `dsi_ref.claims.attack`). The reference is the target's greedy sequence when ``greedy`` or
    when the rule is greedy.

    Raises:
        InvalidParameterError: unknown class, or ``random`` with constant latencies.
    """
    if scheduler_class not in SCHEDULER_CLASSES:
        raise InvalidParameterError(f"scheduler_class must be one of {SCHEDULER_CLASSES}, got "
                                    f"{scheduler_class!r}")
    latency = decoder_kwargs.get("latency")
    if scheduler_class == "random" and (latency is None or latency.is_constant):
        raise InvalidParameterError("the 'random' scheduler class draws latencies: pass a "
                                    "latency=Latency(...) with at least one {value: prob} cost")
    greedy = greedy or as_rule(decoder_kwargs.get("verify", "rejection")).greedy
    kwargs = dict(decoder_kwargs)
    if scheduler_class == "content-aware":
        kwargs["sample_drafts_at"] = "start"

    def program(rng: Any) -> tuple[int, ...]:
        return tuple(decoder(target, drafter, prompt, max_new_tokens, rng, **kwargs).tokens)

    reference = target_distribution(target, prompt, max_new_tokens, greedy=greedy)
    start = time.perf_counter()
    if scheduler_class == "random":
        reports = tuple(compare_laws(tie_rule_law(program, rule), reference)
                        for rule in TIE_RULES)
        return ClassVerdict(scheduler_class, all(r.equal for r in reports), reports, None,
                            time.perf_counter() - start, max_new_tokens)
    if scheduler_class == "oblivious":
        laws = oblivious_schedules(program)
        reports = tuple(compare_laws(law, reference) for _, law in laws)
        return ClassVerdict(scheduler_class, all(r.equal for r in reports), reports, None,
                            time.perf_counter() - start, max_new_tokens,
                            tuple(schedule for schedule, _ in laws))
    try:
        law = exact_distribution(program, witness="shortest")
    except ScheduleDependenceError as error:
        return ClassVerdict(scheduler_class, False, (), error.witness,
                            time.perf_counter() - start, max_new_tokens)
    report = compare_laws(law, reference)
    return ClassVerdict(scheduler_class, report.equal, (report,), None,
                        time.perf_counter() - start, max_new_tokens)


def minimal_witness(scheduler_class: SchedulerClass, target: LanguageModel,
                    drafter: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                    **kwargs: Any) -> ClassVerdict:
    """`check_scheduler_class` at budgets ``1, 2, ..., max_new_tokens``: the verdict at the
    smallest lossy budget (its witness is the shortest path there), else the last verdict.

    The minimal witness is the one to read: fewest tokens, fewest choices before the scheduler's
    decision that changes the law.
    """
    if max_new_tokens < 1:
        raise InvalidParameterError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    verdict: ClassVerdict | None = None
    for budget in range(1, max_new_tokens + 1):
        verdict = check_scheduler_class(scheduler_class, target, drafter, prompt, budget,
                                        **kwargs)
        if not verdict.lossless:
            return verdict
    assert verdict is not None
    return verdict


def witness_summary(witness: Witness) -> str:
    """One line: the choices before the scheduler's decision, its two options, the outcome whose
    probability they change most."""
    path = "; ".join(str(step) for step in witness.path) or "(start)"
    worst, pa, pb = witness.discrepancy
    return (f"after [{path}] the scheduler picks {witness.options[0]} or {witness.options[1]}: "
            f"P{worst} = {pa} vs {pb}")


def default_random_latency(latency: Latency) -> Latency:
    """``latency`` with the target's cost made random: 1 or 2 with probability 1/2 each (the
    drafter keeps its cost), for the ``random`` class."""
    return Latency(drafter=latency.drafter, target={Fraction(1): Fraction(1, 2),
                                                    Fraction(2): Fraction(1, 2)},
                   drafter_first=latency.drafter_first)
