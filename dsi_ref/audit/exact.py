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
* Float weights are read as the `Fraction` of their binary value, normalised by their exact sum
  (`exact_probabilities`, the one treatment of float rows that `target_distribution` shares).

Laws are ``dict[value, Fraction]`` with zero-probability outcomes left out.

**Randomness outside ``rng``.** The law is only defined for a program that is a deterministic
function of the choices it makes through ``rng``; anything else gets
`NondeterministicProgramError`, never a verdict. Three detectors, all cheap on the path of a
well-behaved program:

1. *Replays are checked*: the choices a replay makes before it branches must be the choices (kind,
   key, options and probabilities) recorded when that path was first run; a different or a
   missing choice raises at once, naming the first choice that differed and the path before it.
2. *The entropy sources are guarded* while the program runs (in the auditing thread only, and
   restored afterwards, exceptions included): a call of ``os.urandom``/``os.getrandom``, of
   ``secrets``, of ``random.SystemRandom`` or of ``numpy.random.default_rng()`` without a seed
   raises, naming the function and the path so far. The error is also recorded, so a program
   that swallows exceptions is caught when its run ends.
3. *The global generators' states are compared*: the state of Python's ``random``, of numpy's
   legacy global ``RandomState`` (``np.random.random()``, ``np.random.seed``, ...) and, when
   torch is already imported, of torch's global generator (``torch.rand``, ``Tensor.uniform_``,
   ``torch.manual_seed``, ...), before and after the exploration, and after any error. A draw
   changes them, through whatever name it was made; then a second, diagnostic exploration
   compares the states around every run and the error names the generator and the path of the
   first run that changed it.

Seeded generators the program makes for itself (``np.random.default_rng(seed)``,
``random.Random(seed)``, a torch ``Generator``) are deterministic and allowed, as is numpy's and
torch's arithmetic. The happy path pays two snapshots of the states and a dozen attribute swaps
per `exact_distribution` call (tens of microseconds), and one comparison per replayed choice.

