"""Stateful sampling processors (penalties, a grammar) as models, with advance and rollback.

A stateful processor reads the tokens generated so far through a small state: it starts at
``initial(prompt)``, moves with ``advance(state, token)`` and turns a model's next-token row into
the processed one with ``apply(state, row)``. Engines keep that state *incrementally*: they
advance it on every draft and roll it back when a draft is rejected (vLLM's and SGLang's grammar
matchers, their penalty counters). The reference law is the *recomputed* one:

    ``p̃(· | prefix) = apply(s(prefix), p(· | prefix))``, with
    ``s(prefix) = fold(advance, initial(prompt), prefix[len(prompt):])``,

a function of the prefix alone. `recomputed` is that law as a `LanguageModel`; `incremental` is
the same law computed as an engine computes it, with a stack of states per slot that it rolls back
to the longest common prefix of the contexts it is asked about and advances over the rest.
Both are `LanguageModel` wrappers, so the decoders need no change: SI and DSI speculate on the
processed models and are lossless with respect to the processed target. ``tests/
test_stateful_processors.py`` proves exactly that the incremental wrapper is observably the
recomputed one (same row for any sequence of calls), and that SI and DSI with every verification
rule have, with incremental models, the recomputed target's law.

**The processors** (``p`` is the row they receive, every one renormalises what it returns; a
`Fraction` row stays exact):

* `RepetitionPenalty` ``θ`` (a positive int): each token already seen, the prompt included, gets
  ``p(x)^θ`` instead of ``p(x)``. Hugging Face's rule divides a positive logit by ``θ`` and
  multiplies a negative one by ``θ``; that is not a function of the probabilities (softmax forgets
  the logits' offset, the rule does not). On the log-softmax logits ``log p ≤ 0`` it multiplies
  every seen token's logit by ``θ``, i.e. ``p(x)^θ``: the rule used here, rational for an integer
  ``θ``.
* `PresencePenalty` ``r`` and `FrequencyPenalty` ``r``: the additive logit penalties of OpenAI and
  vLLM (``logit − α·[count > 0]`` and ``logit − β·count``) are multiplicative on probabilities:
  ``p(x)·r`` for a generated token, and ``p(x)·r^count(x)``, with ``r = e^{−α}`` (or
  ``e^{−β}``). Give ``r`` as a positive `Fraction` to stay exact (``r > 1`` rewards repetition).
  They count generated tokens only (not the prompt), as OpenAI and vLLM do.
* `GrammarConstraint`: a `TokenDFA` over the vocabulary (e.g. `TokenDFA.from_regex`), whose state
  is the automaton's (both defined in `dsi_ref.base.grammar`, with the regex compiler, and
  re-exported here). It keeps the tokens with a transition to a live state (one from which an
  accepting state can be reached) and EOS in accepting states only, and renormalises. Outside the
  language (after a token the grammar forbids, or after EOS) the row is passed through unchanged:
  such a prefix has processed probability 0 (its last token was masked), so no lossless decoder
  commits a token after it, but SI and DSI do score rows after drafts that will be rejected.
  Inside the language, a row that gives zero mass to every allowed token raises
  `ConstraintDeadEndError` (the processed law is 0/0 there); the grammar's own dead ends are
  pruned when it is built.

Processors apply in the order given, each to the previous one's renormalised output (the
repetition penalty's power does not commute with renormalisation). Float rows are processed in
floats.

**State per task context.** DSI asks the target about many task contexts in flight at once (and
the exact audit re-runs a program from the start many times). `incremental` keeps ``slots``
stacks: a call whose context extends a stack's advances it; otherwise the stack with the longest
common prefix is forked into a free slot (or the least recently used one) and advanced from there,
and with ``slots=1`` it is rolled back in place, as an engine with one state per sequence does.
Either way each row is a function of its prefix alone; ``stats`` counts the advances, rollbacks
and forks, so tests can show the wrapper works incrementally.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from .errors import ConstraintDeadEndError, InvalidParameterError
from .grammar import DEAD, GrammarConstraint, TokenDFA
from .models import LanguageModel, Number, Prefix, checked_probs, normalised
from .validate import check_int

__all__ = [
    "DEAD",
    "ConstraintDeadEndError",
    "FrequencyPenalty",
    "GrammarConstraint",
    "IncrementalLM",
    "PresencePenalty",
    "RecomputedLM",
    "RepetitionPenalty",
    "Slot",
    "StatefulProcessor",
    "TokenDFA",
    "incremental",
    "recomputed",
]

@runtime_checkable
class StatefulProcessor(Protocol):
    """A processor with state: ``initial``, ``advance`` and ``apply`` (see the module's note)."""

    @property
    def name(self) -> str:
        """A short description, e.g. ``repetition(2)``."""
        ...

    def initial(self, prompt: Prefix) -> Hashable:
        """The state before the first generated token."""
        ...

    def advance(self, state: Any, token: int) -> Hashable:
        """The state after ``token`` (a pure function: ``state`` is never mutated)."""
        ...

    def apply(self, state: Any, row: tuple[Number, ...]) -> tuple[Number, ...]:
        """The processed row after a prefix whose state is ``state``."""
        ...


def _positive_factor(name: str, factor: object) -> Number:
    if isinstance(factor, bool) or not isinstance(factor, Fraction | int | float) \
            or not factor > 0 or factor == float("inf"):
        raise InvalidParameterError(f"{name} must be a positive finite number (a Fraction to "
                                    f"stay exact), got {factor!r}")
    return Fraction(factor) if isinstance(factor, int) else factor


def _count(counts: tuple[int, ...], token: int) -> tuple[int, ...]:
    grown = counts + (0,) * (token + 1 - len(counts))
    return grown[:token] + (grown[token] + 1,) + grown[token + 1:]


@dataclass(frozen=True)
class RepetitionPenalty:
    """``p(x) ↦ p(x)^θ`` for every token already seen (prompt included), then renormalised:
    Hugging Face's ``repetition_penalty`` on the log-softmax logits (module note).

    >>> RepetitionPenalty(2).apply(frozenset({0}), (Fraction(1, 2), Fraction(1, 2)))
    (Fraction(1, 3), Fraction(2, 3))
    """

    penalty: int

    def __post_init__(self) -> None:
        check_int("repetition penalty", self.penalty, low=1,
                  what=" (p^θ on seen tokens; an integer keeps Fraction rows exact)")

    @property
    def name(self) -> str:
        """``repetition(θ)``."""
        return f"repetition({self.penalty})"

    def initial(self, prompt: Prefix) -> frozenset[int]:
        """The prompt's tokens."""
        return frozenset(prompt)

    def advance(self, state: frozenset[int], token: int) -> frozenset[int]:
        """``state ∪ {token}``."""
        return state | {token}

    def apply(self, state: frozenset[int], row: tuple[Number, ...]) -> tuple[Number, ...]:
        """``p(x)^θ`` on the seen tokens, renormalised."""
        return normalised([p ** self.penalty if x in state else p for x, p in enumerate(row)])


@dataclass(frozen=True)
class PresencePenalty:
    """``p(x) ↦ p(x)·r`` for every token generated at least once, then renormalised
    (``r = e^{−α}`` for OpenAI's ``presence_penalty = α``)."""

    factor: Number

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _positive_factor("presence factor", self.factor))

    @property
    def name(self) -> str:
        """``presence(r)``."""
        return f"presence({self.factor})"

    def initial(self, prompt: Prefix) -> frozenset[int]:
        """Nothing generated yet."""
        return frozenset()

    def advance(self, state: frozenset[int], token: int) -> frozenset[int]:
        """``state ∪ {token}``."""
        return state | {token}

    def apply(self, state: frozenset[int], row: tuple[Number, ...]) -> tuple[Number, ...]:
        """``p(x)·r`` on the generated tokens, renormalised."""
        return normalised([p * self.factor if x in state else p for x, p in enumerate(row)])


