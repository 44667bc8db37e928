"""Randomness as a parameter: the `Randomness` protocol and its sampling interpreter `Sampler`.

Every decoder takes ``rng: Randomness`` and draws nothing else. Four kinds of choice:

* ``rng.categorical(weights, key=None) -> int`` — a *probabilistic* choice, index ``i`` with
  probability ``weights[i] / sum(weights)`` (weights need not be normalised; zero-weight indices are
  never returned);
* ``rng.bernoulli(p, key=None) -> bool`` — a probabilistic choice, ``True`` with probability ``p``;
* ``rng.uniform(key=None, bits=None)`` — a uniform in ``[0, 1)`` to compare with numbers, for
  decoders written the way engines write them (``u < p / q``; `inverse_cdf` for one-uniform
  sampling); each comparison is a probabilistic choice;
* ``rng.choose(options, key=None) -> option`` — a *nondeterministic* choice (which event happens
  first, which queued task runs next): the scheduler's, not chance's.

Keys. A key names a decision, by convention ``(role, position, context)`` with ``position`` the
index of the generated token the decision is about and ``context`` the generated tokens before it
(``("draft", 2, (1, 0))``). Under keyed
randomness a keyed draw is a function of one uniform ``u(key)``: categorical draws invert the CDF
at ``u``, Bernoulli draws return ``u < p``. So the same decision made twice — by two concurrent
tasks, or by SI and by DSI — gets the same answer whoever asks first.

The exact interpreter (`dsi_ref.audit.exact`) gives the same calls their law instead of a sample.
"""

from __future__ import annotations

import hashlib
import math
import operator
from bisect import bisect_right
from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction
from typing import (
    Any,
    Literal,
    Protocol,
    SupportsIndex,
    TypeAlias,
    TypeVar,
    cast,
    runtime_checkable,
)

import numpy as np

from .errors import InvalidParameterError
from .exact_hooks import exact_hooks
from .models import sequential_sum
from .validate import check_bool, check_seed, is_int

__all__ = ["SCHEDULER_POLICIES", "Key", "Randomness", "Sampler", "SchedulerPolicy", "check_bits",
           "check_options", "check_policy_index", "check_probability", "check_weights",
           "inverse_cdf", "keyed_uniform", "merge_point"]

T = TypeVar("T")
Key: TypeAlias = Hashable
SchedulerPolicy: TypeAlias = (
    Literal["first", "last", "random"] | Callable[[Sequence[object], Key], int]
)

_BUFFER = 4096
#: The named scheduler policies of `Sampler` (besides a callable).
SCHEDULER_POLICIES = ("first", "last", "random")


@runtime_checkable
class Randomness(Protocol):
    """The seam through which decoders make every choice (see the module docstring)."""

    def categorical(self, weights: Sequence[Fraction | float], key: Key = None) -> int:
        """An index drawn with probability proportional to ``weights``."""
        ...

    def bernoulli(self, p: Fraction | float, key: Key = None) -> bool:
        """``True`` with probability ``p``."""
        ...

    def choose(self, options: Sequence[T], key: Key = None) -> T:
        """One of ``options``, picked by the scheduler (a nondeterministic choice)."""
        ...

    def uniform(self, key: Key = None, bits: int | None = None) -> float:
        """A uniform in ``[0, 1)`` to compare with numbers (``u < p / q``); ``bits=b`` puts it
        on the grid ``{k / 2^b}``. The exact engine returns a lazy uniform that branches at
        each comparison (`dsi_ref.audit.exact.uniform`). One key, one uniform, shared with the
        ``bernoulli`` (``u < p``) and ``categorical`` (inverse CDF) draws of the same key."""
        ...


