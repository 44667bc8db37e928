"""The exact checker's entry points: `exact_law`, `exact_distribution` and `exact_expectation`.

They check their arguments, run the engine (`dsi_ref.audit.exact.engine`) inside the guard of the
entropy sources (`dsi_ref.audit.exact.guard`), compare the global generators' states around the
exploration, and turn what the engine found into a law or an error (the package docstring,
`dsi_ref.audit.exact`, says what each detector catches).
"""

from __future__ import annotations

import gc
import numbers
import sys
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

from tqdm import tqdm

from ...base.errors import (
    InvalidAuditError,
    NondeterministicProgramError,
    ScheduleDependenceError,
)
from ...base.randomness import SchedulerPolicy
from ...base.validate import check_bool, check_choice, check_int
from .engine import Engine
from .guard import Guard, changed_states, global_states, guard_targets
from .witness import Law, check_program

__all__ = ["DEFAULT_MAX_CHOICES", "DEFAULT_MAX_PATHS", "PROGRESS_EVERY", "ExactLaw",
           "exact_distribution", "exact_expectation", "exact_law"]

V = TypeVar("V", bound=Hashable)

#: Default bound on the number of complete paths explored before giving up.
DEFAULT_MAX_PATHS = 2_000_000
#: Default bound on the number of choices one run of the program may make.
DEFAULT_MAX_CHOICES = 100_000
#: With ``progress=True``, the bar is refreshed once per this many runs of the program (one
#: comparison per run on the hot path, shared with the ``max_paths`` check).
PROGRESS_EVERY = 2048


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


@contextmanager
def _fewer_full_collections() -> Iterator[None]:
    """Full garbage collections put off while the engine explores: its memo only grows, and
    every full collection walks all of it again (about 8 % of an exact DSI law). Young
    collections still run, which free the short-lived cycles of each run; the thresholds are
    back when the exploration ends."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, max(old, 1_000_000))
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)


def exact_law(program: Callable[[Any], V], *, keyed: bool = True, merge: bool = True,
              max_paths: int = DEFAULT_MAX_PATHS, max_choices: int = DEFAULT_MAX_CHOICES,
              witness: str = "first", scheduler: SchedulerPolicy | None = None,
              progress: bool = False, max_runs: int | None = None) -> ExactLaw:
    """`exact_distribution`, returned as an `ExactLaw` (the law, whether floats were involved,
    and the longest path); same arguments and errors."""
    check_program(program)
    keyed = check_bool("keyed", keyed, error=InvalidAuditError)
    merge = check_bool("merge", merge, error=InvalidAuditError)
    progress = check_bool("progress", progress, error=InvalidAuditError)
    max_paths = check_int("max_paths", max_paths, error=InvalidAuditError)
    max_choices = check_int("max_choices", max_choices, error=InvalidAuditError)
    if max_runs is not None:
        max_runs = check_int("max_runs", max_runs, error=InvalidAuditError)
    check_choice("witness", witness, ("first", "shortest"), error=InvalidAuditError)
    if scheduler is not None and not callable(scheduler):
        check_choice("scheduler", scheduler, (None, "first", "last"), error=InvalidAuditError)

    def engine_(check_states: bool = False) -> Engine[V]:
        return Engine(program, keyed, merge, max_paths, max_choices,
                       first_witness=witness == "first", scheduler=scheduler,
                       check_states=check_states, max_runs=max_runs)

    engine = engine_()
    engine.progress_every = PROGRESS_EVERY
    if progress:
        engine.bar = tqdm(desc="exact_distribution", unit=" runs", file=sys.stderr,
                          mininterval=0.5)
        engine.next_report = engine.progress_every
    before = global_states()
    with _recursion_room(), _fewer_full_collections():
        try:
            with Guard(engine, guard_targets()):
                try:
                    law = engine.solve()
                finally:
                    if engine.bar is not None:  # the final counts stay on screen
                        engine.report()
                        engine.bar.refresh()
                        engine.bar.close()
        except Exception as error:  # e.g. a replay gone astray: was a global generator drawn?
            if isinstance(error, NondeterministicProgramError) and error.source is not None:
                raise
            changed = changed_states(before, global_states())
            if changed:
                raise _locate(engine_(check_states=True), changed) from error
            raise
        changed = changed_states(before, global_states())
        if changed:
            raise _locate(engine_(check_states=True), changed)
    if engine.witnesses:
        raise ScheduleDependenceError(min(engine.witnesses, key=lambda w: len(w.path)))
    return ExactLaw({v: p for v, p in law.items() if p != 0}, engine.inexact, engine.longest)


def _locate(engine: Engine[Any], changed: list[str]) -> NondeterministicProgramError:
    """Explore again, comparing the global states around every run: the first run that changes
    one names the path."""
    try:
        with Guard(engine, guard_targets()):
            engine.solve()
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
                       progress: bool = False, max_runs: int | None = None
                       ) -> dict[V, Fraction]:
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
        max_runs: raise `PathLimitError` past this many runs of the program (``None``: no
            limit): a bound on the work, which ``max_paths`` is not when merging ends most runs
            before a complete path.

    A program's return value is its outcome, converted by `as_outcome` (a list, array or tensor
    becomes a tuple).

    Raises:
        InvalidAuditError: a bad argument (a program that is not callable, ``keyed=1``, an
            unknown ``witness``...) or an unhashable outcome.
        InvalidParameterError: the program made a malformed choice (weights that are not finite
            numbers >= 0 with a positive sum, a probability outside [0, 1], an empty
            ``choose``), refused as `Sampler` refuses it.
        PathLimitError: more than ``max_paths`` paths or ``max_runs`` runs, or a run of more
            than ``max_choices`` choices.
        ScheduleDependenceError: some ``choose`` has options leading to different laws.
        NondeterministicProgramError: the program drew randomness outside ``rng``, or a replay
            made fewer or different choices (see the module docstring): never a verdict.

    >>> exact_distribution(lambda rng: rng.categorical([Fraction(1), Fraction(3)]))
    {0: Fraction(1, 4), 1: Fraction(3, 4)}
    """
    return exact_law(program, keyed=keyed, merge=merge, max_paths=max_paths,
                     max_choices=max_choices, witness=witness, scheduler=scheduler,
                     progress=progress, max_runs=max_runs).law


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