@dataclass(frozen=True)
class FrequencyPenalty:
    """``p(x) ↦ p(x)·r^count(x)`` (``count``: occurrences among the generated tokens), then
    renormalised (``r = e^{−β}`` for OpenAI's ``frequency_penalty = β``)."""

    factor: Number

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _positive_factor("frequency factor", self.factor))

    @property
    def name(self) -> str:
        """``frequency(r)``."""
        return f"frequency({self.factor})"

    def initial(self, prompt: Prefix) -> tuple[int, ...]:
        """No counts yet (``counts[x]`` for each token id, grown on demand)."""
        return ()

    def advance(self, state: tuple[int, ...], token: int) -> tuple[int, ...]:
        """One more occurrence of ``token``."""
        return _count(state, token)

    def apply(self, state: tuple[int, ...], row: tuple[Number, ...]) -> tuple[Number, ...]:
        """``p(x)·r^count(x)``, renormalised."""
        return normalised([p * self.factor ** state[x] if x < len(state) and state[x] else p
                           for x, p in enumerate(row)])


# -- the processed models ---------------------------------------------------------------------


def _check_processors(processors: Sequence[StatefulProcessor]) -> tuple[StatefulProcessor, ...]:
    processors = tuple(processors)
    for proc in processors:
        if not all(callable(getattr(proc, m, None)) for m in ("initial", "advance", "apply")):
            raise InvalidParameterError(f"{proc!r} is not a StatefulProcessor (needs initial, "
                                        "advance and apply)")
    return processors