def merge_point(rng: object, state: Hashable, *, entry: bool = False,
                committed: tuple[int, ...] | None = None,
                snapshot: Callable[[], object] | None = None,
                restore: Callable[[object], bool] | None = None) -> None:
    """Tell an exact interpreter that the rest of the run depends only on ``state``.

    Decoders call this at the top of their main loop with every loop-carried variable in
    ``state`` (and ``entry=True`` on the first call of an invocation). The exact enumerator merges
    paths that reach equal states, which turns path enumeration into dynamic programming.
    ``committed`` (the generated tokens decided for good) lets it forget keyed draws that can never
    be asked again: those about decided positions, and those whose context contradicts
    ``committed``. Samplers ignore the call.

    Resuming (optional, both or neither): ``snapshot()`` returns a copy of everything the
    decoder's run keeps at this point, and ``restore(copy)`` puts such a copy back, so that the
    run then goes on exactly as the run that took it went on from its merge point; ``restore``
    returns False (and changes nothing) for a copy it cannot take back (another invocation's). An
    interpreter that resumes (`dsi_ref.base.exact_hooks.ExactHooks.resumes`: the exact engine
    with merging on) then need not replay a decoder from its start for every branch: at the
    ``entry`` merge point it may restore the snapshot of a later merge point on the same path of
    choices. Passed on only when it resumes.

    The call goes to ``rng`` when it is the exact checker (`dsi_ref.base.exact_hooks`, the
    protocol of what the checker offers a decoder); any other ``rng`` ignores it.
    """
    hooks = exact_hooks(rng)
    if hooks is None:
        return
    if snapshot is not None and restore is not None and hooks.resumes:
        hooks.merge_point(state, entry=entry, committed=committed, snapshot=snapshot,
                          restore=restore)
    else:
        hooks.merge_point(state, entry=entry, committed=committed)


_MASK = (1 << 64) - 1
_ROLE_CODES: dict[str, int] = {}


def _role_code(role: str) -> int:
    code = _ROLE_CODES.get(role)
    if code is None:
        digest = hashlib.blake2b(role.encode(), digest_size=8).digest()
        code = _ROLE_CODES[role] = int.from_bytes(digest, "little")
    return code


