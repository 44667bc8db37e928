"""The replaying interpreter of `Randomness` behind `dsi_ref.audit.exact`: runs, choices and merges.

`Engine.run` runs the program once on a `_Replay`, the `Randomness` that replays a prefix of
choices (checking that each replayed choice is the one recorded when the path was first run) and
takes option 0 at every new choice, recording it as an event; `Engine.explore` walks the recorded
events depth first, re-running the program for every other option, and mixes the branches' laws
(probabilistic choices) or requires them equal (the scheduler's ``choose``: else a `Witness`).
Keyed draws split one uniform per key into intervals; ``merge_point`` calls let paths that reach
the same state share the law of their continuation.

Three things keep the exploration cheap, none of which changes a law:

* **Resuming instead of replaying.** A decoder that offers ``snapshot``/``restore`` at its merge
  points (`dsi_ref.base.randomness.merge_point`) is not replayed from its start for every
  branch: the engine keeps the snapshot taken at each fresh merge point (with the depth and the
  keyed intervals there), and a run that branches below it restores the deepest one on its path
  when the decoder enters (its ``entry`` merge point), then replays only the choices after it.
  Only with ``merge=True`` (``merge=False`` is the plain enumeration the cross-checks compare
  with). Sound because the program is a deterministic function of its choices: the decoder's
  state after the same choices is the snapshot; its ``restore`` refuses a snapshot of another
  invocation (other models, prompt, budget or configuration).
* **Laws as integers over one denominator** (`_ILaw`): a mixture multiplies and adds Python
  ints instead of normalising `Fraction` s entry by entry; every law is kept reduced, so two
  laws are equal exactly when their representations are. Converted to `Fraction` s at the end.
* **Rows cached by identity**: a model row (a tuple) is read exactly once per exploration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from math import gcd, lcm
from typing import Any, Generic, TypeAlias, TypeVar

from ...base.errors import NondeterministicProgramError, PathLimitError, ScheduleDependenceError
from ...base.randomness import (
    Key,
    check_bits,
    check_options,
    check_policy_index,
    check_probability,
)
from .guard import changed_states, global_states
from .rows import exact_probability, exact_row
from .uniform import ExactUniform, Unshared
from .witness import Law, Witness, WitnessStep, as_outcome, readable

__all__ = ["Engine", "dead_key"]

V = TypeVar("V", bound=Hashable)
T = TypeVar("T")



#: A law while the engine works on it: ``(numerators, denominator)``, the probability of an
#: outcome being its numerator over the common denominator, always reduced (the gcd of the
#: denominator and every numerator is 1), so that equal laws have equal representations.
_ILaw: TypeAlias = tuple[dict[Any, int], int]


@dataclass
class _Node:
    kind: str  # "categorical" | "bernoulli" | "uniform" | "choose"
    key: Key
    probs: list[Fraction] | None  # None for "choose"
    labels: list[str]


def _same_node(a: _Node, b: _Node) -> bool:
    """The same choice: kind, key, options and their probabilities."""
    return (a.kind == b.kind and a.labels == b.labels
            and (a.probs is b.probs or a.probs == b.probs) and a.key == b.key)


def _describe(node: _Node) -> str:
    key = "" if node.key is None else f" {node.key!r}"
    if node.probs is None:
        options = ", ".join(node.labels)
    else:
        options = ", ".join(f"{label} (p={readable(p)})"
                            for label, p in zip(node.labels, node.probs, strict=True))
    return f"{node.kind}{key} over [{options}]"


@dataclass
class _Checkpoint:
    """A fresh merge point at which the decoder offered a snapshot: where a later run that
    branches below it resumes (see the module docstring)."""

    depth: int  # choices made before it
    entries: int  # the ordinal of the decoder's invocation in the run (its entry merge points)
    scope_outer: tuple[int, ...]  # the choices made before that invocation
    intervals: dict[Key, tuple[Fraction, Fraction]]  # the live keyed intervals there
    unshared: int  # the uniforms drawn without a shared key before it (`_Replay.unshared`)
    snapshot: object  # the decoder's copy of its state


@dataclass
class _Event:
    kind: str  # "choice" | "ckpt" | "resume" | "merged" | "done"
    node: _Node | None = None
    key: Hashable = None
    value: Any = None
    resume: _Checkpoint | None = None  # a "ckpt" with a snapshot


class _Stop(Exception):
    pass


class _MemoKey:
    """A merge key with its hash computed once (a state holds `Fraction` s, which are slow to
    hash, and the key is looked up several times)."""

    __slots__ = ("hash", "key")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.hash = hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _MemoKey) and self.hash == other.hash
                and self.key == other.key)


def dead_key(key: Key, committed: tuple[int, ...]) -> bool:
    """A ``(role, position, context)`` key that no later decision can share: its position is
    decided, or its context contradicts the committed tokens."""
    if not (type(key) is tuple and len(key) == 3 and type(key[2]) is tuple):
        return False
    position, context = key[1], key[2]
    return bool(position < len(committed) or context[:len(committed)] != committed[:len(context)])


class _Replay:
    """One run of the program: replays ``prefix``, then takes option 0 at every new choice.

    While it replays, each choice must be the one recorded on the engine's stack when the path was
    first run (`NondeterministicProgramError` otherwise). With a ``jump``, the decoder that took
    its snapshot is restored to it when it enters, and the replay goes on from the jump's depth.
    """

    def __init__(self, engine: Engine[Any], prefix: tuple[int, ...],
                 jump: _Checkpoint | None = None) -> None:
        self.engine = engine
        self.prefix = prefix
        self.depth = 0
        self.taken: list[int] = []
        self.events: list[_Event] = []
        self.intervals: dict[Key, tuple[Fraction, Fraction]] = {}
        self.scope_outer: tuple[int, ...] = ()
        self.entries = 0
        self.jump = jump
        #: the protocol flag the decoders read: this interpreter resumes from snapshots
        self.resumes = engine.merge
        #: whether a ``choose`` may depend on its key (a policy function: an oblivious table keyed
        #: by the decision point), so a decoder must not merge paths whose keys would differ
        self.keyed_choices = engine.scheduler not in (None, "first", "last")
        self.unshared = 0  # uniforms drawn without a shared key so far (`Unshared`)

    def path(self) -> tuple[WitnessStep, ...]:
        """The choices this run has made so far."""
        replayed = min(self.depth, len(self.prefix))
        steps = [_step(node, c) for node, c in self.engine.stack[:replayed]]
        steps += [_step(ev.node, 0) for ev in self.events if ev.node is not None]
        return tuple(steps)

    # -- branching ------------------------------------------------------------------------------
    def _decide(self, node: _Node) -> int:
        d = self.depth
        self.depth += 1
        if self.depth > self.engine.max_choices:
            raise PathLimitError(
                f"one run made more than {self.engine.max_choices} choices; the program may not "
                "terminate (raise max_choices if it is just long)")
        if d < len(self.prefix):
            recorded = self.engine.stack[d][0]
            if not _same_node(recorded, node):
                self.depth = d
                raise self.engine.diverged(self, recorded, node)
            index = self.prefix[d]
        else:
            index = 0
            self.events.append(_Event("choice", node=node))
        self.taken.append(index)
        return index

    def categorical(self, weights: Sequence[Fraction | float], key: Key = None) -> int:
        values, probs_, labels, bins, inexact = self.engine.branches(weights)
        if inexact:
            self.engine.inexact = True
        if key is None or not self.engine.keyed or key not in self.intervals:
            # a fresh uniform: branch on the CDF's bins, remembered if the key is asked again
            pick = self._decide(_Node("categorical", key, probs_, labels))
            if key is not None and self.engine.keyed:
                self.intervals[key] = bins[pick]
            return values[pick]
        lo, hi = self.intervals[key]
        width = hi - lo
        outcomes: list[int] = []
        probs: list[Fraction] = []
        subs: list[tuple[Fraction, Fraction]] = []
        for i, (left, right) in zip(values, bins, strict=True):
            a, b = max(lo, left), min(hi, right)
            if a < b:
                outcomes.append(i)
                probs.append((b - a) / width)
                subs.append((a, b))
        pick = self._decide(_Node("categorical", key, probs, [str(i) for i in outcomes]))
        self.intervals[key] = subs[pick]
        return outcomes[pick]

    def bernoulli(self, p: Fraction | float, key: Key = None) -> bool:
        if type(p) is Fraction and (key is None or not self.engine.keyed
                                    or key not in self.intervals):
            # the usual coin, a Fraction and a fresh uniform: its options computed once per p
            coin = self.engine.coins.get(p)
            if coin is None:
                coin = self.engine.coins[p] = _coin(p)
            values, probs_, labels, intervals = coin
            pick = self._decide(_Node("bernoulli", key, probs_, labels))
            if key is not None and self.engine.keyed:
                self.intervals[key] = intervals[pick]
            return values[pick]
        p, inexact = exact_probability(p)
        if inexact:
            self.engine.inexact = True
        if key is not None and self.engine.keyed and key not in self.intervals:
            # a fresh uniform: u < p on [0, p), else [p, 1); an empty side is not an option
            values, probs_, labels, intervals = _coin(p)
            pick = self._decide(_Node("bernoulli", key, probs_, labels))
            self.intervals[key] = intervals[pick]
            return values[pick]
        if key is not None and self.engine.keyed:
            options, probs = _split(self.intervals[key], p)
            pick = self._decide(_Node("bernoulli", key, probs, [str(v) for v, _ in options]))
            self.intervals[key] = options[pick][1]
            return options[pick][0]
        values = [v for v, q in ((True, p), (False, 1 - p)) if q > 0]
        probs = [p if v else 1 - p for v in values]
        return values[self._decide(_Node("bernoulli", key, probs, [str(v) for v in values]))]

    def choose(self, options: Sequence[T], key: Key = None) -> T:
        check_options(options)
        if len(options) == 1:
            return options[0]
        policy = self.engine.scheduler
        if policy is not None:  # a fixed scheduler: no quantification
            index = 0 if policy == "first" else len(options) - 1 if policy == "last" \
                else check_policy_index(policy(options, key), len(options))
            return options[index]
        return options[self._decide(_Node("choose", key, None, [_label(o) for o in options]))]

    def uniform(self, key: Key = None, bits: int | None = None) -> ExactUniform:
        """A lazy uniform (`dsi_ref.audit.exact.uniform`): each comparison splits the interval
        of ``u(key)``; without a key (or ``keyed=False``) a uniform of its own."""
        bits = check_bits(bits)
        if key is None or not self.engine.keyed:
            self.unshared += 1
            key = Unshared(self.unshared)
        return ExactUniform(self, key, bits)

    def split_uniform(self, key: Key, threshold: Fraction, inexact: bool) -> bool:
        """Whether ``u(key) < threshold`` (``0 < threshold < 1``): no choice when the interval
        of ``u`` lies on one side, else a choice between its two parts, with their lengths."""
        if inexact:
            self.engine.inexact = True
        options, probs = _split(self.intervals.get(key, (_ZERO, _ONE)), threshold)
        if len(options) == 1:  # the interval lies on one side: no choice
            return options[0][0]
        pick = self._decide(_Node("uniform", key, probs, [f"u < {threshold}",
                                                          f"u >= {threshold}"]))
        self.intervals[key] = options[pick][1]
        return options[pick][0]

    # -- merging --------------------------------------------------------------------------------
    def merge_point(self, state: Hashable, *, entry: bool = False,
                    committed: tuple[int, ...] | None = None,
                    snapshot: Callable[[], object] | None = None,
                    restore: Callable[[object], bool] | None = None) -> None:
        if entry:
            self.scope_outer = tuple(self.taken)
            self.entries += 1
            jump = self.jump
            if (jump is not None and restore is not None and jump.entries == self.entries
                    and jump.scope_outer == self.scope_outer and self.depth <= jump.depth
                    and restore(jump.snapshot)):
                # the decoder is now where it was at the checkpoint: skip the choices before it
                self.jump = None
                self.depth = jump.depth
                self.taken = list(self.prefix[:jump.depth])
                self.intervals = dict(jump.intervals)
                self.unshared = jump.unshared
                return
        if committed is not None and self.intervals:
            for k in [k for k in self.intervals if dead_key(k, committed)]:
                del self.intervals[k]
        if not self.engine.merge or self.depth < len(self.prefix):
            return
        # the invocation (its ordinal and the choices before it) names the program point
        key = _MemoKey((self.entries, self.scope_outer, state,
                        frozenset(self.intervals.items())))
        if key in self.engine.memo:
            self.events.append(_Event("merged", key=key))
            raise _Stop
        resume = None if snapshot is None else _Checkpoint(
            self.depth, self.entries, self.scope_outer, dict(self.intervals), self.unshared,
            snapshot())
        self.events.append(_Event("ckpt", key=key, resume=resume))

    def resume_point(self, snapshot: Callable[[], object]) -> None:
        """A point inside a decoder's step where it can be resumed, without merging: a
        checkpoint with its snapshot (see `dsi_ref.base.randomness.merge_point`)."""
        if not self.engine.merge or self.depth < len(self.prefix):
            return
        self.events.append(_Event("resume", resume=_Checkpoint(
            self.depth, self.entries, self.scope_outer, dict(self.intervals), self.unshared,
            snapshot())))


_ZERO = Fraction(0)
_ONE = Fraction(1)

def _split(interval: tuple[Fraction, Fraction], threshold: Fraction
           ) -> tuple[list[tuple[bool, tuple[Fraction, Fraction]]], list[Fraction]]:
    """A uniform on ``interval`` compared with ``threshold``: the options ``(u < threshold,
    its sub-interval)`` whose sub-interval is not empty (``True`` first) and their
    probabilities, the sub-intervals' lengths over the interval's."""
    lo, hi = interval
    options: list[tuple[bool, tuple[Fraction, Fraction]]] = []
    if lo < min(hi, threshold):
        options.append((True, (lo, min(hi, threshold))))
    if max(lo, threshold) < hi:
        options.append((False, (max(lo, threshold), hi)))
    width = hi - lo
    return options, [(b - a) / width for _, (a, b) in options]


_Coin = tuple[list[bool], list[Fraction], list[str], list[tuple[Fraction, Fraction]]]


def _coin(p: Fraction) -> _Coin:
    """A Bernoulli draw on a fresh uniform: its outcomes (``True`` when ``u < p``, on
    ``[0, p)``; ``False`` on ``[p, 1)``; an empty side is not an option), probabilities, labels
    and intervals. ``p`` is valid (`check_probability`)."""
    check_probability(p)  # the rule `Sampler` applies
    values = [v for v, q in ((True, p), (False, 1 - p)) if q > 0]
    return (values, [p if v else 1 - p for v in values], [str(v) for v in values],
            [(_ZERO, p) if v else (p, _ONE) for v in values])


_Branches = tuple[list[int], list[Fraction], list[str], list[tuple[Fraction, Fraction]], bool]


def _branches(weights: Sequence[Fraction | float]) -> _Branches:
    """Outcomes with positive weight, their probabilities, labels, CDF bins in [0, 1), and
    whether a weight was a float."""
    exact, inexact = exact_row(weights)
    outcomes, probs, bins = [], [], []
    acc = Fraction(0)
    for i, p in enumerate(exact):
        if p > 0:
            outcomes.append(i)
            probs.append(p)
            bins.append((acc, acc + p))
            acc += p
        # zero-weight outcomes have empty bins
    return outcomes, probs, [str(i) for i in outcomes], bins, inexact


def _label(option: object) -> str:
    text = getattr(option, "label", None)
    return str(text) if text is not None else repr(option)


@dataclass
class Engine(Generic[V]):
    program: Callable[[Any], V]
    keyed: bool
    merge: bool
    max_paths: int
    max_choices: int
    first_witness: bool
    scheduler: Any = None
    check_states: bool = False  # the diagnostic run: compare the global states around each run
    max_runs: int | None = None  # a bound on the work (None: none)
    memo: dict[Hashable, _ILaw] = field(default_factory=dict)
    paths: int = 0
    runs: int = 0
    witnesses: list[Witness] = field(default_factory=list)
    stack: list[tuple[_Node, int]] = field(default_factory=list)
    # rows are usually the same tuple objects again and again (model tables): cache by identity,
    # holding a reference so that an id is never reused while cached
    row_cache: dict[int, tuple[object, _Branches]] = field(default_factory=dict)
    content_cache: dict[tuple[Fraction, ...], _Branches] = field(default_factory=dict)
    coins: dict[Fraction, _Coin] = field(default_factory=dict)  # `_coin` per probability
    inexact: bool = False  # some draw was given float weights or a float probability
    longest: int = 0  # the most probabilistic or scheduler choices made by one run
    current: _Replay | None = None
    violation: NondeterministicProgramError | None = None
    bar: Any = None  # the progress bar (tqdm) when asked for
    next_report: float = math.inf  # the run count at which the bar is next refreshed
    progress_every: int = 2048  # runs between two refreshes of the bar

    def report(self) -> None:
        """Refresh the progress bar (every ``progress_every`` runs)."""
        self.next_report = self.runs + self.progress_every
        if self.bar is not None:
            self.bar.update(self.runs - self.bar.n)
            self.bar.set_postfix(paths=self.paths, merged_states=len(self.memo), refresh=False)

    def branches(self, weights: Sequence[Fraction | float]) -> _Branches:
        """A categorical draw's options (outcomes, probabilities, labels, CDF bins, whether a
        weight was a float), cached by the row's identity (a tuple) or content (a list of
        `Fraction` s)."""
        if not isinstance(weights, tuple):
            if type(weights) is not list or not all(type(w) is Fraction for w in weights):
                return _branches(weights)
            # a row computed afresh at each draw (a residual): cached by content when it is
            # made of Fractions alone (equal Fractions are the same weight, whatever object)
            content = tuple(weights)
            known = self.content_cache.get(content)
            if known is None:
                known = self.content_cache[content] = _branches(content)
            return known
        hit = self.row_cache.get(id(weights))
        if hit is not None and hit[0] is weights:
            return hit[1]
        result = _branches(weights)
        self.row_cache[id(weights)] = (weights, result)
        return result

    # -- contract violations --------------------------------------------------------------------
    def outside(self, source: str) -> NondeterministicProgramError:
        """The error for a call of the entropy source ``source`` in the current run."""
        path = self.current.path() if self.current is not None else ()
        return NondeterministicProgramError(
            f"the program drew randomness outside rng: it called {source}, {_after(path)}; "
            "an exact law is only defined for a program whose every random choice goes through "
            "rng (rng.categorical / rng.bernoulli; or seed a generator of its own from such a "
            "draw)", source=source, path=path)

    def diverged(self, replay: _Replay, recorded: _Node, now: _Node
                 ) -> NondeterministicProgramError:
        """The error for a replay whose next choice is ``now`` where the path first made
        ``recorded``."""
        path = replay.path()
        return NondeterministicProgramError(
            "the program is not a deterministic function of its draws (hidden state or "
            f"randomness outside rng?): replaying a path, {_after(path)}, the next choice was "
            f"{_describe(recorded)} when the path was first run, and is now {_describe(now)}",
            path=path)

    def run(self, prefix: tuple[int, ...], jump: _Checkpoint | None = None) -> list[_Event]:
        """Run the program once, replaying ``prefix`` (from the checkpoint ``jump`` when it
        is restored); the events of the run after the prefix."""
        self.runs += 1
        if self.max_runs is not None and self.runs > self.max_runs:
            raise PathLimitError(f"more than {self.max_runs} runs of the program; shrink the "
                                 "problem or raise max_runs")
        if self.runs >= self.next_report:
            self.report()
        replay = self.current = _Replay(self, prefix, jump)
        before = global_states() if self.check_states else None
        value: object
        try:
            value = self.program(replay)
        except _Stop:
            value = _STOPPED
        except NondeterministicProgramError:
            raise
        except Exception:
            if self.violation is not None:  # the program turned our error into another one
                raise self.violation from None
            raise
        finally:
            if before is not None and (changed := changed_states(before, global_states())):
                raise NondeterministicProgramError(
                    f"the program drew randomness outside rng: the state of {changed[0]} "
                    f"changed during the run that made the choices {_steps(replay.path())}; draw "
                    "through rng",
                    source=changed[0], path=replay.path())
        if self.violation is not None:  # the program swallowed our error
            raise self.violation
        if replay.depth > self.longest:
            self.longest = replay.depth
        if value is _STOPPED:
            return replay.events
        value = as_outcome(value)
        if replay.depth < len(prefix):
            path = replay.path()
            raise NondeterministicProgramError(
                "the program made fewer choices on replay than before: it is not a deterministic "
                "function of its draws (hidden state or randomness outside rng?); replaying a "
                f"path of {len(prefix)} choices, it returned {value!r} {_after(path)}, before "
                f"the choice {_describe(self.stack[replay.depth][0])}", path=path)
        replay.events.append(_Event("done", value=value))
        return replay.events

    def solve(self) -> Law:
        """The program's law: the whole exploration, from a first run with no choice replayed."""
        numerators, denominator = self.explore((), self.run(()), 0, None)
        return {v: Fraction(n, denominator) for v, n in numerators.items() if n}

    def explore(self, prefix: tuple[int, ...], events: list[_Event], i: int,
                jump: _Checkpoint | None) -> _ILaw:
        """The law from event ``i`` of ``events`` (the run of ``prefix``) on; ``jump``: the
        deepest checkpoint with a snapshot on the path so far."""
        ev = events[i]
        if ev.kind == "done":
            self.paths += 1
            if self.paths > self.max_paths:
                raise PathLimitError(
                    f"more than {self.max_paths} paths; shrink the problem or raise max_paths "
                    "(a decoder of your own: see merge_point in docs/auditing-your-decoder.md)")
            return {ev.value: 1}, 1
        if ev.kind == "merged":
            return self.memo[ev.key]
        if ev.kind == "resume":
            return self.explore(prefix, events, i + 1, ev.resume)
        if ev.kind == "ckpt":
            if ev.key in self.memo:
                return self.memo[ev.key]
            law = self.explore(prefix, events, i + 1, jump if ev.resume is None else ev.resume)
            self.memo[ev.key] = law
            return law
        node = ev.node
        assert node is not None
        laws: list[_ILaw] = []
        for b in range(len(node.labels)):
            self.stack.append((node, b))
            if b == 0:
                law = self.explore(prefix + (0,), events, i + 1, jump)
            else:
                branch = prefix + (b,)
                law = self.explore(branch, self.run(branch, jump), 0, jump)
            self.stack.pop()
            laws.append(law)
        if node.probs is not None:
            return _mixture(node.probs, laws)
        for b in range(1, len(laws)):
            if laws[b] != laws[0]:
                witness = Witness(
                    path=tuple(_step(n, c) for n, c in self.stack),
                    options=(node.labels[0], node.labels[b]),
                    laws=(_fractions(laws[0]), _fractions(laws[b])),
                    path_probability=_product(n.probs[c] for n, c in self.stack
                                              if n.probs is not None))
                if self.first_witness:
                    raise ScheduleDependenceError(witness)
                self.witnesses.append(witness)
                break
        return laws[0]


