"""The audit matrix over Hugging Face ``transformers``' candidate generators.

``model.generate`` picks one of eight candidate generators from its arguments
(``GenerationMixin._get_candidate_generator``); each drafts candidate tokens that the target then
verifies (``_speculative_sampling`` when the generator returns draft logits and ``do_sample``;
otherwise by comparing the candidates with the target's own samples, or argmaxes). This module
drives every generator that can be driven by models built in code, on toy models whose exact law
is known, crossed with ``do_sample`` on and off and with the processors temperature, top-k, top-p
and repetition penalty, and audits each cell with `statistical_audit` against the *processed*
target's exact law:

* sampled cells: ``dsi_ref.target_distribution`` of the toy target after
  `dsi_ref.recomputed` (repetition penalty ``θ``: ``p(x) ↦ p(x)^θ`` on seen tokens, prompt
  included; HF's rule on log-softmax logits) then `dsi_ref.processed` (temperature ``1/2``,
  top-k, top-p, in HF's order, exact `Fraction` rows);
* greedy cells: the point mass on the greedy sequence of the same processed target (HF applies
  the repetition penalty and no warper when ``do_sample=False``).

The toy models (vocabulary ``V = 4``, so HF's default ``top_k = 50`` keeps every token: it does not
matter here, and the explicit ``top_k = 2`` cells exercise the cut):

* target and drafter: seeded bigram `TableLM`s with zeros, wrapped by `to_hf` (logits = exact
  log-probabilities);
* the early-exit model, the bigram-head drafter that universal speculative decoding prunes, and
  the word-level tokenizers of the different-tokenizer generators (the assistant's vocabulary is
  the target's words in another id order plus one word the target lacks): built in code by
  `dsi_ref.backends.hf.toys`.

Generators that cannot be driven here are listed in `NOT_DRIVEN` with the exact reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import torch
import transformers

from ...audit.exact import Law
from ...audit.laws import target_distribution
from ...audit.statistical import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
    StatisticalReport,
    statistical_audit,
)
from ...base.models import LanguageModel, TableLM, checked_probs
from ...base.processors import processed
from ...base.stateful import RepetitionPenalty, recomputed
from .adapter import ToyConfig, to_hf
from .assisted import single_thread
from .toys import (
    BOS_WORD,
    BigramHeadLM,
    early_exit_model,
    plain_generation_config,
    word_tokenizer,
)

__all__ = [
    "CELLS",
    "FAST_CELLS",
    "GENERATORS",
    "GREEDY_PROMPT",
    "ID_VOCAB_ORDER",
    "NOT_DRIVEN",
    "USD_VOCAB_ORDER",
    "Cell",
    "CellResult",
    "DraftCheck",
    "Settings",
    "audit_cell",
    "cell_sampler",
    "counting_acceptance",
    "quiet_transformers",
    "reference_law",
    "run_matrix",
    "toy_pair",
    "usd_draft_check",
    "usd_first_token_audit",
]

#: The eight candidate generators of transformers 5.x, in HF's order of dispatch.
GENERATORS: tuple[str, ...] = (
    "AssistedCandidateGenerator",
    "AssistedCandidateGeneratorDifferentTokenizers",
    "UniversalSpeculativeDecodingGenerator",
    "PromptLookupCandidateGenerator",
    "EarlyExitCandidateGenerator",
    "SinglePositionMultiTokenCandidateGenerator",
    "MTPCandidateGenerator",
    "DFlashTokenCandidateGenerator",
)

#: Why a generator has no cell here (transformers 5.x), read from its dispatch and constructor.
NOT_DRIVEN: dict[str, str] = {
    "SinglePositionMultiTokenCandidateGenerator": (
        "dispatched only when the assistant's class name starts with 'Gemma4Assistant' or "
        "'Gemma4UnifiedAssistant' and the target's with 'Gemma4' or 'Gemma3n'; it needs the "
        "target's shared_kv_states and hidden states (Gemma 3n/4 KV sharing), which no toy "
        "model provides; a random-weight Gemma 4 pair is the way (not built here). Reading the "
        "code: it drafts by argmax but returns the raw logits as candidate logits, so under "
        "do_sample=True the verifier's q (softmax of those logits) is not the law the draft was "
        "drawn from: a suspected loss, unverified here"),
    "MTPCandidateGenerator": (
        "needs config.num_mtp_layers and MtpModel.from_pretrained(main_model), which reads the "
        "MTP weights from the main model's checkpoint files (config.name_or_path, safetensors): "
        "a model class with MTP layers (DeepSeek-V3-style) saved to disk; no toy class has them. "
        "Reading the code: drafts are sampled from the processed MTP logits and those same "
        "processed logits are returned as q, the consistent pair"),
    "DFlashTokenCandidateGenerator": (
        "dispatched by generation_config.speculation_type == 'dflash'; needs a DFlash draft "
        "model (config.target_layer_ids, block_size, mask_token_id, a forward taking "
        "noise_embeds and context_hidden_states with a DFlashCache) and a target exposing "
        "hidden states, input and output embeddings; no such draft class ships with "
        "transformers and no toy provides it"),
}

def quiet_transformers() -> None:
    """Silence ``transformers``' warnings (each toy ``generate`` call would repeat them)."""
    from transformers.utils import logging

    logging.set_verbosity_error()


