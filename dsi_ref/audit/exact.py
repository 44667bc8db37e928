"""The exact interpreter of `Randomness`: a program's output law, with schedules quantified over.

`exact_distribution(program)` re-runs ``program(rng)`` replaying a prefix of choices and branching
at the next one, until every path is explored; probabilities multiply as `Fraction`s.

* At a probabilistic choice (``categorical``/``bernoulli``) the law is the mixture of the branches.
* At a nondeterministic choice (``choose``) every option is explored and the options must lead to
  the *same* law; otherwise the program is schedule-dependent and `ScheduleDependenceError` reports
  a witness: the path to the choice, the two options and the laws they lead to. Hence the law is
  only defined for schedule-robust programs, and computing it proves robustness (for every
  scheduler that sees the whole history: the strongest adversary; `dsi_ref.audit.schedulers`
  restricts what the scheduler may see).
* Keyed draws (see `dsi_ref.base.randomness`) share one uniform per key: the enumerator keeps,
  per key, the interval of ``u`` that the earlier draws left possible, and branches on
  sub-intervals.
* ``merge_point(state)`` calls made by decoders let paths that reach the same state share the
  law of their continuation (dynamic programming instead of path enumeration).

Laws are ``dict[value, Fraction]`` with zero-probability outcomes left out.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Generic, TypeAlias, TypeVar

from ..base.errors import PathLimitError, ScheduleDependenceError
from ..base.randomness import Key, SchedulerPolicy

__all__ = [
    "Law",
    "PathLimitError",
    "ScheduleDependenceError",
    "Witness",
    "WitnessStep",
    "exact_distribution",
    "exact_expectation",
    "total_variation",
]

V = TypeVar("V", bound=Hashable)
T = TypeVar("T")
Law: TypeAlias = dict[Any, Fraction]

#: Default bound on the number of complete paths explored before giving up.
DEFAULT_MAX_PATHS = 2_000_000
#: Default bound on the number of choices one run of the program may make.
DEFAULT_MAX_CHOICES = 100_000



@dataclass(frozen=True)
class WitnessStep:
    """One choice on a witness path: what was chosen, with which probability (None: scheduler)."""

    kind: str  # "categorical" | "bernoulli" | "choose"
    key: Key
    chosen: str
    probability: Fraction | None

    def __str__(self) -> str:
        who = "scheduler" if self.probability is None else f"p={self.probability}"
        key = "" if self.key is None else f" {self.key!r}"
        return f"{self.kind}{key} -> {self.chosen} ({who})"


@dataclass(frozen=True)
class Witness:
    """A nondeterministic choice whose options lead to different laws."""

    path: tuple[WitnessStep, ...]
    options: tuple[str, str]
    laws: tuple[Law, Law]
    path_probability: Fraction

    @property
    def discrepancy(self) -> tuple[Any, Fraction, Fraction]:
        """The outcome whose probability differs most between the two options, and both values."""
        a, b = self.laws
        worst = max(set(a) | set(b),
                    key=lambda v: (abs(a.get(v, Fraction(0)) - b.get(v, Fraction(0))), repr(v)))
        return worst, a.get(worst, Fraction(0)), b.get(worst, Fraction(0))

    def __str__(self) -> str:
        steps = "\n".join(f"    {i + 1}. {s}" for i, s in enumerate(self.path)) or "    (start)"
        worst, pa, pb = self.discrepancy
        return (f"schedule-dependent: after the path (probability {self.path_probability})\n"
                f"{steps}\n  the scheduler's options {self.options[0]} and {self.options[1]} "
                f"lead to different laws;\n  e.g. P({worst!r}) = {pa} vs {pb} "
                f"(TV = {total_variation(*self.laws)})")



def total_variation(p: Law, q: Law) -> Fraction:
    """Total-variation distance ``(1/2) Σ_x |p(x) − q(x)|`` between two exact laws."""
    keys = set(p) | set(q)
    return sum((abs(p.get(x, Fraction(0)) - q.get(x, Fraction(0))) for x in keys),
               Fraction(0)) / 2


# ---------------------------------------------------------------------------------------------
# The replaying interpreter


@dataclass
class _Node:
    kind: str  # "categorical" | "bernoulli" | "choose"
    key: Key
    probs: list[Fraction] | None  # None for "choose"
    labels: list[str]


@dataclass
class _Event:
    kind: str  # "choice" | "ckpt" | "merged" | "done"
    node: _Node | None = None
    key: Hashable = None
    value: Any = None


class _Stop(Exception):
    pass


def _dead(key: Key, committed: tuple[int, ...]) -> bool:
    """A ``(role, position, context)`` key that no later decision can share: its position is
    decided, or its context contradicts the committed tokens."""
    if not (type(key) is tuple and len(key) == 3 and type(key[2]) is tuple):
        return False
    position, context = key[1], key[2]
    return bool(position < len(committed) or context[:len(committed)] != committed[:len(context)])


class _Replay:
    """One run of the program: replays ``prefix``, then takes option 0 at every new choice."""

    def __init__(self, engine: _Engine[Any], prefix: tuple[int, ...]) -> None:
        self.engine = engine
        self.prefix = prefix
        self.depth = 0
        self.taken: list[int] = []
        self.events: list[_Event] = []
        self.intervals: dict[Key, tuple[Fraction, Fraction]] = {}
        self.scope_outer: tuple[int, ...] = ()

    # -- branching ------------------------------------------------------------------------------
    def _decide(self, node: _Node) -> int:
        d = self.depth
        self.depth += 1
        if self.depth > self.engine.max_choices:
            raise PathLimitError(
                f"one run made more than {self.engine.max_choices} choices; the program may not "
                "terminate (raise max_choices if it is just long)")
        if d < len(self.prefix):
            index = self.prefix[d]
        else:
            index = 0
            self.events.append(_Event("choice", node=node))
        self.taken.append(index)
        return index

    def categorical(self, weights: Sequence[Fraction | float], key: Key = None) -> int:
        if key is None or not self.engine.keyed or key not in self.intervals:
            # a fresh uniform: branch on the CDF's bins, remembered if the key is asked again
            values, weights_, labels, bins = self.engine.branches(weights)
            pick = self._decide(_Node("categorical", key, weights_, labels))
            if key is not None and self.engine.keyed:
                self.intervals[key] = bins[pick]
            return values[pick]
        exact = _exact_weights(weights)
        total = sum(exact)
        lo, hi = self.intervals.get(key, (Fraction(0), Fraction(1)))
        width = hi - lo
        outcomes: list[int] = []
        probs: list[Fraction] = []
        subs: list[tuple[Fraction, Fraction]] = []
        acc = Fraction(0)
        for i, w in enumerate(exact):
            left, acc = acc, acc + w / total
            if w == 0:
                continue
            a, b = max(lo, left), min(hi, acc)
            if a < b:
                outcomes.append(i)
                probs.append((b - a) / width)
                subs.append((a, b))
        pick = self._decide(_Node("categorical", key, probs, [str(i) for i in outcomes]))
        self.intervals[key] = subs[pick]
        return outcomes[pick]

    def bernoulli(self, p: Fraction | float, key: Key = None) -> bool:
        p = p if isinstance(p, Fraction) else Fraction(p)
        if not 0 <= p <= 1:
            raise ValueError(f"bernoulli probability must lie in [0, 1], got {p}")
        if key is not None and self.engine.keyed:
            lo, hi = self.intervals.get(key, (Fraction(0), Fraction(1)))
            width = hi - lo
            options: list[tuple[bool, tuple[Fraction, Fraction]]] = []
            if lo < min(hi, p):
                options.append((True, (lo, min(hi, p))))
            if max(lo, p) < hi:
                options.append((False, (max(lo, p), hi)))
            probs = [(b - a) / width for _, (a, b) in options]
            pick = self._decide(_Node("bernoulli", key, probs, [str(v) for v, _ in options]))
            self.intervals[key] = options[pick][1]
            return options[pick][0]
        values = [v for v, q in ((True, p), (False, 1 - p)) if q > 0]
        probs = [p if v else 1 - p for v in values]
        return values[self._decide(_Node("bernoulli", key, probs, [str(v) for v in values]))]

    def choose(self, options: Sequence[T], key: Key = None) -> T:
        if not options:
            raise ValueError("choose() needs at least one option")
        if len(options) == 1:
            return options[0]
        policy = self.engine.scheduler
        if policy is not None:  # a fixed scheduler: no quantification
            index = 0 if policy == "first" else len(options) - 1 if policy == "last" \
                else policy(options, key)
            return options[index]
        return options[self._decide(_Node("choose", key, None, [_label(o) for o in options]))]

    # -- merging --------------------------------------------------------------------------------
    def merge_point(self, state: Hashable, *, entry: bool = False,
                    committed: tuple[int, ...] | None = None) -> None:
        if entry:
            self.scope_outer = tuple(self.taken)
        if committed is not None and self.intervals:
            for k in [k for k in self.intervals if _dead(k, committed)]:
                del self.intervals[k]
        if not self.engine.merge or self.depth < len(self.prefix):
            return
        key = (self.scope_outer, state, frozenset(self.intervals.items()))
        if key in self.engine.memo:
            self.events.append(_Event("merged", key=key))
            raise _Stop
        self.events.append(_Event("ckpt", key=key))


def _exact_weights(weights: Sequence[Fraction | float]) -> list[Fraction]:
    exact = [w if isinstance(w, Fraction) else Fraction(w) for w in weights]
    if any(w < 0 for w in exact) or sum(exact) <= 0:
        raise ValueError(f"categorical weights must be >= 0 with a positive sum, got "
                         f"{list(weights)!r}")
    return exact


_Branches = tuple[list[int], list[Fraction], list[str], list[tuple[Fraction, Fraction]]]


def _branches(weights: Sequence[Fraction | float]) -> _Branches:
    """Outcomes with positive weight, their probabilities, labels and CDF bins in [0, 1)."""
    exact = _exact_weights(weights)
    total = sum(exact)
    outcomes, probs, bins = [], [], []
    acc = Fraction(0)
    for i, w in enumerate(exact):
        if w > 0:
            p = w / total
            outcomes.append(i)
            probs.append(p)
            bins.append((acc, acc + p))
            acc += p
        # zero-weight outcomes have empty bins
    return outcomes, probs, [str(i) for i in outcomes], bins


def _label(option: object) -> str:
    text = getattr(option, "label", None)
    return str(text) if text is not None else repr(option)


@dataclass
class _Engine(Generic[V]):
    program: Callable[[Any], V]
    keyed: bool
    merge: bool
    max_paths: int
    max_choices: int
    first_witness: bool
    scheduler: Any = None
    memo: dict[Hashable, Law] = field(default_factory=dict)
    paths: int = 0
    runs: int = 0
    witnesses: list[Witness] = field(default_factory=list)
    stack: list[tuple[_Node, int]] = field(default_factory=list)
    # rows are usually the same tuple objects again and again (model tables): cache by identity,
    # holding a reference so that an id is never reused while cached
    row_cache: dict[int, tuple[object, _Branches]] = field(default_factory=dict)

    def branches(self, weights: Sequence[Fraction | float]) -> _Branches:
        if not isinstance(weights, tuple):
            return _branches(weights)
        hit = self.row_cache.get(id(weights))
        if hit is not None and hit[0] is weights:
            return hit[1]
        result = _branches(weights)
        self.row_cache[id(weights)] = (weights, result)
        return result

    def run(self, prefix: tuple[int, ...]) -> list[_Event]:
        self.runs += 1
        replay = _Replay(self, prefix)
        try:
            value = self.program(replay)
        except _Stop:
            return replay.events
        if replay.depth < len(prefix):
            raise RuntimeError("the program made fewer choices on replay than before: it is not "
                               "a deterministic function of its draws (hidden state or "
                               "randomness outside rng?)")
        replay.events.append(_Event("done", value=value))
        return replay.events

    def explore(self, prefix: tuple[int, ...], events: list[_Event], i: int) -> Law:
        ev = events[i]
        if ev.kind == "done":
            self.paths += 1
            if self.paths > self.max_paths:
                raise PathLimitError(
                    f"more than {self.max_paths} paths; shrink the problem or raise max_paths")
            try:
                return {ev.value: Fraction(1)}
            except TypeError:
                raise TypeError(f"program returned an unhashable value {ev.value!r}; return a "
                                "tuple (e.g. run.tokens)") from None
        if ev.kind == "merged":
            return self.memo[ev.key]
        if ev.kind == "ckpt":
            if ev.key in self.memo:
                return self.memo[ev.key]
            law = self.explore(prefix, events, i + 1)
            self.memo[ev.key] = law
            return law
        node = ev.node
        assert node is not None
        laws: list[Law] = []
        for b in range(len(node.labels)):
            self.stack.append((node, b))
            if b == 0:
                law = self.explore(prefix + (0,), events, i + 1)
            else:
                branch = prefix + (b,)
                law = self.explore(branch, self.run(branch), 0)
            self.stack.pop()
            laws.append(law)
        if node.probs is not None:
            return _mixture(node.probs, laws)
        for b in range(1, len(laws)):
            if laws[b] != laws[0]:
                witness = Witness(
                    path=tuple(_step(n, c) for n, c in self.stack),
                    options=(node.labels[0], node.labels[b]),
                    laws=(laws[0], laws[b]),
                    path_probability=_product(n.probs[c] for n, c in self.stack
                                              if n.probs is not None))
                if self.first_witness:
                    raise ScheduleDependenceError(witness)
                self.witnesses.append(witness)
                break
        return laws[0]


def _step(node: _Node, choice: int) -> WitnessStep:
    prob = None if node.probs is None else node.probs[choice]
    return WitnessStep(node.kind, node.key, node.labels[choice], prob)


def _product(values: Any) -> Fraction:
    out = Fraction(1)
    for v in values:
        out *= v
    return out


def _mixture(weights: list[Fraction], laws: list[Law]) -> Law:
    out: Law = {}
    for w, law in zip(weights, laws, strict=True):
        for value, p in law.items():
            out[value] = out.get(value, Fraction(0)) + w * p
    return out


def exact_distribution(program: Callable[[Any], V], *, keyed: bool = True, merge: bool = True,
                       max_paths: int = DEFAULT_MAX_PATHS,
                       max_choices: int = DEFAULT_MAX_CHOICES,
                       witness: str = "first",
                       scheduler: SchedulerPolicy | None = None) -> dict[V, Fraction]:
    """The exact law of ``program(rng)`` over all of its probabilistic choices.

    Args:
        program: a deterministic function of the choices it makes through its argument (a
            `Randomness`); it must return a hashable value (e.g. ``run.tokens``).
        keyed: honour keys (draws with the same key share one uniform), as `Sampler` does.
        merge: use the decoders' ``merge_point`` hints (dynamic programming).
        max_paths: raise `PathLimitError` past this many complete paths.
        max_choices: raise `PathLimitError` when one run makes more choices than this.
        witness: ``"first"`` raises at the first schedule dependence found; ``"shortest"``
            explores everything and raises with the witness whose path is shortest.
        scheduler: ``None`` (default) quantifies over every resolution of ``choose``; a policy
            (``"first"``, ``"last"`` or ``policy(options, key) -> index``, as in `Sampler`)
            fixes the scheduler instead, e.g. for the exact expected latency of one schedule.

    Raises:
        ScheduleDependenceError: some ``choose`` has options leading to different laws.

    >>> exact_distribution(lambda rng: rng.categorical([Fraction(1), Fraction(3)]))
    {0: Fraction(1, 4), 1: Fraction(3, 4)}
    """
    if witness not in ("first", "shortest"):
        raise ValueError(f"witness must be 'first' or 'shortest', got {witness!r}")
    if scheduler is not None and scheduler not in ("first", "last") and not callable(scheduler):
        raise ValueError(f"scheduler must be None, 'first', 'last' or a callable, got "
                         f"{scheduler!r}")
    engine: _Engine[V] = _Engine(program, keyed, merge, max_paths, max_choices,
                                 first_witness=witness == "first", scheduler=scheduler)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20_000))
    try:
        law = engine.explore((), engine.run(()), 0)
    finally:
        sys.setrecursionlimit(old_limit)
    if engine.witnesses:
        raise ScheduleDependenceError(min(engine.witnesses, key=lambda w: len(w.path)))
    return {v: p for v, p in law.items() if p != 0}


def exact_expectation(program: Callable[[Any], Fraction | float | int], **kwargs: Any
                      ) -> Fraction | float:
    """``E[program(rng)]`` exactly (a `Fraction` when every value is rational).

    Accepts the keyword arguments of `exact_distribution`.

    >>> exact_expectation(lambda rng: 2 if rng.bernoulli(Fraction(1, 3)) else 5)
    Fraction(4, 1)
    """
    law = exact_distribution(program, **kwargs)
    if all(isinstance(v, Fraction | int) for v in law):
        return sum((Fraction(v) * p for v, p in law.items()), Fraction(0))
    return float(sum(float(v) * float(p) for v, p in law.items()))
