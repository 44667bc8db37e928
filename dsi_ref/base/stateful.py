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
  is the automaton's. It keeps the tokens with a transition to a live state (one from which an
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

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from .errors import ConstraintDeadEndError, InvalidParameterError
from .models import LanguageModel, Number, Prefix, checked_probs
from .validate import check_int, is_int

__all__ = [
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

#: The grammar's state outside the language (after a forbidden token or after EOS).
DEAD = -1


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


def _normalise(weights: list[Number]) -> tuple[Number, ...]:
    total = sum(weights)
    return tuple(w / total for w in weights)


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
        return _normalise([p ** self.penalty if x in state else p for x, p in enumerate(row)])


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
        return _normalise([p * self.factor if x in state else p for x, p in enumerate(row)])


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
        return _normalise([p * self.factor ** state[x] if x < len(state) and state[x] else p
                           for x, p in enumerate(row)])


# -- grammars ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenDFA:
    """A deterministic automaton over token ids, pruned to its live states.

    ``delta`` maps ``(state, token)`` to the next state; only transitions into *live* states
    (from which an accepting state is reachable) are kept, so every kept transition can still
    end in the language. EOS is not a symbol of the automaton: `GrammarConstraint` allows it in
    accepting states. Build one with `TokenDFA.from_regex`.
    """

    vocab_size: int
    eos: int | None
    start: int
    delta: Mapping[tuple[int, int], int] = field(repr=False)
    accepting: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        check_int("vocab_size", self.vocab_size)
        states = {self.start} | set(self.delta.values()) | {s for s, _ in self.delta}
        for (state, token), nxt in self.delta.items():
            if not (is_int(token) and 0 <= token < self.vocab_size) or token == self.eos:
                raise InvalidParameterError(f"transition ({state}, {token}) -> {nxt}: the token "
                                            "is not a non-EOS id of the vocabulary")
        # liveness: states from which an accepting state is reachable
        live = set(self.accepting) & states
        changed = True
        while changed:
            changed = False
            for (state, _), nxt in self.delta.items():
                if nxt in live and state not in live:
                    live.add(state)
                    changed = True
        if self.start not in live:
            raise InvalidParameterError("the grammar's language is empty: no accepting state is "
                                        "reachable from the start")
        delta = {key: nxt for key, nxt in self.delta.items() if key[0] in live and nxt in live}
        allowed: dict[int, tuple[int, ...]] = {}
        for state in sorted(live):
            tokens = tuple(sorted(t for (s, t) in delta if s == state))
            if state in self.accepting and self.eos is not None:
                tokens = tuple(sorted(tokens + (self.eos,)))
            if not tokens:
                raise InvalidParameterError(
                    f"state {state} of the grammar admits no token (accepting, no continuation "
                    "and no EOS): generation would have to stop where it cannot")
            allowed[state] = tokens
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "accepting", frozenset(self.accepting) & live)
        object.__setattr__(self, "_allowed", allowed)

    def step(self, state: int, token: int) -> int:
        """The state after ``token``; `DEAD` (``-1``) when the grammar forbids it or after EOS."""
        return self.delta.get((state, token), DEAD)

    def allowed(self, state: int) -> tuple[int, ...]:
        """The tokens the grammar allows in ``state`` (EOS in accepting states), sorted."""
        table: dict[int, tuple[int, ...]] = self._allowed  # type: ignore[attr-defined]
        return table.get(state, ())

    @classmethod
    def from_regex(cls, pattern: str, vocab_size: int, eos: int | None = None,
                   symbols: Mapping[str, Iterable[int]] | None = None) -> TokenDFA:
        """The automaton of a regular expression whose symbols are tokens.

        Syntax: a symbol character (by default the digits ``0``-``9`` name the token ids
        ``0``-``9``; ``symbols`` maps characters to sets of token ids instead), ``.`` (any
        non-EOS token), ``[...]`` (a set of symbols), ``(...)``, ``|``, and the postfix ``*``,
        ``+`` and ``?``. The whole generated sequence must match (before EOS).

        >>> dfa = TokenDFA.from_regex("(01)*", vocab_size=3, eos=2)
        >>> dfa.allowed(dfa.start), dfa.allowed(dfa.step(dfa.start, 0))
        ((0, 2), (1,))
        """
        check_int("vocab_size", vocab_size)
        table = ({str(i): frozenset({i}) for i in range(min(vocab_size, 10)) if i != eos}
                 if symbols is None
                 else {str(k): frozenset(v) for k, v in symbols.items()})
        for char, ids in table.items():
            if len(char) != 1 or char in _SPECIAL:
                raise InvalidParameterError(f"symbol {char!r} must be one character, not one "
                                            f"of {_SPECIAL!r}")
            if not all(is_int(t) and 0 <= t < vocab_size and t != eos for t in ids):
                raise InvalidParameterError(f"symbol {char!r} names {sorted(ids)!r}: not all "
                                            f"non-EOS ids below {vocab_size}")
        anything = frozenset(t for t in range(vocab_size) if t != eos)
        nfa = _Parser(pattern, table, anything).parse()
        return _determinise(nfa, vocab_size, eos)


_SPECIAL = "()|*+?.[]"


@dataclass
class _NFA:
    """Thompson's construction: epsilon edges and token-set edges between numbered states."""

    eps: dict[int, list[int]] = field(default_factory=dict)
    edges: dict[int, list[tuple[frozenset[int], int]]] = field(default_factory=dict)
    count: int = 0
    start: int = 0
    end: int = 0

    def new(self) -> int:
        self.count += 1
        return self.count - 1


