"""Randomness outside ``rng``: the guard of the entropy sources and the global generators' states.

While a `Guard` is entered, a call of ``os.urandom``/``os.getrandom``, of ``secrets``, of
``random.SystemRandom`` or of ``numpy.random.default_rng()`` without a seed raises in the
auditing thread (`guard_targets` lists them); `global_states` snapshots the states of Python's
``random``, numpy's legacy global ``RandomState`` and torch's global generator, which
`dsi_ref.audit.exact.law` compares before and after an exploration (the docstring of
`dsi_ref.audit.exact` gives the three detectors and what none of them sees).
"""

from __future__ import annotations

import ctypes
import os
import random
import secrets
import sys
import threading
from collections.abc import Callable
from functools import cache
from typing import Any, ClassVar, Protocol, TypeAlias, cast

import numpy as np

from ...base.errors import NondeterministicProgramError

__all__ = ["Guard", "Violations", "changed_states", "global_states", "guard_targets"]


class Violations(Protocol):
    """Where a `Guard` reports a draw outside ``rng``: the exact engine
    (`dsi_ref.audit.exact.engine.Engine`)."""

    #: The first violation seen, kept so that a program that swallows the error is caught when its
    #: run ends.
    violation: NondeterministicProgramError | None

    def outside(self, source: str) -> NondeterministicProgramError:
        """The error for a call of ``source`` (an entropy source) in the current run."""
        ...

_Allowed: TypeAlias = Callable[[tuple[Any, ...], dict[str, Any]], bool]


def _unseeded(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return (args[0] if args else kwargs.get("seed")) is None


def _seeded(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return not _unseeded(args, kwargs)


#: What the guard replaces: (owner, attribute, source named in the error, calls allowed).
_Target: TypeAlias = tuple[object, str, str, "_Allowed | None"]


@cache
def guard_targets() -> tuple[_Target, ...]:
    """The entry points of the entropy sources, which keep no state to compare: the generators
    with a state (``random``'s, numpy's legacy one, torch's) are checked by `global_states`."""
    out: list[_Target] = [(random.SystemRandom, name, f"random.SystemRandom.{name}", None)
                          for name in ("random", "getrandbits", "randbytes")]
    out += [(secrets, name, f"secrets.{name}", None)
            for name in ("choice", "randbelow", "randbits", "token_bytes", "token_hex",
                         "token_urlsafe")]
    out += [(os, name, f"os.{name}", None) for name in ("urandom", "getrandom")
            if hasattr(os, name)]
    out.append((np.random, "default_rng", "numpy.random.default_rng() without a seed", _seeded))
    return tuple(out)


class Guard:
    """While entered, draws from the process's global generators raise in this thread (see the
    module docstring). Guards nest; the entry points are replaced while at least one is entered
    (in any thread) and restored when the last one exits, exceptions included."""

    _lock = threading.Lock()
    _entered = 0
    _patches: ClassVar[list[tuple[object, str, object, bool]]] = []
    _wrappers: ClassVar[dict[tuple[int, str], tuple[object, Callable[..., Any]]]] = {}
    _active: ClassVar[dict[int, list[Guard]]] = {}

    def __init__(self, engine: Violations, targets: tuple[_Target, ...] | None = None) -> None:
        self.engine = engine
        # what the first guard patches
        self.targets = guard_targets() if targets is None else targets
        self.thread = threading.get_ident()

    def hit(self, source: str) -> NondeterministicProgramError:
        """Record a call of ``source`` with the engine (the first one is kept) and return the
        error to raise."""
        error = self.engine.outside(source)
        if self.engine.violation is None:
            self.engine.violation = error
        return error

    @staticmethod
    def _wrapper(target: _Target, original: object) -> Callable[..., Any]:
        owner, name, source, allowed = target
        cached = Guard._wrappers.get((id(owner), name))
        if cached is not None and cached[0] is original:
            return cached[1]
        call = cast(Callable[..., Any], original)
        active = Guard._active

        def guarded(*args: Any, **kwargs: Any) -> Any:
            guards = active.get(threading.get_ident())
            if guards and (allowed is None or not allowed(args, kwargs)):
                raise guards[-1].hit(source)
            return call(*args, **kwargs)

        guarded.__name__ = getattr(original, "__name__", name)
        guarded.__doc__ = getattr(original, "__doc__", None)
        guarded.__wrapped__ = original  # type: ignore[attr-defined]
        Guard._wrappers[(id(owner), name)] = (original, guarded)
        return guarded

    @staticmethod
    def _install(targets: tuple[_Target, ...]) -> None:
        try:
            for target in targets:
                owner, name = target[0], target[1]
                original = getattr(owner, name, None)
                if original is None:
                    continue
                own = not isinstance(owner, type) or name in vars(owner)
                setattr(owner, name, Guard._wrapper(target, original))
                # recorded once in place: a failed setattr leaves nothing to undo for it
                Guard._patches.append((owner, name, original, own))
        except BaseException:
            Guard._restore()
            raise

    @staticmethod
    def _restore() -> None:
        while Guard._patches:
            owner, name, original, own = Guard._patches.pop()
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)  # it was inherited: uncover the inherited one

    def __enter__(self) -> Guard:
        with Guard._lock:
            if Guard._entered == 0:
                Guard._install(self.targets)
            Guard._entered += 1
        Guard._active.setdefault(self.thread, []).append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        guards = Guard._active[self.thread]
        guards.remove(self)
        if not guards:
            del Guard._active[self.thread]
        with Guard._lock:
            Guard._entered -= 1
            if Guard._entered == 0:
                Guard._restore()


#: Bytes of numpy's MT19937 state (624 32-bit words and the position).
_MT19937_STATE_BYTES = 624 * 4 + 4


def global_states() -> dict[str, object]:
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


def changed_states(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """The generators (by name) whose state differs between two `global_states`."""
    return [name for name, state in after.items() if name in before and before[name] != state]

