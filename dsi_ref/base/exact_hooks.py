"""What the exact checker offers a decoder besides `Randomness`: an explicit, optional protocol.

A decoder needs nothing but its ``rng``. Under the exact checker (`dsi_ref.audit.exact`) that
``rng`` is also an `ExactHooks`, and a decoder that asks (`exact_hooks(rng)`, ``None`` under a
`dsi_ref.Sampler`) may use three things:

* **merge points**: "the rest of this run depends only on this state"; the checker lets paths
  that reach equal states share the law of their continuation (dynamic programming instead of
  path enumeration);
* **resume points**: a point where the checker may take a snapshot of the run and, for a later
  branch below it, restore the snapshot instead of replaying every choice before it;
* **keyed choices**: whether the scheduler's ``choose`` may read its key
  (`ExactHooks.keyed_choices`), which tells a decoder whether a state may forget what the keys
  hold.

Two ways to offer them:

* A *free-form* decoder passes its state, and optionally its own ``snapshot``/``restore``
  functions (`ExactHooks.merge_point`, `ExactHooks.resume_point`; `dsi_ref.merge_point` is the
  public wrapper, a no-op under a sampler).
* A *step-wise run* (`dsi_ref.decoders.speculative.SIRun`, `dsi_ref.decoders.dsi.DSIRun`) passes
  itself (`ExactHooks.enter`, `ExactHooks.merge`, `ExactHooks.pause`): it is a `StepRun`, an
  instance of a dataclass whose fields are its whole mutable state, each field with a `role`.
  The checker snapshots and restores those fields and reads the merge state from them
  generically (`dsi_ref.audit.exact.state`); the run only says, once per invocation, how it may
  be treated (`Checkpointing`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping
from typing import Final, Literal, NamedTuple, Protocol

__all__ = ["CLOCK", "COMMITTED", "DERIVED", "HISTORY", "INSTANT", "Checkpointing", "ExactHooks",
           "ForwardedHooks", "Role", "StepRun", "exact_hooks", "role"]

#: What a state field is to the merge state (the ``"role"`` of its dataclass field's metadata;
#: a field without one is plain state, always read).
Role = Literal["history", "clock", "instant", "derived", "committed"]
#: Read only to build the run's result (its trace, counters, the ids that name tasks in the
#: trace): left out of the merge state when the run returns no history.
HISTORY: Final[Mapping[str, Role]] = {"role": "history"}
#: The run's clock: left out of the merge state when the run returns no time and its future
#: depends on times relative to it only; every `INSTANT` is then read relative to it.
CLOCK: Final[Mapping[str, Role]] = {"role": "clock"}
#: A time on the run's clock (when a forward in flight started or ends).
INSTANT: Final[Mapping[str, Role]] = {"role": "instant"}
#: A function of the other fields in the run's own code (a draft's row ``q``, which server runs
#: which task): left out of the merge state while only the run's own code reads it.
DERIVED: Final[Mapping[str, Role]] = {"role": "derived"}
#: The generated tokens decided for good (read as plain state too): the checker forgets keyed
#: draws that no later decision can share.
COMMITTED: Final[Mapping[str, Role]] = {"role": "committed"}


def role(metadata: Mapping[str, object]) -> Role | None:
    """The role a field's metadata gives it (``None``: plain state)."""
    value = metadata.get("role")
    return value if value in ("history", "clock", "instant", "derived", "committed") else None


class Checkpointing(NamedTuple):
    """How the exact checker may treat a step-wise run, said once per invocation (a named
    tuple: a run makes one each time it starts).

    Attributes:
        own: no method of the run's class is replaced: only the run's own code reads and writes
            its fields (a history list then only grows, and nested values are read without
            their class).
        resumable: the fields are everything the rest of the run depends on (its own code, a
            rule without state): the checker may snapshot them at its points and restore them
            into a fresh run of the same invocation.
        history: the merge state keeps the `HISTORY` fields (the run returns them, or code the
            run does not own may read them).
        absolute_time: the merge state keeps the `CLOCK` and each `INSTANT` as they are; false:
            it leaves the clock out and reads every instant relative to it (a run that returns
            no time, whose choices' keys do not hold the clock).
        derived: the merge state keeps the `DERIVED` fields (code the run does not own may read
            them).
        data_parts: objects among the parts the run is built on whose own attributes are state
            (a rule of the user's that keeps something between calls): read as data.
    """

    own: bool
    resumable: bool
    history: bool
    absolute_time: bool
    derived: bool
    data_parts: tuple[object, ...] = ()