What no detector sees: entropy read through an alias captured before the audit (``from os import
urandom``), or a fresh unseeded generator (``np.random.PCG64()``, ``random.Random()``), whose
values change neither a choice nor a global state, only the returned value. Draw through ``rng``.
"""

from __future__ import annotations

import ctypes
import math
import numbers
import os
import random
import secrets
import sys
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from typing import Any, ClassVar, Generic, TypeAlias, TypeVar, cast

import numpy as np
from tqdm import tqdm

from ..base.errors import (
    InvalidAuditError,
    NondeterministicProgramError,
    PathLimitError,
    ScheduleDependenceError,
)
from ..base.randomness import (
    Key,
    SchedulerPolicy,
    check_options,
    check_policy_index,
    check_probability,
    check_weights,
)
from ..base.validate import check_bool, check_choice, check_int

__all__ = [
    "ExactLaw",
    "Law",
    "NondeterministicProgramError",
    "PathLimitError",
    "ScheduleDependenceError",
    "Witness",
    "WitnessStep",
    "as_outcome",
    "check_program",
    "exact_distribution",
    "exact_expectation",
    "exact_law",
    "exact_probabilities",
    "exact_row",
    "readable",
    "total_variation",
]

V = TypeVar("V", bound=Hashable)
T = TypeVar("T")
Law: TypeAlias = dict[Any, Fraction]

#: Default bound on the number of complete paths explored before giving up.
DEFAULT_MAX_PATHS = 2_000_000
#: Default bound on the number of choices one run of the program may make.
DEFAULT_MAX_CHOICES = 100_000
#: With ``progress=True``, the bar is refreshed once per this many runs of the program (one
#: comparison per run on the hot path, shared with the ``max_paths`` check).
PROGRESS_EVERY = 2048



@dataclass(frozen=True)
class WitnessStep:
    """One choice on a witness path: what was chosen, with which probability (None: scheduler)."""

    kind: str  # "categorical" | "bernoulli" | "choose"
    key: Key
    chosen: str
    probability: Fraction | None

    def __str__(self) -> str:
        who = "scheduler" if self.probability is None else f"p={readable(self.probability)}"
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
        return (f"schedule-dependent: after the path (probability "
                f"{readable(self.path_probability)})\n"
                f"{steps}\n  the scheduler's options {self.options[0]} and {self.options[1]} "
                f"lead to different laws;\n  e.g. P({worst!r}) = {readable(pa)} vs "
                f"{readable(pb)} (TV = {readable(total_variation(*self.laws))})")


#: Largest denominator `readable` prints as a fraction.
READABLE_DENOMINATOR = 10_000


def readable(x: Fraction | float | int) -> str:
    """A probability for a message: a small fraction as is (``3/8``), anything else as a short
    decimal prefixed with ``~`` (``~0.405063``, ``~3.7e-17``). For display only: comparisons
    stay exact.

    >>> readable(Fraction(3, 8)), readable(Fraction(1, 3) + Fraction(1, 10**20))
    ('3/8', '~0.333333')
    """
    if isinstance(x, Fraction | int) and Fraction(x).denominator <= READABLE_DENOMINATOR:
        return str(x)
    return f"~{float(x):.6g}"


def total_variation(p: Law, q: Law) -> Fraction:
    """Total-variation distance ``(1/2) Σ_x |p(x) − q(x)|`` between two exact laws.

    Raises:
        InvalidAuditError: ``p`` or ``q`` is not a mapping ``outcome -> probability``.
    """
    for name, law in (("p", p), ("q", q)):
        if not isinstance(law, Mapping):
            raise InvalidAuditError(f"total_variation's {name} must be a law (a mapping outcome "
                                    f"-> probability, e.g. from exact_distribution), got "
                                    f"{law!r}")
    keys = set(p) | set(q)
    return sum((abs(p.get(x, Fraction(0)) - q.get(x, Fraction(0))) for x in keys),
               Fraction(0)) / 2


def as_outcome(value: Any, *, source: str = "the program returned") -> Hashable:
    """A program's return value as an outcome of its law: a `Run` (anything with ``tokens``)
    counts as its tokens; a list, a numpy array or a torch tensor becomes a tuple of Python
    scalars (nested: a tuple of tuples; a tensor hashes by identity and an array not at all, so
    neither can be an outcome itself); any other hashable value is kept as is. The statistical
    audit converts its samples the same way. Anything still unhashable is refused.

    ``source`` starts the error message (who returned the value). This is the one conversion
    of outcomes: the statistical audit uses it for its samples.

    Raises:
        InvalidAuditError: an unhashable value that is none of the above (a dict, a set...).

    >>> as_outcome([1, 0]), as_outcome(np.array([[1, 0]])), as_outcome("a")
    ((1, 0), ((1, 0),), 'a')
    """
    if type(value) is tuple and all(type(v) is int for v in value):
        return value  # the usual outcome: nothing to convert
    value = getattr(value, "tokens", value)
    if type(value).__module__.split(".")[0] in ("numpy", "torch") and hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return tuple(as_outcome(v, source=source) for v in value)
    try:
        hash(value)
    except TypeError:
        raise InvalidAuditError(f"{source} an unhashable value {value!r} "
                                f"({type(value).__name__}); return a tuple of tokens (e.g. "
                                "run.tokens), a list or an array") from None
    return cast(Hashable, value)


def check_program(program: object) -> None:
    """Refuse (`InvalidAuditError`) a ``program`` that is not a callable ``rng -> value``."""
    if not callable(program):
        raise InvalidAuditError(f"the program must be a callable rng -> outcome (e.g. lambda "
                                f"rng: decoder(..., rng).tokens), got {program!r}")


# ---------------------------------------------------------------------------------------------
# One treatment of float weights


def exact_probabilities(weights: Sequence[Fraction | float]) -> list[Fraction]:
    """The law a row of weights stands for, exactly: each weight over their sum, as `Fraction`s.

    A float weight is read as the `Fraction` of its binary value (``Fraction(0.25) == 1/4``;
    ``Fraction(1/3)`` is the double nearest 1/3, exactly), and the row is divided by its exact
    sum, so a float row that sums to ``1 ± 1e-16`` still stands for a law. This is the one
    treatment of float rows on both sides of an exact audit: the enumerator reads every
    ``rng.categorical`` this way, and `dsi_ref.target_distribution` reads the target's rows this
    way, so a float model's own autoregressive law *equals* its target law. (Float arithmetic
    *inside* a decoder, e.g. ``min(1, p/q)``, still rounds: `dsi_ref.check_lossless` reports that
    noise apart, see its ``float_tolerance``.)

    Raises:
        InvalidParameterError: a weight that is not a finite number >= 0 (NaN, inf, a ``bool``,
            a string), no positive weight, or a float sum that overflows: the rule of `Sampler`
            (`dsi_ref.base.randomness.check_weights`), so both interpreters refuse alike (a
            row of `Fraction`s >= 0 is read exactly, however large: it is not checked again).

    >>> exact_probabilities([0.25, 0.75]), exact_probabilities([Fraction(1), 3])
    ([Fraction(1, 4), Fraction(3, 4)], [Fraction(1, 4), Fraction(3, 4)])
    """
    return exact_row(weights)[0]


#: Exact numbers: ints, numpy's integers, Fractions (a float is not one).
_RATIONAL: tuple[type[Any], ...] = (numbers.Rational,)


def exact_row(weights: Sequence[Fraction | float]) -> tuple[list[Fraction], bool]:
    """`exact_probabilities`, and whether some weight was a float (not a rational number).

    >>> exact_row((0.5, 0.5)), exact_row((Fraction(1, 2), Fraction(1, 2)))
    (([Fraction(1, 2), Fraction(1, 2)], True), ([Fraction(1, 2), Fraction(1, 2)], False))
    """
    if all(type(w) is Fraction and w >= 0 for w in weights):  # the usual row: valid if total > 0
        exact = list(cast(Sequence[Fraction], weights))
        total = sum(exact, Fraction(0))
        if total > 0:
            return (exact if total == 1 else [w / total for w in exact]), False
    check_weights(weights)  # the rule `Sampler` applies, so both interpreters refuse alike
    exact = []
    inexact = False
    for w in weights:
        if isinstance(w, Fraction):
            exact.append(w)
        elif isinstance(w, _RATIONAL):
            exact.append(Fraction(w))
        else:
            inexact = True
            exact.append(Fraction(float(w)))
    total = sum(exact, Fraction(0))
    if total != 1:
        exact = [w / total for w in exact]
    return exact, inexact


def _exact_probability(p: Fraction | float) -> tuple[Fraction, bool]:
    """A Bernoulli probability as a `Fraction` (a float: its binary value), and whether it was
    a float."""
    check_probability(p)  # the rule `Sampler` applies
    if isinstance(p, Fraction):
        return p, False
    if isinstance(p, _RATIONAL):
        return Fraction(p), False
    return Fraction(float(p)), True


# ---------------------------------------------------------------------------------------------
# The replaying interpreter


@dataclass
class _Node:
    kind: str  # "categorical" | "bernoulli" | "choose"
    key: Key
    probs: list[Fraction] | None  # None for "choose"
    labels: list[str]


def _same_node(a: _Node, b: _Node) -> bool:
    """The same choice: kind, key, options and their probabilities."""
    return a.kind == b.kind and a.labels == b.labels and a.probs == b.probs and a.key == b.key


def _describe(node: _Node) -> str:
    key = "" if node.key is None else f" {node.key!r}"
    if node.probs is None:
        options = ", ".join(node.labels)
    else:
        options = ", ".join(f"{label} (p={readable(p)})"
                            for label, p in zip(node.labels, node.probs, strict=True))
    return f"{node.kind}{key} over [{options}]"


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
    """One run of the program: replays ``prefix``, then takes option 0 at every new choice.

    While it replays, each choice must be the one recorded on the engine's stack when the path was
    first run (`NondeterministicProgramError` otherwise)."""

    def __init__(self, engine: _Engine[Any], prefix: tuple[int, ...]) -> None:
        self.engine = engine
        self.prefix = prefix
        self.depth = 0
        self.taken: list[int] = []
        self.events: list[_Event] = []
        self.intervals: dict[Key, tuple[Fraction, Fraction]] = {}
        self.scope_outer: tuple[int, ...] = ()

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
        p, inexact = _exact_probability(p)
        if inexact:
            self.engine.inexact = True
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
        check_options(options)
        if len(options) == 1:
            return options[0]
        policy = self.engine.scheduler
        if policy is not None:  # a fixed scheduler: no quantification
            index = 0 if policy == "first" else len(options) - 1 if policy == "last" \
                else check_policy_index(policy(options, key), len(options))
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


# ---------------------------------------------------------------------------------------------
# Randomness outside rng: the guard of the global generators and their states

_Allowed: TypeAlias = Callable[[tuple[Any, ...], dict[str, Any]], bool]


def _unseeded(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return (args[0] if args else kwargs.get("seed")) is None


def _seeded(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return not _unseeded(args, kwargs)


#: What the guard replaces: (owner, attribute, source named in the error, calls allowed).
_Target: TypeAlias = tuple[object, str, str, "_Allowed | None"]


@cache
def _targets() -> tuple[_Target, ...]:
    """The entry points of the entropy sources, which keep no state to compare: the generators
    with a state (``random``'s, numpy's legacy one, torch's) are checked by `_global_states`."""
    out: list[_Target] = [(random.SystemRandom, name, f"random.SystemRandom.{name}", None)
                          for name in ("random", "getrandbits", "randbytes")]
    out += [(secrets, name, f"secrets.{name}", None)
            for name in ("choice", "randbelow", "randbits", "token_bytes", "token_hex",
                         "token_urlsafe")]
    out += [(os, name, f"os.{name}", None) for name in ("urandom", "getrandom")
            if hasattr(os, name)]
    out.append((np.random, "default_rng", "numpy.random.default_rng() without a seed", _seeded))
    return tuple(out)


class _Guard:
    """While entered, draws from the process's global generators raise in this thread (see the
    module docstring). Guards nest; the entry points are replaced while at least one is entered
    (in any thread) and restored when the last one exits, exceptions included."""

    _lock = threading.Lock()
    _entered = 0
    _patches: ClassVar[list[tuple[object, str, object, bool]]] = []
    _wrappers: ClassVar[dict[tuple[int, str], tuple[object, Callable[..., Any]]]] = {}
    _active: ClassVar[dict[int, list[_Guard]]] = {}

    def __init__(self, engine: _Engine[Any]) -> None:
        self.engine = engine
        self.thread = threading.get_ident()

    def hit(self, source: str) -> NondeterministicProgramError:
        error = self.engine.outside(source)
        if self.engine.violation is None:
            self.engine.violation = error
        return error

    @staticmethod
    def _wrapper(target: _Target, original: object) -> Callable[..., Any]:
        owner, name, source, allowed = target
        cached = _Guard._wrappers.get((id(owner), name))
        if cached is not None and cached[0] is original:
            return cached[1]
        call = cast(Callable[..., Any], original)
        active = _Guard._active

        def guarded(*args: Any, **kwargs: Any) -> Any:
            guards = active.get(threading.get_ident())
            if guards and (allowed is None or not allowed(args, kwargs)):
                raise guards[-1].hit(source)
            return call(*args, **kwargs)

        guarded.__name__ = getattr(original, "__name__", name)
        guarded.__doc__ = getattr(original, "__doc__", None)
        guarded.__wrapped__ = original  # type: ignore[attr-defined]
        _Guard._wrappers[(id(owner), name)] = (original, guarded)
        return guarded

    @staticmethod
    def _install() -> None:
        try:
            for target in _targets():
                owner, name = target[0], target[1]
                original = getattr(owner, name, None)
                if original is None:
                    continue
                own = not isinstance(owner, type) or name in vars(owner)
                setattr(owner, name, _Guard._wrapper(target, original))
                # recorded once in place: a failed setattr leaves nothing to undo for it
                _Guard._patches.append((owner, name, original, own))
        except BaseException:
            _Guard._restore()
            raise

    @staticmethod
    def _restore() -> None:
        while _Guard._patches:
            owner, name, original, own = _Guard._patches.pop()
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)  # it was inherited: uncover the inherited one

    def __enter__(self) -> _Guard:
        with _Guard._lock:
            if _Guard._entered == 0:
                _Guard._install()
            _Guard._entered += 1
        _Guard._active.setdefault(self.thread, []).append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        guards = _Guard._active[self.thread]
        guards.remove(self)
        if not guards:
            del _Guard._active[self.thread]
        with _Guard._lock:
            _Guard._entered -= 1
            if _Guard._entered == 0:
                _Guard._restore()