_VOCAB = 4
_WORDS = ("a", "b", "c", "d")


def toy_pair(target_seed: int = 3, drafter_seed: int = 4) -> tuple[TableLM, TableLM]:
    """The matrix's (target, drafter): seeded bigram `TableLM`s over ``V = 4``, with zeros."""
    target = TableLM.random(_VOCAB, 1, seed=target_seed, name="hf-target")
    drafter = TableLM.random(_VOCAB, 1, seed=drafter_seed, name="hf-drafter")
    return target, drafter


@dataclass(frozen=True)
class Settings:
    """The processing of one cell: ``None`` leaves a step off (temperature ``1/n`` only: exact)."""

    temperature: Fraction | None = None
    top_k: int | None = None
    top_p: Fraction | None = None
    repetition_penalty: int | None = None

    @property
    def label(self) -> str:
        """A short label: ``plain``, ``T=1/2``, ``top-k 2``, ``top-p 7/10``, ``rep 2``."""
        parts = []
        if self.temperature is not None:
            parts.append(f"T={self.temperature}")
        if self.top_k is not None:
            parts.append(f"top-k {self.top_k}")
        if self.top_p is not None:
            parts.append(f"top-p {self.top_p}")
        if self.repetition_penalty is not None:
            parts.append(f"rep {self.repetition_penalty}")
        return " ".join(parts) or "plain"

    def generate_kwargs(self) -> dict[str, Any]:
        """The same processing as ``generate`` keyword arguments."""
        return {"temperature": float(self.temperature) if self.temperature else None,
                "top_k": self.top_k, "top_p": float(self.top_p) if self.top_p else None,
                "repetition_penalty": (float(self.repetition_penalty)
                                       if self.repetition_penalty else None)}


@dataclass(frozen=True)
class Cell:
    """One cell of the matrix: a generator, ``do_sample``, the processing, the prompt."""

    generator: str
    do_sample: bool
    settings: Settings = field(default_factory=Settings)
    prompt: tuple[int, ...] = (0, 1)
    max_new_tokens: int = 3
    #: The assistant tokenizer's ``get_vocab()`` order (tokenizer-pair generators only).
    vocab_order: tuple[str, ...] | None = None
    #: transformers' ``assistant_ensemble_weight`` (static ensemble verification, >= 5.25;
    #: `dsi_ref.backends.hf.ensemble`), or ``None`` for plain verification.
    ensemble_weight: Fraction | None = None

    @property
    def label(self) -> str:
        """The settings' label, and the ``get_vocab()`` order when it is the id order."""
        if self.vocab_order == ID_VOCAB_ORDER:
            return f"{self.settings.label}, get_vocab in id order"
        if self.ensemble_weight is not None:
            return f"{self.settings.label}, ensemble w={self.ensemble_weight}"
        return self.settings.label

    @property
    def name(self) -> str:
        """``generator / sample|greedy / settings``."""
        return f"{self.generator} / {'sample' if self.do_sample else 'greedy'} / {self.label}"