class _Processed:
    """What `RecomputedLM` and `IncrementalLM` share: the model, the processors, the prompt."""

    #: Rows are the processors' renormalisation of a validated row.
    prevalidated = True

    def __init__(self, model: LanguageModel, processors: Sequence[StatefulProcessor],
                 prompt: Sequence[int] = (), name: str | None = None) -> None:
        if not all(hasattr(model, a) for a in ("probs", "vocab_size", "eos")):
            raise InvalidParameterError(f"model is not a LanguageModel, got {model!r}")
        self.model = model
        self.processors = _check_processors(processors)
        self.prompt: Prefix = tuple(int(t) for t in prompt)
        self.vocab_size = model.vocab_size
        self.eos = model.eos
        label = getattr(model, "name", type(model).__name__)
        self.name = name or f"{label} + {', '.join(p.name for p in self.processors) or 'nothing'}"
        self.stats: dict[str, int] = {"calls": 0, "advances": 0}
        self._read = (model.probs if getattr(model, "prevalidated", False)
                      else lambda prefix: checked_probs(model, prefix))

    def generated(self, prefix: Sequence[int]) -> Prefix:
        """The tokens of ``prefix`` after the prompt (an error when it does not start with it)."""
        prefix = tuple(prefix)
        n = len(self.prompt)
        if prefix[:n] != self.prompt:
            raise InvalidParameterError(
                f"{self.name}: prefix {prefix!r} does not start with the prompt {self.prompt!r} "
                "this processed model was built for")
        return prefix[n:]

    def initial(self) -> tuple[Hashable, ...]:
        """Every processor's initial state."""
        return tuple(p.initial(self.prompt) for p in self.processors)

    def advance(self, states: tuple[Hashable, ...], token: int) -> tuple[Hashable, ...]:
        """Every processor's state advanced over ``token`` (counted in ``stats``)."""
        self.stats["advances"] += 1
        return tuple(p.advance(s, token) for p, s in zip(self.processors, states, strict=True))

    def processed_row(self, states: tuple[Hashable, ...], prefix: Prefix,
                      row: Sequence[Number] | None = None) -> tuple[Number, ...]:
        """The model's row after ``prefix`` (or ``row``, when given) through every processor,
        in order."""
        out = tuple(self._read(prefix) if row is None else row)
        for proc, state in zip(self.processors, states, strict=True):
            out = proc.apply(state, out)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class RecomputedLM(_Processed):
    """The reference law of stateful processors: each call folds ``advance`` over the whole
    generated prefix from ``initial`` (no state kept between calls). Use `recomputed`."""

    def probs(self, prefix: Prefix) -> tuple[Number, ...]:
        """``apply(fold(advance, initial, generated), p(· | prefix))``."""
        self.stats["calls"] += 1
        states = self.initial()
        for token in self.generated(prefix):
            states = self.advance(states, token)
        return self.processed_row(states, tuple(prefix))


@dataclass
class Slot:
    """One stack of states: ``stack[i]`` is the state after ``context[:i]``."""

    context: Prefix
    stack: list[tuple[Hashable, ...]]


