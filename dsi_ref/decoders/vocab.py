"""Speculation with a drafter of another vocabulary: SLEM, TLI and SLRS (Timor et al., ICML 2025,
arXiv 2502.05202), as step-wise runs over toy tokenizers.

The target ``p`` speaks vocabulary ``T`` (its tokenizer ``target_tokenizer``), the drafter ``q``
vocabulary ``D`` (``drafter_tokenizer``). The run keeps the *target's own ids* for what it has
committed; the drafter's context is the committed text re-tokenised canonically with ``D``
(`CrossVocabRun.drafter_context`). Each iteration is one target forward:

* **SLEM** (string-level exact match, the paper's Algorithm 2): the drafter drafts ``lookahead``
  tokens of ``D``; their text is re-tokenised canonically with ``T`` into the drafts
  ``t_1 .. t_m``; the target draws ``y_j ~ p(· | prefix, t_<j)`` and the drafts are accepted
  while ``y_j = t_j``; the first ``y_j`` that differs is committed and the iteration stops (a
  bonus ``y_{m+1}`` after a full match). Every committed token is a target draw: lossless for any
  drafter, any tokenizers.
* **TLI** (token-level intersection, Algorithm 4): ``q`` restricted to the tokens whose *string*
  is in both vocabularies, ``T ∩ D``, renormalised; the drafts are those shared tokens, read as
  ids of ``T``, and standard rejection sampling (accept ``min(1, p/q̃)``, else the residual
  ``(p − q̃)+``) verifies them with ``q̃`` the restricted law: a truthful proposal, so lossless.
* **SLRS** (string-level rejection sampling, Algorithm 3): as SLEM, the drafts are the target
  re-tokenisation of the drafter's text, but each is verified by rejection sampling against
  ``ψ_j``, the law of the ``j``-th target token of that re-tokenisation given the earlier ones —
  the drafter's *string* probability, a sum over every drafter tokenization that leads to the same
  target token (computed here by enumerating the drafter's ``|D|^lookahead`` continuations, the
  cost the paper warns of). ``t_j ~ ψ_j`` exactly, so rejection sampling is lossless.

The output is the committed target ids; losslessness is claimed for the law of the output
*strings* (``target_tokenizer.decode``; `dsi_ref.audit.strings`), which the law of the target
ids implies. docs/cross-vocabulary.md explains each algorithm with an exact computation.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, Literal

from ..base.errors import InvalidDistributionError, InvalidParameterError
from ..base.latency import Latency
from ..base.models import FunctionLM, LanguageModel, Number, Prefix
from ..base.randomness import Randomness, merge_point
from ..base.result import Run
from ..base.tokenizers import Tokenizer
from ..base.validate import check_int
from .common import check_inputs, model_probs
from .verification import RejectionSampling

__all__ = ["CROSS_VOCAB_ALGORITHMS", "CROSS_VOCAB_RUNS", "STATS", "CrossVocabAlgorithm",
           "CrossVocabRun", "SLEMRun", "SLRSRun", "TLIRun", "block_law", "conditional_law",
           "cross_vocab_speculative", "shared_tokens", "string_level_drafter"]

CrossVocabAlgorithm = Literal["slem", "tli", "slrs"]
#: The algorithm names of `cross_vocab_speculative`.
CROSS_VOCAB_ALGORITHMS: tuple[CrossVocabAlgorithm, ...] = ("slem", "tli", "slrs")
#: The counters of a run (`Run.stats`): ``drafts`` counts target-vocabulary drafts verified.
STATS = ("iterations", "drafts", "accepted", "target_forwards", "drafter_forwards")

_RULE = RejectionSampling()


def shared_tokens(drafter_tokenizer: Tokenizer, target_tokenizer: Tokenizer
                  ) -> dict[int, int]:
    """``T ∩ D`` as a map drafter id → target id: the tokens whose pieces are equal strings
    (EOS included when both vocabularies have it, with the same piece; BOS never)."""
    where = {piece: i for i, piece in enumerate(target_tokenizer.pieces)
             if i != target_tokenizer.bos}
    return {i: where[piece] for i, piece in enumerate(drafter_tokenizer.pieces)
            if i != drafter_tokenizer.bos and piece in where}


def _trim(block: Sequence[int], eos: int | None, room: int) -> tuple[int, ...]:
    """The drafts a target forward verifies: cut after the first EOS, and to ``room``."""
    out: list[int] = []
    for tok in block[:room]:
        out.append(tok)
        if tok == eos:
            break
    return tuple(out)


#: SLRS's drafter laws, kept per drafter tokenizer and weakly: an entry lives as long as its
#: drafter tokenizer does (the laws of a pair of models go with them, none is kept alive by this
#: module), and a tokenizer's table is emptied when it reaches `BLOCK_LAWS_PER_TOKENIZER`.
_BLOCK_LAWS: weakref.WeakKeyDictionary[
    Tokenizer, dict[tuple[int, int, Prefix, int, int],
                    tuple[object, Tokenizer, Mapping[tuple[int, ...], Number]]]
] = weakref.WeakKeyDictionary()
#: The most laws kept for one drafter tokenizer.
BLOCK_LAWS_PER_TOKENIZER = 8192


def clear_block_laws() -> None:
    """Forget every law `block_law` keeps (for benchmarks that time a cold run)."""
    _BLOCK_LAWS.clear()


def block_law(drafter: LanguageModel, drafter_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
              context: Prefix, lookahead: int, room: int) -> Mapping[tuple[int, ...], Number]:
    """The law of the target drafts of one SLEM/SLRS iteration: the drafter drafts ``lookahead``
    tokens after ``context`` (fewer if it drafts its EOS), their text is re-tokenised with the
    target's vocabulary, cut after EOS and to ``room`` tokens. Every drafter tokenization that
    leads to the same drafts adds its probability (the string-level sum of SLRS).

    Kept per drafter tokenizer, by the identity of the drafter and the target tokenizer (the
    entry holds both, so an id is not reused while it lives): the exact audit replays a run once
    per path. The table lives as long as the drafter tokenizer (`_BLOCK_LAWS`).
    """
    table = _BLOCK_LAWS.get(drafter_tokenizer)
    if table is None:
        table = _BLOCK_LAWS[drafter_tokenizer] = {}
    key = (id(drafter), id(target_tokenizer), tuple(context), lookahead, room)
    hit = table.get(key)
    if hit is not None and hit[0] is drafter and hit[1] is target_tokenizer:
        return hit[2]
    law = _block_law(drafter, drafter_tokenizer, target_tokenizer, tuple(context), lookahead,
                     room)
    if len(table) >= BLOCK_LAWS_PER_TOKENIZER:
        table.clear()
    table[key] = (drafter, target_tokenizer, law)
    return law


def _block_law(drafter: Any, drafter_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
               context: Prefix, lookahead: int, room: int) -> Mapping[tuple[int, ...], Number]:
    law: dict[tuple[int, ...], Number] = {}
    stack: list[tuple[tuple[int, ...], Number]] = [((), Fraction(1))]
    while stack:
        drafted, prob = stack.pop()
        if len(drafted) == lookahead or (drafted and drafted[-1] == drafter.eos):
            text = drafter_tokenizer.decode(drafted)
            block = _trim(target_tokenizer.encode(text), target_tokenizer.eos, room)
            law[block] = law.get(block, 0 * prob) + prob
            continue
        for tok, q in enumerate(model_probs(drafter, context + drafted)):
            if q > 0:
                stack.append((drafted + (tok,), prob * q))
    return law


def _conditional(law: Mapping[tuple[int, ...], Number], prefix: tuple[int, ...], vocab_size: int
                 ) -> list[Number] | None:
    """``ψ_j``: the law of ``block[j]`` given ``block[:j] == prefix`` and ``len(block) > j``
    (``j = len(prefix)``), over the target vocabulary; None when that event has no mass."""
    j = len(prefix)
    row: list[Number] = [Fraction(0)] * vocab_size
    for block, prob in law.items():
        if len(block) > j and block[:j] == prefix:
            row[block[j]] += prob
    total = sum(row)
    if not total > 0:
        return None
    return [x / total for x in row]


def conditional_law(law: Mapping[tuple[int, ...], Number], prefix: Sequence[int],
                    vocab_size: int) -> list[Number]:
    """``ψ_j``, the per-position law of a block of target tokens: the law of ``block[j]`` given
    ``block[:j] == prefix`` and ``len(block) > j`` (``j = len(prefix)``), over a vocabulary of
    ``vocab_size`` ids, when ``block`` follows ``law``.

    With ``law`` a `dsi_ref.decoders.vocab.block_law` (the target drafts of one iteration of
    a drafter of another vocabulary) this is the string-level proposal that SLRS verifies each
    draft against, and ``prefix=()`` the row of `dsi_ref.decoders.vocab.string_level_drafter`
    (the same computation, ``_conditional``, which the decoders use without the checks). Exact
    when ``law`` is.

    Raises:
        InvalidParameterError: ``vocab_size`` is not an int >= 1, a block of ``law`` continues
            ``prefix`` with an id outside the vocabulary, or no block does (the event has
            probability 0: ``ψ`` is undefined there).

    >>> from fractions import Fraction as F
    >>> law = {(0, 1): F(1, 2), (0, 2): F(1, 4), (1,): F(1, 4)}
    >>> [str(x) for x in conditional_law(law, (), 3)]
    ['3/4', '1/4', '0']
    >>> [str(x) for x in conditional_law(law, (0,), 3)]
    ['0', '2/3', '1/3']
    """
    vocab_size = check_int("vocab_size", vocab_size, low=1)
    prefix = tuple(prefix)
    j = len(prefix)
    outside = sorted({b[j] for b in law if len(b) > j and b[:j] == prefix
                      and not (isinstance(b[j], int) and 0 <= b[j] < vocab_size)}, key=repr)
    if outside:
        raise InvalidParameterError(f"conditional_law: blocks continue {prefix!r} with "
                                    f"{outside!r}, not ids of a vocabulary of {vocab_size}")
    row = _conditional(law, prefix, vocab_size)
    if row is None:
        raise InvalidParameterError(f"conditional_law: no block of positive probability "
                                    f"continues {prefix!r}, so the law of its next token is "
                                    "undefined")
    return row


class CrossVocabRun:
    """One run of a cross-vocabulary decoder; subclasses define `iteration`.

    Steps a variant may override: `drafter_context` (the drafter's ids for the committed text),
    `draft` (the drafter's tokens), `commit` (append an iteration's decided target ids).
    """

    name: ClassVar[str] = ""

    def __init__(self, target: LanguageModel, drafter: LanguageModel,
                 target_tokenizer: Tokenizer, drafter_tokenizer: Tokenizer,
                 prompt: Prefix, max_new_tokens: int, rng: Randomness, lookahead: int,
                 latency: Latency) -> None:
        self.target, self.drafter = target, drafter
        self.target_tokenizer, self.drafter_tokenizer = target_tokenizer, drafter_tokenizer
        self.prompt, self.max_new_tokens, self.rng = prompt, max_new_tokens, rng
        self.lookahead, self.latency = lookahead, latency
        self.out: list[int] = []
        self.stats = dict.fromkeys(STATS, 0)

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> Run:
        """Iterate until ``max_new_tokens`` target tokens or EOS; one target forward each."""
        entry = True
        while not self.finished():
            merge_point(self.rng, (tuple(self.out), tuple(self.stats.values())), entry=entry)
            entry = False
            self.stats["iterations"] += 1
            self.stats["target_forwards"] += 1
            self.iteration()
        tokens = tuple(self.out[:self.max_new_tokens])
        time = (self.stats["drafter_forwards"] * Fraction(self.latency.drafter)  # type: ignore[arg-type]
                + self.stats["target_forwards"] * Fraction(self.latency.target))  # type: ignore[arg-type]
        return Run(tokens, time, stats=dict(self.stats))

    def finished(self) -> bool:
        """The budget is spent or the last committed token is EOS."""
        return (len(self.out) >= self.max_new_tokens
                or (bool(self.out) and self.out[-1] == self.target.eos))

    def iteration(self) -> None:
        """Draft, verify with one target forward, commit."""
        raise NotImplementedError

    # -- steps ---------------------------------------------------------------------------------

    @property
    def room(self) -> int:
        """How many drafts this iteration may verify: one token stays for the bonus."""
        return self.max_new_tokens - len(self.out) - 1

    def context(self, decided: Sequence[int] = ()) -> tuple[int, ...]:
        """The target's ids after the prompt: committed, then decided in this iteration."""
        return tuple(self.out) + tuple(decided)

    def target_row(self, decided: Sequence[int]) -> Sequence[Number]:
        """``p`` after the prompt, the committed ids and ``decided``."""
        return model_probs(self.target, self.prompt + self.context(decided))

    def drafter_context(self) -> Prefix:
        """The drafter's ids for the text so far: decode with ``T``, re-tokenise with ``D``
        (BOS once, at the start, when ``D`` has one)."""
        text = self.target_tokenizer.decode(self.prompt + tuple(self.out))
        tok = self.drafter_tokenizer
        return tok.encode(text, add_bos=tok.bos is not None)

    def draft(self, context: Prefix) -> tuple[int, ...]:
        """``lookahead`` drafter tokens ``d_i ~ q(· | context, d_<i)`` (fewer after its EOS)."""
        drafted: tuple[int, ...] = ()
        while len(drafted) < self.lookahead and not (drafted and drafted[-1] == self.drafter.eos):
            row = model_probs(self.drafter, context + drafted)
            self.stats["drafter_forwards"] += 1
            drafted += (self.rng.categorical(row),)
        return drafted

    def to_target(self, drafted: Sequence[int]) -> tuple[int, ...]:
        """The drafter's text re-tokenised canonically with ``T``, cut to what one forward
        verifies (`room`, and after EOS)."""
        text = self.drafter_tokenizer.decode(drafted)
        return _trim(self.target_tokenizer.encode(text), self.target_tokenizer.eos, self.room)

    def commit(self, decided: Sequence[int]) -> None:
        """Append an iteration's decided target ids to the committed ones."""
        self.out.extend(decided)

    def verify_rejection(self, drafts: Sequence[int], proposals: Sequence[Sequence[Number]]
                         ) -> None:
        """Rejection sampling of each draft ``t_j ~ proposals[j]`` against ``p``; the residual
        at the first rejection, a bonus after a full acceptance; then `commit`."""
        decided: list[int] = []
        for tok, q in zip(drafts, proposals, strict=True):
            p = self.target_row(decided)
            ctx = self.context(decided)
            self.stats["drafts"] += 1
            if _RULE.accept(p, q, tok, self.rng, ctx):
                self.stats["accepted"] += 1
                decided.append(tok)
                if tok == self.target.eos:
                    self.commit(decided)
                    return
            else:
                decided.append(_RULE.residual(p, q, self.rng, ctx))
                self.commit(decided)
                return
        decided.append(_RULE.bonus(self.target_row(decided), self.rng, self.context(decided)))
        self.commit(decided)


class SLEMRun(CrossVocabRun):
    """String-level exact match: target draws compared with the re-tokenised drafts."""

    name = "slem"

    def iteration(self) -> None:
        """Draft, re-tokenise, accept while the target's draw equals the draft."""
        drafts = self.to_target(self.draft(self.drafter_context())) if self.room > 0 else ()
        decided: list[int] = []
        for tok in drafts:
            y = self.rng.categorical(self.target_row(decided))
            self.stats["drafts"] += 1
            decided.append(y)
            if y != tok:
                self.commit(decided)
                return
            self.stats["accepted"] += 1
            if y == self.target.eos:
                self.commit(decided)
                return
        decided.append(self.rng.categorical(self.target_row(decided)))
        self.commit(decided)


class TLIRun(CrossVocabRun):
    """Token-level intersection: drafts from ``q`` restricted to ``T ∩ D``, rejection sampling."""

    name = "tli"

    def iteration(self) -> None:
        """Draft shared tokens autoregressively, then verify them by rejection sampling."""
        shared = shared_tokens(self.drafter_tokenizer, self.target_tokenizer)
        context = self.drafter_context()
        drafts: list[int] = []
        proposals: list[list[Number]] = []
        drafted: tuple[int, ...] = ()
        back = {t: d for d, t in shared.items()}
        while len(drafts) < min(self.lookahead, self.room) and (
                not drafts or drafts[-1] != self.target.eos):
            row = model_probs(self.drafter, context + drafted)
            self.stats["drafter_forwards"] += 1
            mass = sum(row[d] for d in shared)
            if not mass > 0:
                break  # the drafter puts no mass on T ∩ D: nothing to propose
            proposal: list[Number] = [Fraction(0)] * self.target.vocab_size
            for d, t in shared.items():
                proposal[t] = row[d] / mass
            tok = self.rng.categorical(proposal)
            drafts.append(tok)
            proposals.append(proposal)
            drafted += (back[tok],)
        self.verify_rejection(drafts, proposals)


class SLRSRun(CrossVocabRun):
    """String-level rejection sampling: SLEM's drafts verified against their string law ``ψ``."""

    name = "slrs"

    def iteration(self) -> None:
        """Draft, re-tokenise, verify ``t_j`` against ``ψ_j`` by rejection sampling."""
        if self.room <= 0:
            self.verify_rejection((), ())
            return
        context = self.drafter_context()
        drafts = self.to_target(self.draft(context))
        law = block_law(self.drafter, self.drafter_tokenizer, self.target_tokenizer, context,
                        self.lookahead, self.room)
        proposals = []
        for j in range(len(drafts)):
            row = _conditional(law, drafts[:j], self.target.vocab_size)
            assert row is not None  # the drafts themselves have positive probability
            proposals.append(row)
        self.verify_rejection(drafts, proposals)


#: The run class of each algorithm.
CROSS_VOCAB_RUNS: dict[str, type[CrossVocabRun]] = {
    "slem": SLEMRun, "tli": TLIRun, "slrs": SLRSRun}


def _check_pair(model: LanguageModel, tokenizer: Tokenizer, label: str) -> None:
    if not isinstance(tokenizer, Tokenizer):
        raise InvalidParameterError(f"{label}_tokenizer must be a Tokenizer, got "
                                    f"{type(tokenizer).__name__}")
    if model.vocab_size != tokenizer.vocab_size:
        raise InvalidParameterError(f"the {label} has {model.vocab_size} tokens but its "
                                    f"tokenizer {tokenizer.name!r} has {tokenizer.vocab_size}")
    if model.eos != tokenizer.eos:
        raise InvalidParameterError(f"the {label}'s EOS ({model.eos}) is not its tokenizer's "
                                    f"({tokenizer.eos})")


def cross_vocab_speculative(target: LanguageModel, drafter: LanguageModel,
                            target_tokenizer: Tokenizer, drafter_tokenizer: Tokenizer,
                            prompt: Sequence[int], max_new_tokens: int, rng: Randomness, *,
                            lookahead: int = 2, algorithm: CrossVocabAlgorithm | str = "slem",
                            latency: Latency | None = None,
                            run_class: type[CrossVocabRun] | None = None) -> Run:
    """Speculation with a drafter of another vocabulary (SLEM, TLI or SLRS; module docstring).

    Args:
        target, target_tokenizer: ``p`` over vocabulary ``T`` and its tokenizer (same size and
            EOS).
        drafter, drafter_tokenizer: ``q`` over vocabulary ``D`` and its tokenizer.
        prompt: target ids (a BOS first, if the target expects one).
        max_new_tokens: the budget ``N``, in target tokens.
        lookahead: drafter tokens per iteration (SLEM, SLRS) or target-vocabulary drafts (TLI).
        algorithm: ``"slem"``, ``"tli"`` or ``"slrs"``.
        latency: constant forward costs (``c`` per drafter forward, 1 per target forward).
        run_class: a `CrossVocabRun` subclass to run instead (variants, the zoo's mutants).

    Returns a `Run` of target ids; its ``stats`` count iterations (target forwards), drafts,
    accepted drafts and drafter forwards. The law of the decoded output equals the target's.
    """
    check_int("lookahead", lookahead, low=1)
    if run_class is None:
        if algorithm not in CROSS_VOCAB_RUNS:
            raise InvalidParameterError(f"algorithm must be one of {CROSS_VOCAB_ALGORITHMS}, got "
                                        f"{algorithm!r}")
        run_class = CROSS_VOCAB_RUNS[algorithm]
    latency = Latency() if latency is None else latency
    if not latency.is_constant:
        raise InvalidParameterError("cross_vocab_speculative needs constant forward costs")
    prompt = check_inputs(target, prompt, max_new_tokens, rng=rng)
    check_inputs(drafter, (), 0)
    _check_pair(target, target_tokenizer, "target")
    _check_pair(drafter, drafter_tokenizer, "drafter")
    return run_class(target, drafter, target_tokenizer, drafter_tokenizer, prompt,
                     max_new_tokens, rng, lookahead, latency).run()


def string_level_drafter(drafter: LanguageModel, drafter_tokenizer: Tokenizer,
                         target_tokenizer: Tokenizer, *, depth: int = 1) -> FunctionLM:
    """The drafter seen from the target's vocabulary: the next-token law over ``T`` of the first
    target token of the re-tokenised text of ``depth`` drafter tokens (``ψ_1`` of SLRS), after
    the drafter context of the prefix's text. Any same-vocabulary decoder (`dsi`, `speculative`)
    can use it as a drafter; its rows are exact when ``q``'s are.

    Raises `InvalidDistributionError` at a prefix where no drafted text spells a target token
    (the drafter drafts only its BOS).
    """
    check_int("depth", depth, low=1)
    _check_pair(drafter, drafter_tokenizer, "drafter")

    def probs(prefix: Prefix) -> list[Number]:
        text = target_tokenizer.decode(prefix)
        context = drafter_tokenizer.encode(text, add_bos=drafter_tokenizer.bos is not None)
        law = block_law(drafter, drafter_tokenizer, target_tokenizer, context, depth, 1)
        row = _conditional(law, (), target_tokenizer.vocab_size)
        if row is None:
            raise InvalidDistributionError(f"string_level_drafter at prefix {prefix!r}: no "
                                           "drafted text spells a target token")
        return row

    return FunctionLM(target_tokenizer.vocab_size, probs, eos=target_tokenizer.eos,
                      name=f"string-level({getattr(drafter, 'name', 'drafter')})")