#: The assistant's word order for the different-tokenizer generators (one extra word, "z"):
#: assistant id ``i`` is ``_ASSISTANT_WORDS[i]``, BOS ``<s>`` is id 5.
_ASSISTANT_WORDS = ("c", "z", "a", "d", "b")
#: The ``get_vocab()`` order of the assistant tokenizer in the matrix: one of the orders a fast
#: tokenizer's hash map may return (not the id order), pinned so that the cells are reproducible.
USD_VOCAB_ORDER: tuple[str, ...] = ("<s>", "b", "d", "a", "z", "c")
#: The id order: the only kind of order under which universal SD's head pruning is consistent.
ID_VOCAB_ORDER: tuple[str, ...] = (*_ASSISTANT_WORDS, BOS_WORD)
_PAIR = ("AssistedCandidateGeneratorDifferentTokenizers", "UniversalSpeculativeDecodingGenerator")

_SETTINGS = (Settings(), Settings(temperature=Fraction(1, 2)), Settings(top_k=2),
             Settings(top_p=Fraction(7, 10)), Settings(repetition_penalty=2))
_GREEDY_SETTINGS = (Settings(), Settings(repetition_penalty=2))
#: Greedy cells start from (0, 2): after (0, 1) the penalised target has a tie (no argmax). On
#: these toys the penalty never changes the greedy sequence (checked over every prompt of length
#: 2 and 3), so a greedy cell with it checks that the penalty breaks nothing, not that it applies.
GREEDY_PROMPT = (0, 2)


def _cells() -> tuple[Cell, ...]:
    cells: list[Cell] = []
    for generator in GENERATORS:
        if generator in NOT_DRIVEN:
            continue
        samples = generator != "AssistedCandidateGeneratorDifferentTokenizers"  # greedy only
        greedy = generator != "UniversalSpeculativeDecodingGenerator"  # sampling only
        if samples:
            cells += [Cell(generator, True, s) for s in _SETTINGS]
        if generator == "UniversalSpeculativeDecodingGenerator":  # the control of USD_FINDING
            cells.append(Cell(generator, True, Settings(), vocab_order=ID_VOCAB_ORDER))
        if greedy:
            cells += [Cell(generator, False, s, prompt=GREEDY_PROMPT) for s in _GREEDY_SETTINGS]
    return tuple(cells)


#: Every driven cell: HF dispatches the different-tokenizer case to
#: ``AssistedCandidateGeneratorDifferentTokenizers`` when ``do_sample=False`` and to
#: ``UniversalSpeculativeDecodingGenerator`` when ``do_sample=True``, so each has one half.
CELLS: tuple[Cell, ...] = _cells()
#: The default test run's subset: every greedy cell (a point mass: about 20 draws each).
#: Universal SD's sampled cells are covered there by the white-box `usd_draft_check`.
FAST_CELLS: tuple[Cell, ...] = tuple(c for c in CELLS if not c.do_sample)


# -- samplers -----------------------------------------------------------------------------------