class StepRun(Protocol):
    """A step-wise run as the exact checker reads it.

    It is an instance of a dataclass whose fields are everything the run changes as it goes
    (each value immutable, or a list, dict or set of values the run never changes in place).
    Any other attribute of the run is either one of the parts it is built on (`built_on`) or
    something a subclass added, which the checker reads as data (a fingerprint), or which turns
    merging off where it cannot be read.
    """

    def built_on(self) -> Mapping[str, object]:
        """The parts the run is built on (models, ``rng``, configuration, rule...), by attribute
        name, as its own ``__init__`` set them: the same objects for the whole run unless a
        subclass rebinds one (then read as data)."""
        ...

    def invocation(self) -> tuple[object, ...]:
        """What identifies the invocation (models, prompt, budget, configuration, rule): a
        snapshot is restored only into a run whose invocation is the same objects, or equal
        values of the same types."""
        ...

    def checkpointing(self) -> Checkpointing:
        """How the checker may treat this run (given once, to `ExactHooks.enter`)."""
        ...


class ExactHooks(ABC):
    """The exact checker's offer to a decoder (see the module docstring). Every method may be
    ignored; a decoder that calls none is enumerated plainly."""

    #: The checker resumes runs from the snapshots offered to it (merging is on).
    resumes: bool = False
    #: A ``choose`` may depend on its key (a scheduler policy that reads keys, such as an
    #: oblivious rank table keyed by the decision point), so a state must keep what keys hold.
    keyed_choices: bool = True

    @abstractmethod
    def merge_point(self, state: Hashable, *, entry: bool = False,
                    committed: tuple[int, ...] | None = None,
                    snapshot: Callable[[], object] | None = None,
                    restore: Callable[[object], bool] | None = None) -> None:
        """A free-form merge point: the rest of the run depends only on ``state``
        (`dsi_ref.base.randomness.merge_point` says what each argument means)."""

    @abstractmethod
    def resume_point(self, snapshot: Callable[[], object]) -> None:
        """A free-form resume point: ``snapshot()`` copies the run's state here (restored by the
        ``restore`` of the invocation's entry merge point)."""

    @abstractmethod
    def enter(self, run: StepRun, checkpointing: Checkpointing) -> None:
        """A step-wise run's invocation starts (before its first step), to be treated as
        ``checkpointing`` (`StepRun.checkpointing`) until it ends: the checker may restore into
        ``run`` a snapshot of a later point on the same path of choices."""

    @abstractmethod
    def merge(self, run: StepRun) -> None:
        """A merge point of a step-wise run: the rest of the run depends only on its fields (and
        whatever a subclass keeps); a resumable run also offers a snapshot here."""

    @abstractmethod
    def pause(self, run: StepRun) -> None:
        """A resume point of a resumable step-wise run: a snapshot, without merging."""


class ForwardedHooks(ExactHooks):
    """The checker's offer passed on by a wrapper of its ``rng`` (one that changes how ties are
    broken, counts draws or enforces a budget): every method forwards to ``hooks``, so a decoder
    run through the wrapper merges and resumes as it does under the checker itself. A wrapper
    subclasses it (and forwards the draws it does not change) when `exact_hooks` finds the
    checker behind it; the wrapper must keep no state that changes the run."""

    def __init__(self, hooks: ExactHooks) -> None:
        self.hooks = hooks
        self.resumes = hooks.resumes
        self.keyed_choices = hooks.keyed_choices

    def merge_point(self, state: Hashable, *, entry: bool = False,
                    committed: tuple[int, ...] | None = None,
                    snapshot: Callable[[], object] | None = None,
                    restore: Callable[[object], bool] | None = None) -> None:
        """The checker's free-form merge point (`ExactHooks.merge_point`)."""
        self.hooks.merge_point(state, entry=entry, committed=committed, snapshot=snapshot,
                               restore=restore)

    def resume_point(self, snapshot: Callable[[], object]) -> None:
        """The checker's free-form resume point (`ExactHooks.resume_point`)."""
        self.hooks.resume_point(snapshot)

    def enter(self, run: StepRun, checkpointing: Checkpointing) -> None:
        """The checker's `ExactHooks.enter`."""
        self.hooks.enter(run, checkpointing)

    def merge(self, run: StepRun) -> None:
        """The checker's `ExactHooks.merge`."""
        self.hooks.merge(run)

    def pause(self, run: StepRun) -> None:
        """The checker's `ExactHooks.pause`."""
        self.hooks.pause(run)


def exact_hooks(rng: object) -> ExactHooks | None:
    """``rng`` as the exact checker's `ExactHooks`, or ``None`` (a sampler, any other
    `Randomness`)."""
    return rng if isinstance(rng, ExactHooks) else None
