"""One run of a program under the exact engine: `Replay`, the `Randomness` that replays a path.

`Replay` replays a prefix of choices (checking that each replayed choice is the one recorded when
the path was first run) and takes option 0 at every new choice, recording it as a `RunEvent` for
the engine (`dsi_ref.audit.exact.engine`) to branch on. Keyed draws split one uniform per key into
intervals. It is also the checker's offer to the decoder (`dsi_ref.base.exact_hooks.ExactHooks`):
merge points end a run whose state the engine has met before, and snapshots taken at merge and
resume points let a later run start where this one was (free-form decoders give their own
snapshot and restore; step-wise runs are read generically, `dsi_ref.audit.exact.state`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol, TypeAlias, TypeVar

from ...base.errors import NondeterministicProgramError, PathLimitError
from ...base.exact_hooks import Checkpointing, ExactHooks, StepRun
from ...base.randomness import (
    Key,
    check_bits,
    check_options,
    check_policy_index,
    check_probability,
)
from .rows import exact_probability
from .state import Layout, Reader, States, same_parts
from .uniform import ExactUniform, Unshared
from .witness import WitnessStep, readable

__all__ = ["Branches", "Checkpoint", "Coin", "Explorer", "MemoKey", "Node", "Replay", "RunEvent",
           "Stop", "coin", "dead_key", "describe", "same_node", "step_of"]

T = TypeVar("T")

#: A categorical draw's options: outcomes with positive weight, their probabilities, labels, CDF
#: bins in [0, 1), and whether a weight was a float.
Branches: TypeAlias = tuple[list[int], list[Fraction], list[str], list[tuple[Fraction, Fraction]],
                            bool]


@dataclass
class Node:
    kind: str  # "categorical" | "bernoulli" | "uniform" | "choose"
    key: Key
    probs: list[Fraction] | None  # None for "choose"
    labels: list[str]


def same_node(a: Node, b: Node) -> bool:
    """The same choice: kind, key, options and their probabilities."""
    return (a.kind == b.kind and a.labels == b.labels
            and (a.probs is b.probs or a.probs == b.probs) and a.key == b.key)


def describe(node: Node) -> str:
    """``node`` for an error message: its kind, its key, and each option with its probability,
    e.g. ``categorical ('draft', 0, ()) over [0 (p=1/3), 1 (p=2/3)]``."""
    key = "" if node.key is None else f" {node.key!r}"
    if node.probs is None:
        options = ", ".join(node.labels)
    else:
        options = ", ".join(f"{label} (p={readable(p)})"
                            for label, p in zip(node.labels, node.probs, strict=True))
    return f"{node.kind}{key} over [{options}]"


@dataclass
class Checkpoint:
    """A fresh merge point at which the decoder offered a snapshot: where a later run that
    branches below it resumes (see the module docstring)."""

    depth: int  # choices made before it
    entries: int  # the ordinal of the decoder's invocation in the run (its entry merge points)
    scope_outer: tuple[int, ...]  # the choices made before that invocation
    intervals: dict[Key, tuple[Fraction, Fraction]]  # the live keyed intervals there
    unshared: int  # the uniforms drawn without a shared key before it (`Replay.unshared`)
    snapshot: object  # the decoder's copy of its state


@dataclass
class RunEvent:
    kind: str  # "choice" | "ckpt" | "resume" | "merged" | "done"
    node: Node | None = None
    key: Hashable = None
    value: Any = None
    resume: Checkpoint | None = None  # a "ckpt" with a snapshot


class Stop(Exception):
    pass


class MemoKey:
    """A merge key with its hash computed once (a state holds `Fraction` s, which are slow to
    hash, and the key is looked up several times)."""

    __slots__ = ("hash", "key")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.hash = hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, MemoKey) and self.hash == other.hash
                and self.key == other.key)


def dead_key(key: Key, committed: tuple[int, ...]) -> bool:
    """A ``(role, position, context)`` key that no later decision can share: its position is
    decided, or its context contradicts the committed tokens."""
    if not (type(key) is tuple and len(key) == 3 and type(key[2]) is tuple):
        return False
    position, context = key[1], key[2]
    return bool(position < len(committed) or context[:len(committed)] != committed[:len(context)])


class Explorer(Protocol):
    """What a `Replay` reads and writes of the engine that runs it
    (`dsi_ref.audit.exact.engine.Engine`)."""

    keyed: bool  # honour keys
    merge: bool  # merge points and snapshots are used
    max_choices: int
    scheduler: Any  # None (quantify over ``choose``), "first", "last" or a policy
    stack: list[tuple[Node, int]]  # the choices of the path being explored
    memo: dict[Hashable, Any]  # the laws of the merge states met so far
    coins: dict[Fraction, Coin]  # `coin` per probability
    inexact: bool  # some draw was given float weights or a float probability
    states: States  # the readers of step-wise runs' states

    def branches(self, weights: Sequence[Fraction | float]) -> Branches:
        """A categorical draw's options."""
        ...

    def diverged(self, replay: Replay, recorded: Node, now: Node
                 ) -> NondeterministicProgramError:
        """The error for a replay that made another choice than the recorded one."""
        ...