def _wiring(cell: Cell, target: LanguageModel | None = None,
            drafter: LanguageModel | None = None) -> tuple[Any, torch.Tensor, dict[str, Any]]:
    """``(model, input_ids, generate keyword arguments)`` of a cell."""
    if target is None or drafter is None:
        target, drafter = toy_pair()
    bos = target.vocab_size
    input_ids = torch.tensor([[bos, *cell.prompt]])
    kwargs: dict[str, Any] = {
        "do_sample": cell.do_sample, "max_new_tokens": cell.max_new_tokens,
        "attention_mask": torch.ones_like(input_ids)}
    if cell.do_sample:
        kwargs.update(cell.settings.generate_kwargs())
    else:
        kwargs["repetition_penalty"] = cell.settings.generate_kwargs()["repetition_penalty"]
    if cell.ensemble_weight is not None:
        kwargs["assistant_ensemble_weight"] = float(cell.ensemble_weight)
    g = cell.generator
    model: Any
    if g == "AssistedCandidateGenerator":
        model = to_hf(target)
        assistant: Any = to_hf(drafter)
        assistant.generation_config.num_assistant_tokens = 2
        assistant.generation_config.assistant_confidence_threshold = 0.0
        kwargs["assistant_model"] = assistant
    elif g == "EarlyExitCandidateGenerator":
        model = early_exit_model(target, drafter)
        model.generation_config.num_assistant_tokens = 2
        model.generation_config.assistant_confidence_threshold = 0.0
        kwargs["assistant_early_exit"] = 1
    elif g == "PromptLookupCandidateGenerator":
        model = to_hf(target)
        kwargs["prompt_lookup_num_tokens"] = 2
    elif g in _PAIR:
        model = to_hf(target)
        order = [(_WORDS.index(w) if w in _WORDS else None) for w in _ASSISTANT_WORDS]
        config = ToyConfig(toy_vocab_size=len(_ASSISTANT_WORDS))
        assistant = BigramHeadLM(config, drafter, [*order, None])
        assistant.eval()
        assistant.generation_config = plain_generation_config(config)
        assistant.generation_config.num_assistant_tokens = 2
        assistant.generation_config.assistant_confidence_threshold = 0.0
        kwargs.update(assistant_model=assistant, tokenizer=word_tokenizer(_WORDS),
                      assistant_tokenizer=word_tokenizer(
                          _ASSISTANT_WORDS, vocab_order=cell.vocab_order or USD_VOCAB_ORDER))
    else:
        raise ValueError(f"{g}: not driven here ({NOT_DRIVEN.get(g, 'unknown generator')})")
    return model, input_ids, kwargs


def cell_sampler(cell: Cell, target: LanguageModel | None = None,
                 drafter: LanguageModel | None = None, *,
                 warm_up: bool = True) -> Callable[[int], tuple[int, ...]]:
    """``seed -> generated tokens`` of ``model.generate`` wired for ``cell.generator`` (torch's
    global generator seeded by ``seed``; HF has no other source of randomness here).

    ``warm_up`` draws once (seed 0) before returning: universal speculative decoding's first
    call on a fresh assistant is not the same function of the seed as the later ones: it prunes
    the assistant's head in place during that call, and ``prune_linear_layer`` builds a new
    ``nn.Linear`` whose random initialisation draws from torch's global generator after the
    seed was set (the law is the same; the audit's determinism check refuses the sampler).
    Warmed up, every call is the same function of its seed."""
    model, input_ids, kwargs = _wiring(cell, target, drafter)

    def sample(seed: int) -> tuple[int, ...]:
        torch.manual_seed(seed)
        with torch.no_grad():
            out = model.generate(input_ids, **kwargs)
        return tuple(int(t) for t in out[0, input_ids.shape[1]:])

    if warm_up:
        sample(0)  # universal SD: the first call installs the pruned head (see the docstring)
    return sample


# -- the reference ------------------------------------------------------------------------------


def reference_model(cell: Cell, target: LanguageModel | None = None) -> LanguageModel:
    """The processed target the cell must sample from (exact `Fraction` rows)."""
    target = target if target is not None else toy_pair()[0]
    s = cell.settings
    model: LanguageModel = target
    if s.repetition_penalty is not None:
        model = recomputed(model, [RepetitionPenalty(s.repetition_penalty)], cell.prompt)
    if cell.do_sample and (s.temperature, s.top_k, s.top_p) != (None, None, None):
        model = processed(model, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p)
    return model


def reference_law(cell: Cell, target: LanguageModel | None = None) -> Law:
    """The exact law of the cell's output: the processed target's, or its greedy point mass."""
    model = reference_model(cell, target)
    if cell.do_sample:
        return target_distribution(model, cell.prompt, cell.max_new_tokens)
    prefix = tuple(cell.prompt)
    for _ in range(cell.max_new_tokens):
        row = checked_probs(model, prefix)
        best = max(row)
        if sum(1 for p in row if p == best) > 1:
            raise ValueError(f"greedy reference of {cell.name}: a tie at {prefix}")
        prefix += (row.index(best),)
    return {prefix[len(cell.prompt):]: Fraction(1)}


# -- white box: universal speculative decoding ---------------------------------------------------