def _mix64(x: int) -> int:
    """splitmix64's finaliser: a bijective scramble of 64 bits."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK
    return x ^ (x >> 31)


def keyed_uniform(seed: int, key: Key) -> float:
    """The uniform ``u(key)`` in [0, 1) of keyed randomness, derived from ``(seed, key)``.

    Keys of the form ``(role: str, *parts)`` with parts made of ints and tuples of ints (every key
    the decoders use) hash in C: CPython's hash of ints and int tuples is not salted, so ``u`` is
    the same in every process (64-bit CPython >= 3.8). Other keys go through BLAKE2b of ``repr``.
    """
    if not is_int(seed):
        raise InvalidParameterError(f"seed must be an int, got {seed!r}")
    return _keyed_uniform(_mix64(int(seed) & _MASK), key)


def _keyed_uniform(seed_mix: int, key: Key) -> float:
    if type(key) is tuple and key and type(key[0]) is str:
        code = _ROLE_CODES.get(key[0])
        h = hash((code if code is not None else _role_code(key[0]), key[1:])) & _MASK
    else:
        h = int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little")
    x = h ^ seed_mix  # _mix64, inlined: this is the sampling hot path
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK
    return ((x ^ (x >> 31)) >> 11) * 2.0**-53


def check_probability(p: object) -> None:
    """Refuse (`InvalidParameterError`) a Bernoulli probability that is not a number in
    ``[0, 1]`` (NaN, a ``bool``, a string): the rule of every interpreter of `Randomness`."""
    try:
        valid = 0 <= p <= 1 and type(p) is not bool  # type: ignore[operator]
    except TypeError:
        valid = False
    if not valid:
        raise InvalidParameterError(f"bernoulli probability must lie in [0, 1], got {p!r}")


def check_bits(bits: object) -> int | None:
    """``bits`` of ``rng.uniform``: ``None`` (continuous) or an int in ``[1, 53]``;
    `InvalidParameterError` otherwise (the rule of every interpreter)."""
    if bits is None:
        return None
    if type(bits) is not int or not 1 <= bits <= 53:
        raise InvalidParameterError(f"uniform bits must be None or an int in [1, 53] (24: "
                                    f"float32, 53: float64), got {bits!r}")
    return bits


def inverse_cdf(u: Any, weights: Sequence[Fraction | float]) -> int:
    """The index that inverse-CDF sampling picks with one uniform ``u``: the first ``i`` with
    ``u < (w_0 + … + w_i) / Σ w`` (zero-weight indices are never picked; the last positive
    index when float rounding leaves ``u`` above every bound). ``u`` is a float from
    `Sampler.uniform` or the exact engine's lazy uniform, where each comparison is a choice: the
    exact law is ``weights`` normalised.

    >>> inverse_cdf(0.5, [1, 1, 2])
    2
    """
    check_weights(weights)
    total = sequential_sum(weights)
    last = max(i for i, w in enumerate(weights) if w > 0)
    cumulative: Fraction | float = 0
    for i, w in enumerate(weights):
        if not w > 0:
            continue
        cumulative = cumulative + w
        if i == last or u < cumulative / total:
            return i
    return last  # unreachable: the loop returns at `last`


def check_options(options: Sequence[object]) -> None:
    """Refuse (`InvalidParameterError`) an empty ``choose``: the rule of every interpreter."""
    if not options:
        raise InvalidParameterError("choose() needs at least one option")


def check_policy_index(index: object, n_options: int) -> int:
    """A scheduler policy's pick as an ``int`` in ``[0, n_options)``; `InvalidParameterError`
    otherwise (the rule of every interpreter that runs a policy)."""
    if not is_int(index) or not 0 <= operator.index(cast(SupportsIndex, index)) < n_options:
        raise InvalidParameterError(f"scheduler policy returned index {index!r} for "
                                    f"{n_options} options (an int in [0, {n_options}) is "
                                    "needed)")
    return operator.index(cast(SupportsIndex, index))


def check_weights(weights: Sequence[Fraction | float]) -> tuple[list[float], int]:
    """The rule for a row of categorical weights, shared by every interpreter of `Randomness`:
    the cumulative float sums of ``weights`` and the last positive index.

    Refused (`InvalidParameterError`): a weight that is not a finite number >= 0 (NaN, inf, a
    ``bool``, a string), no positive weight, and weights whose float sum overflows.
    """
    return _cdf(weights)


def _cdf(weights: Sequence[Fraction | float]) -> tuple[list[float], int]:
    """The cumulative float sums of ``weights`` (validated) and the last positive index.

    Refused (`InvalidParameterError`): a weight that is not a finite number >= 0 (NaN, inf, a
    ``bool``, a string), no positive weight, and weights whose float sum overflows.
    """
    cdf: list[float] = []
    total, last = 0.0, -1
    try:
        for i, w in enumerate(weights):
            if isinstance(w, bool) or not w >= 0 or not math.isfinite(w):  # NaN fails `>= 0`
                raise InvalidParameterError(
                    f"categorical weights must be finite numbers >= 0, got {list(weights)!r}")
            if w > 0:
                total += float(w)
                last = i
            cdf.append(total)
    except TypeError:
        raise InvalidParameterError(f"categorical weights must be numbers, got {weights!r}"
                                    ) from None
    except OverflowError:
        total = math.inf
    if not total > 0:
        raise InvalidParameterError(
            f"categorical weights must have a positive sum, got {list(weights)!r}")
    if not math.isfinite(total):
        raise InvalidParameterError(f"categorical weights overflow a float (their sum is "
                                    f"{total}); scale them down: {list(weights)!r}")
    return cdf, last


#: Sampling hot path: CDFs of rows that are tuples (model rows, usually the same objects again
#: and again), cached by identity with a reference held so that an id is never reused.
_CDF_CACHE: dict[int, tuple[Sequence[Fraction | float], list[float], int]] = {}
_CDF_CACHE_SIZE = 4096


def _cached_cdf(weights: Sequence[Fraction | float]) -> tuple[list[float], int]:
    if type(weights) is not tuple:
        return _cdf(weights)
    hit = _CDF_CACHE.get(id(weights))
    if hit is not None and hit[0] is weights:
        return hit[1], hit[2]
    if len(_CDF_CACHE) >= _CDF_CACHE_SIZE:
        _CDF_CACHE.clear()
    cdf, last = _cdf(weights)
    _CDF_CACHE[id(weights)] = (weights, cdf, last)
    return cdf, last


class Sampler:
    """Sampling interpreter of `Randomness`, backed by `numpy.random.Generator`.

    Args:
        seed: the seed of every draw.
        keyed: if True (default), draws that carry a ``key`` use ``keyed_uniform(seed, key)``, so a
            decision is the same whichever task asks first; unkeyed draws (and all draws when
            ``keyed=False``) consume a seeded stream.
        scheduler: policy of ``choose``: ``"first"`` (default; the earliest option, which the
            decoders arrange to be the natural one), ``"last"``, ``"random"`` (a seeded stream of
            its own), or a callable ``policy(options, key) -> index``.
    """

    def __init__(self, seed: int, *, keyed: bool = True,
                 scheduler: SchedulerPolicy = "first") -> None:
        self.seed = check_seed("Sampler seed", seed)
        self.keyed = check_bool("keyed", keyed)
        if not callable(scheduler) and (not isinstance(scheduler, str)
                                        or scheduler not in SCHEDULER_POLICIES):
            raise InvalidParameterError(f"scheduler must be one of {SCHEDULER_POLICIES} or a "
                                        f"callable policy(options, key) -> index, got "
                                        f"{scheduler!r}")
        self.scheduler = scheduler
        # numpy generators are made on first use: keyed runs never need the stream
        self._gen: np.random.Generator | None = None
        self._sched: np.random.Generator | None = None
        self._buffer: list[float] = []
        self._seed_mix = _mix64(self.seed & _MASK)

    def __repr__(self) -> str:
        return f"Sampler(seed={self.seed}, keyed={self.keyed}, scheduler={self.scheduler!r})"

    def uniform(self, key: Key = None, bits: int | None = None) -> float:
        """A uniform in [0, 1): ``u(key)`` for keyed draws, else the next value of the stream;
        with ``bits=b``, ``floor(u · 2^b) / 2^b``, on the grid of a ``b``-bit float (24:
        float32's ``torch.rand``, which can be exactly 0)."""
        if bits is not None:
            scale = 1 << check_bits(bits)  # type: ignore[operator]
            return math.floor(self.uniform(key) * scale) / scale
        if key is not None and self.keyed:
            return _keyed_uniform(self._seed_mix, key)
        if not self._buffer:
            if self._gen is None:
                self._gen = np.random.default_rng([self.seed, 0])
            self._buffer = self._gen.random(_BUFFER).tolist()
            self._buffer.reverse()
        return self._buffer.pop()

    def categorical(self, weights: Sequence[Fraction | float], key: Key = None) -> int:
        """Inverse-CDF draw at ``uniform(key)``: the first index whose cumulative weight exceeds
        ``u · Σ weights``; zero-weight indices are never returned."""
        cdf, last = _cached_cdf(weights)
        index = bisect_right(cdf, self.uniform(key) * cdf[-1])
        return index if index <= last else last  # past `last` only through rounding at u ~ 1

    def bernoulli(self, p: Fraction | float, key: Key = None) -> bool:
        """``uniform(key) < p``."""
        check_probability(p)
        return bool(self.uniform(key) < p)  # a Python bool, whatever number type p is

    def choose(self, options: Sequence[T], key: Key = None) -> T:
        """The scheduler's pick among ``options`` (see ``scheduler``)."""
        check_options(options)
        policy = self.scheduler
        if len(options) == 1 or policy == "first":
            return options[0]
        if policy == "last":
            return options[-1]
        if policy == "random":
            if self._sched is None:
                self._sched = np.random.default_rng([self.seed, 1])
            return options[int(self._sched.integers(len(options)))]
        if callable(policy):
            return options[check_policy_index(policy(options, key), len(options))]
        raise InvalidParameterError(f"unknown scheduler policy {policy!r}")