class StepSnapshot:
    """A snapshot of a step-wise run: its class and invocation (restored only into a run of the
    same), its fields (`dsi_ref.audit.exact.state.Layout.snapshot`) and the ids of its history
    lists' contents there."""

    __slots__ = ("cls", "fields", "history", "invocation")

    def __init__(self, cls: type, invocation: tuple[object, ...], fields: tuple[object, ...],
                 history: dict[str, tuple[int, int]]) -> None:
        self.cls = cls
        self.invocation = invocation
        self.fields = fields
        self.history = history


class _Stepping:
    """What a `Replay` keeps about one step-wise run, from its `ExactHooks.enter` on."""

    __slots__ = ("checkpointing", "cls", "history", "invocation", "layout", "plain",
                 "read", "states")

    def __init__(self, cls: type, checkpointing: Checkpointing, layout: Layout,
                 plain: bool, invocation: tuple[object, ...],
                 read: Reader, states: States) -> None:
        self.cls = cls
        self.checkpointing = checkpointing
        self.layout = layout
        #: the run's own code, a rule without state, nothing added: no `States.extras`
        self.plain = plain
        self.invocation = invocation
        self.read = read  # its merge-state reader
        self.states = states
        self.history: dict[str, tuple[int, int]] = {}  # `States.prefix_id` of its history lists

    def ids(self, items: list[object], name: str) -> int:
        """The id of the contents of the history list ``name`` (``items``), kept up to date
        from the last one (`States.prefix_id`)."""
        ident = self.history[name] = self.states.prefix_id(items,
                                                           self.history.get(name, (0, 0)))
        return ident[0]


#: The history ids of a snapshot of a run without history lists (never changed).
_NO_HISTORY: dict[str, tuple[int, int]] = {}