@dataclass(frozen=True)
class DraftCheck:
    """What universal SD's verifier is told, against what the draft was drawn from.

    ``max_tv``: over every draft position of the sampled runs, the largest TV between the law
    the assistant drew the draft token from (its processed scores, mapped to target ids through
    the pruned head's own order) and the law handed to ``_speculative_sampling`` (the output of
    ``get_target_logits``). ``first_token``: the exact law of the cell's first output token given
    those two rows at the prompt (speculative sampling with draft law ``q`` verified against
    ``q'``: ``P(y) = q(y) min(1, p(y)/q'(y)) + (1 - Σ_x q(x) min(1, p(x)/q'(x))) r(y)``,
    ``r ∝ max(p - q', 0)``; the rows are HF's floats read exactly), ``first_token_tv`` its TV to
    the processed target's row, a lower bound on the cell's TV."""

    positions: int
    max_tv: float
    first_token: Law
    reference: Law
    first_token_tv: Fraction
    head_order: tuple[int, ...]


def _softmax_fractions(logits: torch.Tensor) -> list[Fraction]:
    probs = torch.softmax(logits.to(torch.float64), dim=-1)
    return [Fraction(float(x)) for x in probs]


def usd_draft_check(cell: Cell, seeds: Iterable[int] = range(8)) -> DraftCheck:
    """Instrument ``AssistantToTargetTranslator.get_target_logits`` (restored afterwards) while
    the cell's sampler runs on ``seeds``; see `DraftCheck`."""
    from transformers.generation import candidate_generator as cg

    if cell.generator != "UniversalSpeculativeDecodingGenerator" or not cell.do_sample:
        raise ValueError(f"{cell.name}: the draft check is for sampled universal SD cells")
    original = cg.AssistantToTargetTranslator.get_target_logits
    records: list[tuple[torch.Tensor, torch.Tensor]] = []
    order: list[tuple[int, ...]] = []

    def spy(self: Any, assistant_logits: torch.Tensor) -> torch.Tensor:
        reported: torch.Tensor = original(self, assistant_logits)
        drawn = torch.full_like(reported, -math.inf)
        columns = self._assistant_to_target_input_ids[self.assistant_overlap_token_ids]
        drawn[..., columns] = assistant_logits
        records.append((drawn[0].clone(), reported[0].clone()))
        order[:] = [tuple(int(i) for i in self.assistant_overlap_token_ids)]
        return reported

    cg.AssistantToTargetTranslator.get_target_logits = spy  # type: ignore[method-assign]
    try:
        sample = cell_sampler(cell)
        for seed in seeds:
            sample(seed)
    finally:
        cg.AssistantToTargetTranslator.get_target_logits = original  # type: ignore[method-assign]
    tvs = [0.5 * float((torch.softmax(d[i].double(), -1) - torch.softmax(r[i].double(), -1))
                       .abs().sum())
           for d, r in records for i in range(d.shape[0])]
    vocab = _VOCAB
    p = [Fraction(x) for x in checked_probs(reference_model(cell), cell.prompt)]
    q = _softmax_fractions(records[0][0][0])[:vocab]
    q_told = _softmax_fractions(records[0][1][0])[:vocab]
    accept = [q[y] * (Fraction(1) if q_told[y] <= p[y] else p[y] / q_told[y])
              for y in range(vocab)]
    residual = [max(Fraction(0), p[y] - q_told[y]) for y in range(vocab)]
    rejected = 1 - sum(accept)
    total = sum(residual)
    law = {(y,): accept[y] + (rejected * residual[y] / total if total else Fraction(0))
           for y in range(vocab)}
    reference = {(y,): Fraction(p[y]) for y in range(vocab)}
    tv = sum((abs(law[k] - reference[k]) for k in law), Fraction(0)) / 2
    return DraftCheck(len(tvs), max(tvs), {k: v for k, v in law.items() if v},
                      {k: v for k, v in reference.items() if v}, tv, order[0])


def usd_first_token_audit(cell: Cell, *, power: float = 1 - POLICY_MISS,
                          alpha: float = POLICY_ALPHA, seed: int = 0,
                          check: DraftCheck | None = None) -> StatisticalReport:
    """The black-box confirmation of `usd_draft_check`: the cell's first output token audited
    against the processed target's row, with power ``power`` against every law at TV ``>=``
    9/10 of the white-box first-token TV (so a miss has probability ``<= 1 - power``)."""
    check = check if check is not None else usd_draft_check(cell)
    if check.first_token_tv == 0:
        raise ValueError(f"{cell.name}: the white-box check finds no loss to confirm")
    sampler = cell_sampler(cell)
    with single_thread():
        return statistical_audit(lambda s: sampler(s)[:1], check.reference,
                                 alternative=Alternative.tv(0.9 * float(check.first_token_tv)),
                                 alpha=alpha, power=power, seed=seed)


