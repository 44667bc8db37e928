"""Toy tokenizers: strings ↔ token ids, with merges, so that one string has several tokenizations.

A `Tokenizer` is a vocabulary of *pieces* (one string per id) plus optional special tokens: a BOS
(beginning of sequence; never produced by `Tokenizer.encode` unless asked, skipped by
`Tokenizer.decode`) and an EOS (its piece is a reserved character that appears in no other
piece, so a string ends at most once and EOS is one token in every vocabulary that has it).

* `Tokenizer.encode` is the *canonical* tokenization: greedy longest match from the left, as BPE
  and WordPiece-style tokenizers behave on these toy vocabularies; deterministic.
* `Tokenizer.tokenizations` lists *every* tokenization of a string (the merges make several):
  a model over tokens puts mass on non-canonical ones too, which is why losslessness across
  vocabularies is a statement about the law of output *strings* (docs/cross-vocabulary.md).

Nothing here is random and nothing renormalises; a string that the vocabulary cannot spell
raises `InvalidParameterError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from .errors import InvalidParameterError

__all__ = ["Tokenizer"]


@dataclass(frozen=True, eq=False)
class Tokenizer:
    """A toy vocabulary: ``pieces[i]`` is the string of token ``i``.

    Args:
        pieces: one non-empty string per id, all distinct.
        bos: the id of the BOS token (its piece is only a label), or ``None``.
        eos: the id of the EOS token, or ``None``; its piece must share no character with the
            other pieces.
        name: for messages.

    >>> t = Tokenizer(("a", "b", "ab"), name="t")
    >>> t.encode("abab"), t.decode((0, 1, 2))
    ((2, 2), 'abab')
    >>> t.tokenizations("ab")
    ((0, 1), (2,))
    """

    pieces: tuple[str, ...]
    bos: int | None = None
    eos: int | None = None
    name: str = "tokenizer"

    def __post_init__(self) -> None:
        pieces = tuple(self.pieces)
        object.__setattr__(self, "pieces", pieces)
        if not pieces or not all(isinstance(p, str) and p for p in pieces):
            raise InvalidParameterError(f"{self.name}: pieces must be non-empty strings, got "
                                        f"{pieces!r}")
        if len(set(pieces)) != len(pieces):
            raise InvalidParameterError(f"{self.name}: pieces must be distinct, got {pieces!r}")
        for label, tok in (("bos", self.bos), ("eos", self.eos)):
            if tok is not None and (type(tok) is not int or not 0 <= tok < len(pieces)):
                raise InvalidParameterError(f"{self.name}: {label}={tok!r} is not an id below "
                                            f"{len(pieces)}")
        if self.bos is not None and self.bos == self.eos:
            raise InvalidParameterError(f"{self.name}: bos and eos must differ")
        if self.eos is not None:
            mark = set(pieces[self.eos])
            others = [p for i, p in enumerate(pieces) if i not in (self.eos, self.bos)]
            if any(mark & set(p) for p in others):
                raise InvalidParameterError(f"{self.name}: the EOS piece {pieces[self.eos]!r} "
                                            "shares a character with another piece")

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r}, pieces={self.pieces!r}, bos={self.bos}, eos={self.eos})"

    @property
    def vocab_size(self) -> int:
        """Number of ids."""
        return len(self.pieces)

    @cached_property
    def _spellable(self) -> tuple[tuple[str, int], ...]:
        """(piece, id) of every token encode may produce, longest first (ties: lowest id)."""
        ids = [i for i in range(len(self.pieces)) if i != self.bos]
        return tuple(sorted(((self.pieces[i], i) for i in ids), key=lambda x: (-len(x[0]), x[1])))

    def decode(self, ids: Sequence[int]) -> str:
        """The string of ``ids``: pieces concatenated, BOS skipped (a special token)."""
        out = []
        for i in ids:
            if type(i) is not int or not 0 <= i < len(self.pieces):
                raise InvalidParameterError(f"{self.name}: {i!r} is not a token id")
            if i != self.bos:
                out.append(self.pieces[i])
        return "".join(out)

    def encode(self, text: str, *, add_bos: bool = False) -> tuple[int, ...]:
        """The canonical tokenization of ``text``: greedy longest match from the left (BOS first
        when ``add_bos``). Raises `InvalidParameterError` if no piece matches somewhere."""
        out: list[int] = [self.bos] if add_bos and self.bos is not None else []
        pos = 0
        while pos < len(text):
            for piece, tok in self._spellable:
                if text.startswith(piece, pos):
                    out.append(tok)
                    pos += len(piece)
                    break
            else:
                raise InvalidParameterError(f"{self.name} cannot spell {text[pos:]!r} (in "
                                            f"{text!r})")
        return tuple(out)

    def tokenizations(self, text: str) -> tuple[tuple[int, ...], ...]:
        """Every sequence of non-BOS ids whose decoding is ``text``, in lexicographic order."""
        table: list[list[tuple[int, ...]]] = [[] for _ in range(len(text) + 1)]
        table[len(text)] = [()]
        for pos in range(len(text) - 1, -1, -1):
            for piece, tok in self._spellable:
                if text.startswith(piece, pos):
                    table[pos] += [(tok,) + rest for rest in table[pos + len(piece)]]
        return tuple(sorted(table[0]))
