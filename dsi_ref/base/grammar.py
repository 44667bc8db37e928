"""Grammar constraints: a deterministic automaton over token ids, compiled from a regular
expression over the vocabulary's ids, and the stateful processor that masks what it forbids.

`TokenDFA.from_regex` parses a small regex language over token ids (concatenation, ``|``, ``*``,
``+``, ``?``, ``.`` for any token, ``[...]`` sets, parentheses), builds a Thompson NFA and
determinises it (subset construction), keeping only the transitions into live states (from
which an accepting state is reachable). `GrammarConstraint` is the `StatefulProcessor` of
`dsi_ref.base.stateful` whose state is the automaton's: it keeps the tokens with a transition
to a live state and EOS in accepting states, and renormalises (`dsi_ref.base.stateful`'s module
note says what happens outside the language and at a dead end).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .errors import ConstraintDeadEndError, InvalidParameterError
from .models import Number, Prefix, normalised
from .validate import check_int, is_int

__all__ = ["DEAD", "GrammarConstraint", "TokenDFA"]

#: The grammar's state outside the language (after a forbidden token or after EOS).
DEAD = -1


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
        return normalised(weights)