# -- the audit ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellResult:
    """The verdict of one cell, or why it has none."""

    generator: str
    mode: str
    settings: str
    verdict: str
    epsilon: float | None = None
    power: float | None = None
    alpha: float | None = None
    n_samples: int = 0
    seconds: float = 0.0
    samples_per_second: float = 0.0
    empirical_tv: float | None = None
    reason: str = ""
    version: str = field(default_factory=lambda: str(transformers.__version__))
    #: candidate tokens verified while the cell sampled, and how many were accepted
    drafted: int = 0
    accepted: int = 0
    report: StatisticalReport | None = field(default=None, repr=False, compare=False)

    @property
    def acceptance(self) -> float | None:
        """The share of the cell's candidate tokens accepted (``None``: none verified)."""
        return self.accepted / self.drafted if self.drafted else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the report left out)."""
        return {k: v for k, v in self.__dict__.items() if k != "report"}


@contextmanager
def counting_acceptance(counts: list[int]) -> Iterator[None]:
    """Count, while inside, the candidate tokens ``generate`` verified and how many it accepted
    (``counts`` becomes ``[drafted, accepted]``, added to): every candidate generator's
    ``update_candidate_strategy`` is told both after each verification (its ``scores`` cover the
    candidates and the token after them; ``num_matches`` the candidates accepted). The methods
    are restored on exit."""
    from transformers.generation import candidate_generator as cg

    patched: list[tuple[type, Any]] = []
    for obj in vars(cg).values():
        if isinstance(obj, type) and "update_candidate_strategy" in vars(obj):
            original = vars(obj)["update_candidate_strategy"]

            def counted(self: Any, input_ids: Any, scores: Any, num_matches: int,
                        _original: Any = original) -> Any:
                counts[0] += int(scores.shape[1]) - 1
                counts[1] += int(num_matches)
                return _original(self, input_ids, scores, num_matches)

            patched.append((obj, original))
            obj.update_candidate_strategy = counted  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for obj, original in patched:
            obj.update_candidate_strategy = original  # type: ignore[attr-defined]


def audit_cell(cell: Cell, *, epsilon: float = 0.2, alpha: float = POLICY_ALPHA,
               power: float = 0.99, seed: int = 0,
               progress: Callable[[Iterable[int]], Iterable[int]] | None = None) -> CellResult:
    """`statistical_audit` of one cell against its exact reference law, power ``power`` against
    every law at TV >= ``epsilon``; the candidates verified and accepted while it sampled are
    counted (`counting_acceptance`)."""
    law = reference_law(cell)
    sampler = cell_sampler(cell)
    start = time.perf_counter()
    counts = [0, 0]
    with single_thread(), counting_acceptance(counts):
        report = statistical_audit(sampler, law, alternative=Alternative.tv(epsilon), alpha=alpha,
                                   power=power, seed=seed, progress=progress)
    seconds = time.perf_counter() - start
    return CellResult(cell.generator, "sample" if cell.do_sample else "greedy",
                      cell.settings.label, report.verdict, epsilon, report.power, report.alpha,
                      report.n_samples, seconds, report.n_samples / seconds,
                      report.empirical_tv, drafted=counts[0], accepted=counts[1], report=report)


def run_matrix(cells: Sequence[Cell] = CELLS, *, epsilon: float = 0.2, seed: int = 0,
               on_cell: Callable[[Cell], None] | None = None) -> list[CellResult]:
    """Every cell's verdict, then one row per generator that cannot be driven."""
    results = []
    for cell in cells:
        if on_cell is not None:
            on_cell(cell)
        results.append(audit_cell(cell, epsilon=epsilon, seed=seed))
    results += [CellResult(g, "-", "-", "not driven", reason=why) for g, why in NOT_DRIVEN.items()]
    return results