class IncrementalLM(_Processed):
    """Stateful processors as an engine keeps them: ``slots`` stacks of states, each advanced on
    the tokens of the contexts it is asked about and rolled back (or forked) to the longest
    common prefix when a context leaves it. Use `incremental`.

    ``stats``: ``calls``, ``advances`` (processor steps), ``rollbacks`` (in-place rollbacks),
    ``discarded`` (states they popped) and ``forks`` (stacks copied into another slot).
    """

    def __init__(self, model: LanguageModel, processors: Sequence[StatefulProcessor],
                 prompt: Sequence[int] = (), name: str | None = None, *, slots: int = 1) -> None:
        super().__init__(model, processors, prompt, name)
        self.max_slots = check_int("slots", slots, low=1)
        self.slots: list[Slot] = [Slot((), [self.initial()])]  # least recently used first
        self.stats.update(rollbacks=0, discarded=0, forks=0)

    def probs(self, prefix: Prefix) -> tuple[Number, ...]:
        """The processed row after ``prefix``, from the slot that shares most of it."""
        return self.process(prefix, None)

    def process(self, prefix: Sequence[int],
                row: Sequence[Number] | None) -> tuple[Number, ...]:
        """The processed row after ``prefix``, of the model's ``row`` there (``None``: ask the
        model): what a session that computed the rows itself (`dsi_ref.backends`) calls."""
        self.stats["calls"] += 1
        prefix = tuple(prefix)
        generated = self.generated(prefix)
        slot, common = max(((s, _common(s.context, generated)) for s in self.slots),
                           key=lambda pair: pair[1])  # ties: the first, least recently used
        if common < len(slot.context):
            slot = self.leave(slot, common)
        for token in generated[len(slot.context):]:
            slot.stack.append(self.advance(slot.stack[-1], token))
        slot.context = generated
        self.slots.remove(slot)
        self.slots.append(slot)  # most recently used last
        return self.processed_row(slot.stack[-1], prefix, row)

    def leave(self, slot: Slot, common: int) -> Slot:
        """``slot``'s stack cut back to its first ``common`` tokens: forked into a new slot while
        there is room, else rolled back in place when it is the least recently used or the only
        slot, else forked over the least recently used one."""
        if len(self.slots) < self.max_slots or (self.max_slots > 1 and self.slots[0] is not slot):
            if len(self.slots) >= self.max_slots:
                self.slots.pop(0)
            fork = Slot(slot.context[:common], slot.stack[:common + 1])
            self.slots.append(fork)
            self.stats["forks"] += 1
            return fork
        self.rollback(slot, common)
        return slot

    def rollback(self, slot: Slot, common: int) -> None:
        """Pop the states of the tokens after the first ``common`` (rejected drafts)."""
        self.stats["rollbacks"] += 1
        self.stats["discarded"] += len(slot.stack) - common - 1
        del slot.stack[common + 1:]
        slot.context = slot.context[:common]


def _common(a: Prefix, b: Prefix) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def recomputed(model: LanguageModel, processors: Sequence[StatefulProcessor],
               prompt: Sequence[int] = (), *, name: str | None = None) -> RecomputedLM:
    """``model`` with stateful ``processors`` applied, state recomputed from the prompt at every
    call: the reference law (module note). Every prefix it is asked about must start with
    ``prompt``.

    >>> from dsi_ref.base.models import TableLM
    >>> m = recomputed(TableLM.context_free((Fraction(1, 2), Fraction(1, 2))),
    ...                [RepetitionPenalty(3)])
    >>> m.probs((0,))
    (Fraction(1, 5), Fraction(4, 5))
    """
    return RecomputedLM(model, processors, prompt, name)


def incremental(model: LanguageModel, processors: Sequence[StatefulProcessor],
                prompt: Sequence[int] = (), *, slots: int = 1,
                name: str | None = None) -> IncrementalLM:
    """``model`` with stateful ``processors`` kept incrementally, as engines keep them: advanced
    on drafts, rolled back on rejection (module note). Observably `recomputed`: every row is
    the same function of its prefix; ``slots`` stacks let DSI's task contexts keep a state each.
    """
    return IncrementalLM(model, processors, prompt, name, slots=slots)

