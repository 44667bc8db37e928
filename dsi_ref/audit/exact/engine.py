"""The replaying interpreter of `Randomness` behind `dsi_ref.audit.exact`: runs, choices and merges.

`Engine.run` runs the program once on a `Replay` (`dsi_ref.audit.exact.replay`), the
`Randomness` that replays a prefix of choices (checking that each replayed choice is the one
recorded when the path was first run) and takes option 0 at every new choice, recording it as an
event; `Engine.explore` walks the recorded
events depth first, re-running the program for every other option, and mixes the branches' laws
(probabilistic choices) or requires them equal (the scheduler's ``choose``: else a `Witness`).
Keyed draws split one uniform per key into intervals; ``merge_point`` calls let paths that reach
the same state share the law of their continuation.

Three things keep the exploration cheap, none of which changes a law:

* **Resuming instead of replaying.** A decoder that offers snapshots at its merge and resume
  points (`dsi_ref.base.exact_hooks`: its own ``snapshot``/``restore``, or, for a step-wise run,
  the generic ones of `dsi_ref.audit.exact.state`) is not replayed from its start for every
  branch: the engine keeps the snapshot taken at each fresh merge point (with the depth and the
  keyed intervals there), and a run that branches below it restores the deepest one on its path
  when the decoder enters (its entry point), then replays only the choices after it.
  Only with ``merge=True`` (``merge=False`` is the plain enumeration the cross-checks compare
  with). Sound because the program is a deterministic function of its choices: the decoder's
  state after the same choices is the snapshot; a restore refuses a snapshot of another
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
from .guard import changed_states, global_states
from .replay import (
    Branches,
    Checkpoint,
    Coin,
    Node,
    Replay,
    RunEvent,
    Stop,
    describe,
    step_of,
)
from .rows import exact_row
from .state import States
from .witness import Law, Witness, WitnessStep, as_outcome

__all__ = ["Engine"]

V = TypeVar("V", bound=Hashable)



#: A law while the engine works on it: ``(numerators, denominator)``, the probability of an
#: outcome being its numerator over the common denominator, always reduced (the gcd of the
#: denominator and every numerator is 1), so that equal laws have equal representations.
_ILaw: TypeAlias = tuple[dict[Any, int], int]


def _branches(weights: Sequence[Fraction | float]) -> Branches:
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
    stack: list[tuple[Node, int]] = field(default_factory=list)
    # rows are usually the same tuple objects again and again (model tables): cache by identity,
    # holding a reference so that an id is never reused while cached
    row_cache: dict[int, tuple[object, Branches]] = field(default_factory=dict)
    content_cache: dict[tuple[Fraction, ...], Branches] = field(default_factory=dict)
    coins: dict[Fraction, Coin] = field(default_factory=dict)  # `coin` per probability
    states: States = field(default_factory=States)  # the readers of step-wise runs' states
    inexact: bool = False  # some draw was given float weights or a float probability
    longest: int = 0  # the most probabilistic or scheduler choices made by one run
    current: Replay | None = None
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

    def branches(self, weights: Sequence[Fraction | float]) -> Branches:
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

    def diverged(self, replay: Replay, recorded: Node, now: Node
                 ) -> NondeterministicProgramError:
        """The error for a replay whose next choice is ``now`` where the path first made
        ``recorded``."""
        path = replay.path()
        return NondeterministicProgramError(
            "the program is not a deterministic function of its draws (hidden state or "
            f"randomness outside rng?): replaying a path, {_after(path)}, the next choice was "
            f"{describe(recorded)} when the path was first run, and is now {describe(now)}",
            path=path)

    def run(self, prefix: tuple[int, ...], jump: Checkpoint | None = None) -> list[RunEvent]:
        """Run the program once, replaying ``prefix`` (from the checkpoint ``jump`` when it
        is restored); the events of the run after the prefix."""
        self.runs += 1
        if self.max_runs is not None and self.runs > self.max_runs:
            raise PathLimitError(f"more than {self.max_runs} runs of the program; shrink the "
                                 "problem or raise max_runs")
        if self.runs >= self.next_report:
            self.report()
        replay = self.current = Replay(self, prefix, jump)
        before = global_states() if self.check_states else None
        value: object
        try:
            value = self.program(replay)
        except Stop:
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
                f"the choice {describe(self.stack[replay.depth][0])}", path=path)
        replay.events.append(RunEvent("done", value=value))
        return replay.events

    def solve(self) -> Law:
        """The program's law: the whole exploration, from a first run with no choice replayed."""
        numerators, denominator = self.explore((), self.run(()), 0, None)
        return {v: Fraction(n, denominator) for v, n in numerators.items() if n}

    def explore(self, prefix: tuple[int, ...], events: list[RunEvent], i: int,
                jump: Checkpoint | None) -> _ILaw:
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
                    path=tuple(step_of(n, c) for n, c in self.stack),
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