#: Bytes of numpy's MT19937 state (624 32-bit words and the position).
_MT19937_STATE_BYTES = 624 * 4 + 4


def _global_states() -> dict[str, object]:
    """The states of the global generators, which a draw through an entry point captured before
    the audit (out of the guard's reach) still changes."""
    legacy = np.random.mtrand._rand._bit_generator
    states: dict[str, object] = {
        "random (Python's global generator)": random.getstate(),
        "numpy.random (the legacy global RandomState)": ctypes.string_at(
            legacy.ctypes.state_address, _MT19937_STATE_BYTES),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        states["torch's global generator"] = bytes(
            torch.default_generator.get_state().numpy().tobytes())
    return states


def _changed(before: dict[str, object], after: dict[str, object]) -> list[str]:
    return [name for name, state in after.items() if name in before and before[name] != state]


@dataclass
class _Engine(Generic[V]):
    program: Callable[[Any], V]
    keyed: bool
    merge: bool
    max_paths: int
    max_choices: int
    first_witness: bool
    scheduler: Any = None
    check_states: bool = False  # the diagnostic run: compare the global states around each run
    memo: dict[Hashable, Law] = field(default_factory=dict)
    paths: int = 0
    runs: int = 0
    witnesses: list[Witness] = field(default_factory=list)
    stack: list[tuple[_Node, int]] = field(default_factory=list)
    # rows are usually the same tuple objects again and again (model tables): cache by identity,
    # holding a reference so that an id is never reused while cached
    row_cache: dict[int, tuple[object, _Branches]] = field(default_factory=dict)
    inexact: bool = False  # some draw was given float weights or a float probability
    longest: int = 0  # the most probabilistic or scheduler choices made by one run
    current: _Replay | None = None
    violation: NondeterministicProgramError | None = None
    bar: Any = None  # the progress bar (tqdm) when asked for
    next_report: float = math.inf  # the run count at which the bar is next refreshed

    def report(self) -> None:
        """Refresh the progress bar (every `PROGRESS_EVERY` runs)."""
        self.next_report = self.runs + PROGRESS_EVERY
        if self.bar is not None:
            self.bar.update(self.runs - self.bar.n)
            self.bar.set_postfix(paths=self.paths, merged_states=len(self.memo), refresh=False)

    def branches(self, weights: Sequence[Fraction | float]) -> _Branches:
        if not isinstance(weights, tuple):
            return _branches(weights)
        hit = self.row_cache.get(id(weights))
        if hit is not None and hit[0] is weights:
            return hit[1]
        result = _branches(weights)
        self.row_cache[id(weights)] = (weights, result)
        return result

    # -- contract violations --------------------------------------------------------------------
    def outside(self, source: str) -> NondeterministicProgramError:
        path = self.current.path() if self.current is not None else ()
        return NondeterministicProgramError(
            f"the program drew randomness outside rng: it called {source}, {_after(path)}; "
            "an exact law is only defined for a program whose every random choice goes through "
            "rng (rng.categorical / rng.bernoulli; or seed a generator of its own from such a "
            "draw)", source=source, path=path)

    def diverged(self, replay: _Replay, recorded: _Node, now: _Node
                 ) -> NondeterministicProgramError:
        path = replay.path()
        return NondeterministicProgramError(
            "the program is not a deterministic function of its draws (hidden state or "
            f"randomness outside rng?): replaying a path, {_after(path)}, the next choice was "
            f"{_describe(recorded)} when the path was first run, and is now {_describe(now)}",
            path=path)

    def run(self, prefix: tuple[int, ...]) -> list[_Event]:
        self.runs += 1
        if self.runs >= self.next_report:
            self.report()
        replay = self.current = _Replay(self, prefix)
        before = _global_states() if self.check_states else None
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
            if before is not None and (changed := _changed(before, _global_states())):
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

    def explore(self, prefix: tuple[int, ...], events: list[_Event], i: int) -> Law:
        ev = events[i]
        if ev.kind == "done":
            self.paths += 1
            if self.paths > self.max_paths:
                raise PathLimitError(
                    f"more than {self.max_paths} paths; shrink the problem or raise max_paths "
                    "(a decoder of your own: see merge_point in docs/auditing-your-decoder.md)")
            return {ev.value: Fraction(1)}
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


def _mixture(weights: list[Fraction], laws: list[Law]) -> Law:
    out: Law = {}
    for w, law in zip(weights, laws, strict=True):
        for value, p in law.items():
            out[value] = out.get(value, Fraction(0)) + w * p
    return out


@dataclass(frozen=True)
class ExactLaw:
    """`exact_distribution`'s law with what the audit of float models needs to know about it.

    Attributes:
        law: the law (zero-probability outcomes left out).
        inexact: some draw was given float weights or a float probability, so the law carries
            the rounding of the program's float arithmetic.
        longest_path: the most choices one run made (``D`` in `dsi_ref.check_lossless`'s float
            tolerance).
    """

    law: Law
    inexact: bool
    longest_path: int


@contextmanager
def _recursion_room() -> Iterator[None]:
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old_limit)