class Replay(ExactHooks):
    """One run of the program: replays ``prefix``, then takes option 0 at every new choice.

    While it replays, each choice must be the one recorded on the engine's stack when the path was
    first run (`NondeterministicProgramError` otherwise). With a ``jump``, the decoder that took
    its snapshot is restored to it when it enters, and the replay goes on from the jump's depth.
    """

    def __init__(self, engine: Explorer, prefix: tuple[int, ...],
                 jump: Checkpoint | None = None) -> None:
        self.engine = engine
        self.prefix = prefix
        self.depth = 0
        self.taken: list[int] = []
        self.events: list[RunEvent] = []
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
        self.stepping: dict[int, _Stepping] = {}  # per step-wise run, by its id
        self.last: tuple[int, _Stepping] | None = None  # the step-wise run met last, by its id

    def path(self) -> tuple[WitnessStep, ...]:
        """The choices this run has made so far."""
        replayed = min(self.depth, len(self.prefix))
        steps = [step_of(node, c) for node, c in self.engine.stack[:replayed]]
        steps += [step_of(ev.node, 0) for ev in self.events if ev.node is not None]
        return tuple(steps)

    # -- branching ------------------------------------------------------------------------------
    def _decide(self, node: Node) -> int:
        d = self.depth
        self.depth += 1
        if self.depth > self.engine.max_choices:
            raise PathLimitError(
                f"one run made more than {self.engine.max_choices} choices; the program may not "
                "terminate (raise max_choices if it is just long)")
        if d < len(self.prefix):
            recorded = self.engine.stack[d][0]
            if not same_node(recorded, node):
                self.depth = d
                raise self.engine.diverged(self, recorded, node)
            index = self.prefix[d]
        else:
            index = 0
            self.events.append(RunEvent("choice", node=node))
        self.taken.append(index)
        return index

    def categorical(self, weights: Sequence[Fraction | float], key: Key = None) -> int:
        """An index ``i`` drawn with probability ``w_i / Σ w`` (``weights`` ``w``; a zero weight
        is no option): a choice over the indices of positive weight. With a key, the draw is the
        inverse CDF at ``u(key)``: a fresh key branches on the CDF's bins ``[W_{i-1}, W_i)``
        (cumulative weights over ``Σ w``) and remembers the bin taken; a key drawn before keeps
        only the bins that meet the interval ``u(key)`` is known to lie in, each with the
        probability of its part of that interval."""
        values, probs_, labels, bins, inexact = self.engine.branches(weights)
        if inexact:
            self.engine.inexact = True
        if key is None or not self.engine.keyed or key not in self.intervals:
            # a fresh uniform: branch on the CDF's bins, remembered if the key is asked again
            pick = self._decide(Node("categorical", key, probs_, labels))
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
        pick = self._decide(Node("categorical", key, probs, [str(i) for i in outcomes]))
        self.intervals[key] = subs[pick]
        return outcomes[pick]

    def bernoulli(self, p: Fraction | float, key: Key = None) -> bool:
        """``u < p``: ``True`` with probability ``p``, ``False`` with ``1 − p`` (a side of
        probability 0 is no option). With a key, ``u`` is ``u(key)``: a fresh key remembers the
        side taken, ``[0, p)`` or ``[p, 1)``; a key drawn before splits the interval it is known
        to lie in at ``p``, each part with its share of the interval's length."""
        if type(p) is Fraction and (key is None or not self.engine.keyed
                                    or key not in self.intervals):
            # the usual coin, a Fraction and a fresh uniform: its options computed once per p
            known = self.engine.coins.get(p)
            if known is None:
                known = self.engine.coins[p] = coin(p)
            values, probs_, labels, intervals = known
            pick = self._decide(Node("bernoulli", key, probs_, labels))
            if key is not None and self.engine.keyed:
                self.intervals[key] = intervals[pick]
            return values[pick]
        p, inexact = exact_probability(p)
        if inexact:
            self.engine.inexact = True
        if key is not None and self.engine.keyed and key not in self.intervals:
            # a fresh uniform: u < p on [0, p), else [p, 1); an empty side is not an option
            values, probs_, labels, intervals = coin(p)
            pick = self._decide(Node("bernoulli", key, probs_, labels))
            self.intervals[key] = intervals[pick]
            return values[pick]
        if key is not None and self.engine.keyed:
            options, probs = _split(self.intervals[key], p)
            pick = self._decide(Node("bernoulli", key, probs, [str(v) for v, _ in options]))
            self.intervals[key] = options[pick][1]
            return options[pick][0]
        values = [v for v, q in ((True, p), (False, 1 - p)) if q > 0]
        probs = [p if v else 1 - p for v in values]
        return values[self._decide(Node("bernoulli", key, probs, [str(v) for v in values]))]

    def choose(self, options: Sequence[T], key: Key = None) -> T:
        """The scheduler's pick among ``options``: with a fixed scheduler (``"first"``,
        ``"last"`` or a policy ``(options, key) -> index``) its pick, no choice; else a
        nondeterministic choice over every option, which the engine quantifies (every branch
        must give the same law). One option is no choice."""
        check_options(options)
        if len(options) == 1:
            return options[0]
        policy = self.engine.scheduler
        if policy is not None:  # a fixed scheduler: no quantification
            index = 0 if policy == "first" else len(options) - 1 if policy == "last" \
                else check_policy_index(policy(options, key), len(options))
            return options[index]
        return options[self._decide(Node("choose", key, None, [_label(o) for o in options]))]

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
        pick = self._decide(Node("uniform", key, probs, [f"u < {threshold}",
                                                          f"u >= {threshold}"]))
        self.intervals[key] = options[pick][1]
        return options[pick][0]

    # -- merging (free-form decoders) ----------------------------------------------------------
    def merge_point(self, state: Hashable, *, entry: bool = False,
                    committed: tuple[int, ...] | None = None,
                    snapshot: Callable[[], object] | None = None,
                    restore: Callable[[object], bool] | None = None) -> None:
        """A merge point (`dsi_ref.base.exact_hooks.ExactHooks.merge_point`)."""
        if entry and self._enter(restore):
            return
        self._merge(state, committed, snapshot)

    def resume_point(self, snapshot: Callable[[], object]) -> None:
        """A point inside a decoder's step where it can be resumed, without merging: a
        checkpoint with its snapshot (see `dsi_ref.base.randomness.merge_point`)."""
        if not self.engine.merge or self.depth < len(self.prefix):
            return
        self.events.append(RunEvent("resume", resume=Checkpoint(
            self.depth, self.entries, self.scope_outer, dict(self.intervals), self.unshared,
            snapshot())))

    def _enter(self, restore: Callable[[object], bool] | None) -> bool:
        """An invocation's entry: it is named by its ordinal and the choices before it; True
        when ``restore`` took back the snapshot of the checkpoint this run jumps to (the
        decoder is now where it was there: the choices before it are skipped)."""
        self.scope_outer = tuple(self.taken)
        self.entries += 1
        jump = self.jump
        if (jump is not None and restore is not None and jump.entries == self.entries
                and jump.scope_outer == self.scope_outer and self.depth <= jump.depth
                and restore(jump.snapshot)):
            self.jump = None
            self.depth = jump.depth
            self.taken = list(self.prefix[:jump.depth])
            self.intervals = dict(jump.intervals)
            self.unshared = jump.unshared
            return True
        return False

    def _merge(self, state: Hashable, committed: tuple[int, ...] | None,
               snapshot: Callable[[], object] | None) -> None:
        if committed is not None and self.intervals:
            for k in [k for k in self.intervals if dead_key(k, committed)]:
                del self.intervals[k]
        if not self.engine.merge or self.depth < len(self.prefix):
            return
        # the invocation (its ordinal and the choices before it) names the program point
        key = MemoKey((self.entries, self.scope_outer, state,
                       frozenset(self.intervals.items())))
        if key in self.engine.memo:
            self.events.append(RunEvent("merged", key=key))
            raise Stop
        resume = None if snapshot is None else Checkpoint(
            self.depth, self.entries, self.scope_outer, dict(self.intervals), self.unshared,
            snapshot())
        self.events.append(RunEvent("ckpt", key=key, resume=resume))

    # -- step-wise runs, read generically (`dsi_ref.audit.exact.state`) --------------------------
    def enter(self, run: StepRun, checkpointing: Checkpointing) -> None:
        """A step-wise run's invocation starts: restore the snapshot this run jumps to, when it
        is one of this invocation (`dsi_ref.base.exact_hooks.ExactHooks.enter`)."""
        states = self.engine.states
        cls = type(run)
        layout, read = states.entry(cls, checkpointing)
        built = run.built_on()
        # whatever a subclass added beside the fields and the parts (run's own code adds
        # nothing later: only code the run does not own, or a rule with state, needs a look at
        # every merge point)
        plain = states.plain(run, layout, built, checkpointing)
        # (it keeps no reference to the parts: one of them is this `Replay`, and a cycle would
        # leave every `Replay` of the exploration to the garbage collector)
        stepping = _Stepping(cls, checkpointing, layout, plain, run.invocation(), read, states)
        # kept by the run's id, not the run: the run holds this `Replay` (its rng), and a cycle
        # would keep every run of the exploration alive until a full collection
        self.stepping[id(run)] = stepping
        self.last = (id(run), stepping)
        self._enter((lambda saved: self._restore(run, stepping, saved))
                    if checkpointing.resumable and self.engine.merge else None)

    def merge(self, run: StepRun) -> None:
        """A merge point of a step-wise run (`dsi_ref.base.exact_hooks.ExactHooks.merge`)."""
        stepping = self._stepping(run)
        layout = stepping.layout
        committed = (None if layout.committed is None
                     else tuple(getattr(run, layout.committed)))
        if not self.engine.merge or self.depth < len(self.prefix):
            self._merge(None, committed, None)  # forgets dead keys; nothing else while replaying
            return
        checkpointing = stepping.checkpointing
        state: Hashable = stepping.read(run, None, stepping.ids)
        if not stepping.plain:
            state = (state, self.engine.states.extras(run, layout, run.built_on(),
                                                      checkpointing))
        self._merge(state, committed,
                    (lambda: self._snapshot(run, stepping)) if checkpointing.resumable else None)

    def pause(self, run: StepRun) -> None:
        """A resume point of a resumable step-wise run (`ExactHooks.pause`)."""
        if not self.engine.merge or self.depth < len(self.prefix):
            return
        stepping = self._stepping(run)
        if stepping.checkpointing.resumable:
            self.events.append(RunEvent("resume", resume=Checkpoint(
                self.depth, self.entries, self.scope_outer, dict(self.intervals), self.unshared,
                self._snapshot(run, stepping))))

    def _stepping(self, run: StepRun) -> _Stepping:
        last = self.last
        if last is not None and last[0] == id(run):
            return last[1]
        known = self.stepping.get(id(run))
        if known is None or known.cls is not type(run):
            raise RuntimeError(f"{type(run).__name__} offered a merge or resume point before "
                               "ExactHooks.enter (a step-wise run enters first)")
        self.last = (id(run), known)
        return known

    def _snapshot(self, run: StepRun, stepping: _Stepping) -> StepSnapshot:
        history = stepping.history
        return StepSnapshot(type(run), stepping.invocation, stepping.layout.snapshot(run),
                            dict(history) if history else _NO_HISTORY)

    def _restore(self, run: StepRun, stepping: _Stepping, saved: object) -> bool:
        if not (isinstance(saved, StepSnapshot) and saved.cls is type(run)
                and same_parts(saved.invocation, stepping.invocation)):
            return False
        stepping.layout.restore(run, saved.fields)
        stepping.history = dict(saved.history)
        return True


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


Coin = tuple[list[bool], list[Fraction], list[str], list[tuple[Fraction, Fraction]]]


def coin(p: Fraction) -> Coin:
    """A Bernoulli draw on a fresh uniform: its outcomes (``True`` when ``u < p``, on
    ``[0, p)``; ``False`` on ``[p, 1)``; an empty side is not an option), probabilities, labels
    and intervals. ``p`` is valid (`check_probability`)."""
    check_probability(p)  # the rule `Sampler` applies
    values = [v for v, q in ((True, p), (False, 1 - p)) if q > 0]
    return (values, [p if v else 1 - p for v in values], [str(v) for v in values],
            [(_ZERO, p) if v else (p, _ONE) for v in values])




def _label(option: object) -> str:
    text = getattr(option, "label", None)
    return str(text) if text is not None else repr(option)



def step_of(node: Node, choice: int) -> WitnessStep:
    """Option ``choice`` of ``node`` as a step of a witness path: the kind, the key, the
    option's label and its probability (``None`` for a scheduler's ``choose``)."""
    prob = None if node.probs is None else node.probs[choice]
    return WitnessStep(node.kind, node.key, node.labels[choice], prob)