_STOPPED = object()


def _steps(path: tuple[WitnessStep, ...]) -> str:
    return "[" + "; ".join(f"{i + 1}. {s}" for i, s in enumerate(path)) + "]"


def _after(path: tuple[WitnessStep, ...]) -> str:
    return f"after the choices {_steps(path)}" if path else "before its first choice"


def _step(node: _Node, choice: int) -> WitnessStep:
    prob = None if node.probs is None else node.probs[choice]
    return WitnessStep(node.kind, node.key, node.labels[choice], prob)


def _product(values: Any) -> Fraction:
    out = Fraction(1)
    for v in values:
        out *= v
    return out


def _fractions(law: _ILaw) -> Law:
    """An `_ILaw` as a law of `Fraction` s."""
    numerators, denominator = law
    return {v: Fraction(n, denominator) for v, n in numerators.items() if n}


def _mixture(weights: list[Fraction], laws: list[_ILaw]) -> _ILaw:
    """``Σ_i weights[i] · laws[i]``, over the least common denominator, reduced."""
    if len(laws) == 1 and weights[0] == 1:
        return laws[0]
    scales = [w.denominator * law[1] for w, law in zip(weights, laws, strict=True)]
    common = lcm(*scales)
    factor = weights[0].numerator * (common // scales[0])
    out = {v: factor * n for v, n in laws[0][0].items()}
    get = out.get
    for w, (numerators, _), scale in zip(weights[1:], laws[1:], scales[1:], strict=True):
        factor = w.numerator * (common // scale)
        for v, n in numerators.items():
            out[v] = get(v, 0) + factor * n
    g = gcd(common, *out.values())
    if g > 1:
        out = {v: n // g for v, n in out.items()}
        common //= g
    return out, common