def exact_law(program: Callable[[Any], V], *, keyed: bool = True, merge: bool = True,
              max_paths: int = DEFAULT_MAX_PATHS, max_choices: int = DEFAULT_MAX_CHOICES,
              witness: str = "first", scheduler: SchedulerPolicy | None = None,
              progress: bool = False) -> ExactLaw:
    """`exact_distribution`, returned as an `ExactLaw` (the law, whether floats were involved,
    and the longest path); same arguments and errors."""
    check_program(program)
    keyed = check_bool("keyed", keyed, error=InvalidAuditError)
    merge = check_bool("merge", merge, error=InvalidAuditError)
    progress = check_bool("progress", progress, error=InvalidAuditError)
    max_paths = check_int("max_paths", max_paths, error=InvalidAuditError)
    max_choices = check_int("max_choices", max_choices, error=InvalidAuditError)
    check_choice("witness", witness, ("first", "shortest"), error=InvalidAuditError)
    if scheduler is not None and not callable(scheduler):
        check_choice("scheduler", scheduler, (None, "first", "last"), error=InvalidAuditError)

    def engine_(check_states: bool = False) -> _Engine[V]:
        return _Engine(program, keyed, merge, max_paths, max_choices,
                       first_witness=witness == "first", scheduler=scheduler,
                       check_states=check_states)

    engine = engine_()
    if progress:
        engine.bar = tqdm(desc="exact_distribution", unit=" runs", file=sys.stderr,
                          mininterval=0.5)
        engine.next_report = PROGRESS_EVERY
    before = _global_states()
    with _recursion_room():
        try:
            with _Guard(engine):
                try:
                    law = engine.explore((), engine.run(()), 0)
                finally:
                    if engine.bar is not None:  # the final counts stay on screen
                        engine.report()
                        engine.bar.refresh()
                        engine.bar.close()
        except Exception as error:  # e.g. a replay gone astray: was a global generator drawn?
            if isinstance(error, NondeterministicProgramError) and error.source is not None:
                raise
            changed = _changed(before, _global_states())
            if changed:
                raise _locate(engine_(check_states=True), changed) from error
            raise
        changed = _changed(before, _global_states())
        if changed:
            raise _locate(engine_(check_states=True), changed)
    if engine.witnesses:
        raise ScheduleDependenceError(min(engine.witnesses, key=lambda w: len(w.path)))
    return ExactLaw({v: p for v, p in law.items() if p != 0}, engine.inexact, engine.longest)