class _Parser:
    """Recursive descent over ``alt := concat ('|' concat)*``, ``concat := post*``,
    ``post := atom ('*' | '+' | '?')*``; each rule returns an NFA fragment ``(start, end)``."""

    def __init__(self, pattern: str, table: Mapping[str, frozenset[int]],
                 anything: frozenset[int]) -> None:
        self.s, self.i, self.table, self.anything = pattern, 0, table, anything
        self.nfa = _NFA()

    def error(self, what: str) -> InvalidParameterError:
        return InvalidParameterError(f"regex {self.s!r} at {self.i}: {what}")

    def parse(self) -> _NFA:
        start, end = self.alt()
        if self.i != len(self.s):
            raise self.error(f"unexpected {self.s[self.i]!r}")
        self.nfa.start, self.nfa.end = start, end
        return self.nfa

    def eps(self, a: int, b: int) -> None:
        self.nfa.eps.setdefault(a, []).append(b)

    def alt(self) -> tuple[int, int]:
        branches = [self.concat()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            branches.append(self.concat())
        if len(branches) == 1:
            return branches[0]
        start, end = self.nfa.new(), self.nfa.new()
        for a, b in branches:
            self.eps(start, a)
            self.eps(b, end)
        return start, end

    def concat(self) -> tuple[int, int]:
        start = end = self.nfa.new()
        while self.i < len(self.s) and self.s[self.i] not in "|)":
            a, b = self.post()
            self.eps(end, a)
            end = b
        return start, end

    def post(self) -> tuple[int, int]:
        a, b = self.atom()
        while self.i < len(self.s) and self.s[self.i] in "*+?":
            op = self.s[self.i]
            self.i += 1
            start, end = self.nfa.new(), self.nfa.new()
            self.eps(start, a)
            self.eps(b, end)
            if op in "*?":
                self.eps(start, end)
            if op in "*+":
                self.eps(b, a)
            a, b = start, end
        return a, b

    def atom(self) -> tuple[int, int]:
        if self.i >= len(self.s):
            raise self.error("expected a symbol")
        char = self.s[self.i]
        self.i += 1
        if char == "(":
            fragment = self.alt()
            if self.i >= len(self.s) or self.s[self.i] != ")":
                raise self.error("missing ')'")
            self.i += 1
            return fragment
        if char == "[":
            close = self.s.find("]", self.i)
            if close < 0:
                raise self.error("missing ']'")
            ids = frozenset().union(*(self.symbol(c) for c in self.s[self.i:close]))
            self.i = close + 1
            return self.edge(ids)
        if char == ".":
            return self.edge(self.anything)
        if char in _SPECIAL:
            raise self.error(f"unexpected {char!r}")
        return self.edge(self.symbol(char))

    def symbol(self, char: str) -> frozenset[int]:
        if char not in self.table:
            raise self.error(f"unknown symbol {char!r} (known: {''.join(sorted(self.table))})")
        return self.table[char]

    def edge(self, ids: frozenset[int]) -> tuple[int, int]:
        a, b = self.nfa.new(), self.nfa.new()
        self.nfa.edges.setdefault(a, []).append((ids, b))
        return a, b


def _determinise(nfa: _NFA, vocab_size: int, eos: int | None) -> TokenDFA:
    """The subset construction over the token ids (states renumbered from 0 = start)."""
    def closure(states: Iterable[int]) -> frozenset[int]:
        todo = list(states)
        out = set(todo)
        while todo:
            for nxt in nfa.eps.get(todo.pop(), ()):
                if nxt not in out:
                    out.add(nxt)
                    todo.append(nxt)
        return frozenset(out)

    start = closure([nfa.start])
    number = {start: 0}
    todo = [start]
    delta: dict[tuple[int, int], int] = {}
    while todo:
        current = todo.pop()
        for token in range(vocab_size):
            if token == eos:
                continue
            moved = closure(b for s in current for ids, b in nfa.edges.get(s, ())
                            if token in ids)
            if not moved:
                continue
            if moved not in number:
                number[moved] = len(number)
                todo.append(moved)
            delta[number[current], token] = number[moved]
    accepting = frozenset(n for subset, n in number.items() if nfa.end in subset)
    return TokenDFA(vocab_size, eos, 0, delta, accepting)


@dataclass(frozen=True)
class GrammarConstraint:
    """Masks the tokens ``dfa`` forbids (EOS outside accepting states) and renormalises; the
    state is the automaton's (module note: rows outside the language, dead ends)."""

    dfa: TokenDFA
    label: str = "grammar"

    @property
    def name(self) -> str:
        """The grammar's label."""
        return self.label

    def initial(self, prompt: Prefix) -> int:
        """The start state (the grammar constrains generated tokens, not the prompt)."""
        return self.dfa.start

    def advance(self, state: int, token: int) -> int:
        """``δ(state, token)``, or `DEAD`."""
        return DEAD if state == DEAD else self.dfa.step(state, token)

    def apply(self, state: int, row: tuple[Number, ...]) -> tuple[Number, ...]:
        """The row restricted to the allowed tokens and renormalised (unchanged when `DEAD`)."""
        if state == DEAD:
            return row
        allowed = self.dfa.allowed(state)
        weights: list[Number] = [0 * p for p in row]
        for x in allowed:
            weights[x] = row[x]
        if not sum(weights) > 0:
            raise ConstraintDeadEndError(
                f"{self.label}: the model gives probability 0 to every token the grammar allows "
                f"in state {state} ({list(allowed)}); the processed law is undefined here")
        return _normalise(weights)


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