def _locate(engine: _Engine[Any], changed: list[str]) -> NondeterministicProgramError:
    """Explore again, comparing the global states around every run: the first run that changes
    one names the path."""
    try:
        with _Guard(engine):
            engine.explore((), engine.run(()), 0)
    except NondeterministicProgramError as located:
        return located
    except Exception:  # the diagnosis failed: report what is known
        pass
    return NondeterministicProgramError(
        f"the program drew randomness outside rng: the state of {changed[0]} changed while it "
        "ran (through a function the guard could not intercept, e.g. one imported before the "
        "audit); draw through rng", source=changed[0])


def exact_distribution(program: Callable[[Any], V], *, keyed: bool = True, merge: bool = True,
                       max_paths: int = DEFAULT_MAX_PATHS,
                       max_choices: int = DEFAULT_MAX_CHOICES,
                       witness: str = "first",
                       scheduler: SchedulerPolicy | None = None,
                       progress: bool = False) -> dict[V, Fraction]:
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
        progress: show a progress bar on stderr (runs of the program, complete paths, merged
            states), refreshed every `PROGRESS_EVERY` runs; off by default.

    A program's return value is its outcome, converted by `as_outcome` (a list, array or tensor
    becomes a tuple).

    Raises:
        InvalidAuditError: a bad argument (a program that is not callable, ``keyed=1``, an
            unknown ``witness``...) or an unhashable outcome.
        InvalidParameterError: the program made a malformed choice (weights that are not finite
            numbers >= 0 with a positive sum, a probability outside [0, 1], an empty
            ``choose``), refused as `Sampler` refuses it.
        PathLimitError: more than ``max_paths`` paths, or a run of more than ``max_choices``
            choices.
        ScheduleDependenceError: some ``choose`` has options leading to different laws.
        NondeterministicProgramError: the program drew randomness outside ``rng``, or a replay
            made fewer or different choices (see the module docstring): never a verdict.

    >>> exact_distribution(lambda rng: rng.categorical([Fraction(1), Fraction(3)]))
    {0: Fraction(1, 4), 1: Fraction(3, 4)}
    """
    return exact_law(program, keyed=keyed, merge=merge, max_paths=max_paths,
                     max_choices=max_choices, witness=witness, scheduler=scheduler,
                     progress=progress).law


def exact_expectation(program: Callable[[Any], Fraction | float | int], **kwargs: Any
                      ) -> Fraction | float:
    """``E[program(rng)]`` exactly (a `Fraction` when every value is rational).

    Accepts the keyword arguments of `exact_distribution`; `InvalidAuditError` when a value is
    not a real number (a ``bool`` counts as 0 or 1: the probability of an event).

    >>> exact_expectation(lambda rng: 2 if rng.bernoulli(Fraction(1, 3)) else 5)
    Fraction(4, 1)
    """
    law = exact_distribution(program, **kwargs)
    for v in law:
        if not isinstance(v, numbers.Real):
            raise InvalidAuditError(f"exact_expectation needs a program that returns numbers, "
                                    f"got the value {v!r} ({type(v).__name__}); return e.g. "
                                    "run.time or len(run.tokens)")
    if all(isinstance(v, Fraction | int) for v in law):
        return sum((Fraction(v) * p for v, p in law.items()), Fraction(0))
    return float(sum(float(v) * float(p) for v, p in law.items()))
