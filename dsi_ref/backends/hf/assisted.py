"""Statistical audits that need torch: HF assisted generation, our decoders through the adapter,
the zoo as negative controls, and the dtype study.

Every audit here compares samples with an *exact* reference law (`dsi_ref.target_distribution` of
a toy model, or of the adapter's float rows), through
`dsi_ref.audit.statistical.statistical_audit`, with
the power stated against a named alternative before sampling. ``dsi-ref audit --section hf`` and
the tests call these functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import transformers

from ...audit.exact import Law, exact_distribution, total_variation
from ...audit.laws import target_distribution
from ...audit.statistical import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
    StatisticalReport,
    required_samples,
    statistical_audit,
)
from ...audit.suite import ModelPair, default_suite
from ...audit.zoo import MUTANTS, Mutant
from ...base.errors import NumericalError, ScheduleDependenceError
from ...base.models import LanguageModel, TableLM
from ...base.randomness import Randomness, Sampler
from ...decoders.autoregressive import autoregressive
from ...decoders.dsi import dsi
from ...decoders.speculative import speculative
from .adapter import DTYPES, AssistedSampler, HFLanguageModel, Processing, to_hf

__all__ = [
    "ZERO_DRAFT_FIXED_IN",
    "ControlResult",
    "DtypeRow",
    "HFAuditConfig",
    "accepts_zero_probability_draft",
    "audit_hf_assisted",
    "audit_own_decoders",
    "dtype_study",
    "hf_pair",
    "negative_controls",
    "single_thread",
    "transformers_version",
    "wrap",
]

#: The first transformers release whose ``_speculative_sampling`` accepts a draft with ``r < p/q``
#: (a draft of target probability 0 is never accepted). Through 5.24 it accepted with
#: ``r <= p/q``, and ``r = torch.rand_like(...)`` is 0 with probability 2^-24 (float32), so such a
#: draft was committed with probability 2^-24 per drafted position; 5.25 made the test strict.
ZERO_DRAFT_FIXED_IN = (5, 25)


def accepts_zero_probability_draft(version: str) -> bool:
    """Whether transformers ``version`` (``"5.24.0"``) accepts a draft the target gives
    probability 0 when its float32 uniform is exactly 0 (the bug through 5.24; see
    `ZERO_DRAFT_FIXED_IN`).

    >>> accepts_zero_probability_draft("5.24.0"), accepts_zero_probability_draft("5.25.0")
    (True, False)
    """
    release = tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:2])
    return release < ZERO_DRAFT_FIXED_IN


@contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one thread (tiny tensors: thread hand-offs cost more than the work)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class HFAuditConfig:
    """The HF assisted-generation audit: models, budget, and what the power is stated against.

    Defaults: vocabulary 4, 3 new tokens, bigram target and drafter (seeded rational rows with
    zeros), HF's own assistant settings (``None`` keeps them; see `AssistedSampler`), power 0.99
    against every law at TV >= 0.1, false-alarm rate `POLICY_ALPHA`.
    """

    vocab_size: int = 4
    max_new_tokens: int = 3
    target_seed: int = 3
    drafter_seed: int = 4
    num_assistant_tokens: int | None = None
    schedule: str | None = None
    confidence_threshold: float | None = None
    epsilon: float = 0.1
    alpha: float = POLICY_ALPHA
    power: float = 0.99
    seed: int = 0
    processing: Processing = field(default_factory=Processing)

    def __post_init__(self) -> None:
        if self.vocab_size < 2 or self.max_new_tokens < 1:
            raise ValueError("need vocab_size >= 2 and max_new_tokens >= 1")
        if not 0 < self.epsilon <= 1:
            raise ValueError(f"epsilon must lie in (0, 1], got {self.epsilon!r}")


def hf_pair(config: HFAuditConfig) -> ModelPair:
    """The toy (target, drafter) pair of ``config`` (exact `Fraction` rows)."""
    target = TableLM.random(config.vocab_size, 1, seed=config.target_seed, name="hf-target")
    drafter = TableLM.random(config.vocab_size, 1, seed=config.drafter_seed, name="hf-drafter")
    return ModelPair(f"bigram V={config.vocab_size}", target, drafter, (),
                     config.max_new_tokens)


def _reference(model: LanguageModel, pair: ModelPair, processing: Processing) -> Law:
    if processing == Processing():
        return target_distribution(model, pair.prompt, pair.max_new_tokens)
    processed = HFLanguageModel(to_hf(model, torch.float64), bos_token_id=model.vocab_size,
                                processing=processing)
    return target_distribution(processed, pair.prompt, pair.max_new_tokens)


def audit_hf_assisted(config: HFAuditConfig | None = None, *, drafter: bool = True,
                      progress: Callable[[Any], Any] | None = None) -> StatisticalReport:
    """Statistical audit of ``transformers``' assisted generation (``do_sample=True``).

    The reference is the exact law of the toy target (after ``config.processing``, computed in
    float64; HF sees the log-probabilities rounded to float32, a TV difference of about 1e-8 by
    the dtype study, far below the audit's resolution). ``drafter=False`` audits plain HF
    sampling instead (a control: it shares everything but the assistant).
    """
    config = config or HFAuditConfig()
    pair = hf_pair(config)
    sampler = AssistedSampler(to_hf(pair.target), to_hf(pair.drafter) if drafter else None,
                              pair.prompt, pair.max_new_tokens,
                              num_assistant_tokens=config.num_assistant_tokens,
                              schedule=config.schedule,
                              confidence_threshold=config.confidence_threshold,
                              processing=config.processing)
    law = _reference(pair.target, pair, config.processing)
    with single_thread():
        return statistical_audit(sampler, law, alternative=Alternative.tv(config.epsilon),
                                 alpha=config.alpha, power=config.power, seed=config.seed,
                                 progress=progress)


def wrap(model: LanguageModel, dtype: torch.dtype = torch.float32) -> HFLanguageModel:
    """A toy model through the torch adapter both ways: toy -> HF model (``dtype``) -> float
    `LanguageModel` (vocabulary ``V + 1``: the BOS id has probability 0)."""
    return HFLanguageModel(to_hf(model, dtype), bos_token_id=model.vocab_size,
                           name=f"torch[{dtype}]({getattr(model, 'name', type(model).__name__)})")


def _decoders() -> dict[str, Callable[..., Any]]:
    return {
        "autoregressive": lambda t, d, prompt, n, rng: autoregressive(t, prompt, n, rng),
        "speculative": lambda t, d, prompt, n, rng: speculative(t, d, prompt, n, rng,
                                                                lookahead=2),
        "dsi": lambda t, d, prompt, n, rng: dsi(t, d, prompt, n, rng, lookahead=2, sp_degree=2),
    }


def audit_own_decoders(pair: ModelPair, *, epsilon: float = 0.1, alpha: float = POLICY_ALPHA,
                       power: float = 0.99, seed: int = 0, dtype: torch.dtype = torch.float32,
                       ) -> dict[str, StatisticalReport]:
    """Our decoders on ``pair`` run through the torch adapter, sampled with `Sampler`, audited
    against the exact law of the wrapped target."""
    target, drafter = wrap(pair.target, dtype), wrap(pair.drafter, dtype)
    law = target_distribution(target, pair.prompt, pair.max_new_tokens)
    reports = {}
    with single_thread():
        for name, fn in _decoders().items():
            def sample(s: int, fn: Callable[..., Any] = fn) -> tuple[int, ...]:
                return tuple(fn(target, drafter, pair.prompt, pair.max_new_tokens,
                                Sampler(s)).tokens)
            reports[name] = statistical_audit(sample, law, alternative=Alternative.tv(epsilon),
                                              alpha=alpha, power=power, seed=seed)
    return reports


@dataclass(frozen=True)
class ControlResult:
    """A zoo mutant through the statistical harness: where, with how many samples, caught?"""

    mutant: str
    via: str
    model: str
    mutant_tv: float
    planned_power: float
    report: StatisticalReport

    @property
    def flagged(self) -> bool:
        """The harness rejected the mutant (as it must)."""
        return self.report.rejected


def _mutant_program(mutant: Mutant, target: LanguageModel, drafter: LanguageModel,
                    pair: ModelPair, max_new_tokens: int
                    ) -> Callable[[Randomness], tuple[int, ...]]:
    def program(rng: Randomness) -> tuple[int, ...]:
        return tuple(mutant.decoder(target, drafter, pair.prompt, max_new_tokens, rng,
                                    lookahead=2).tokens)
    return program


def negative_controls(via: str = "sampler", *, mutants: Sequence[str] | None = None,
                      max_new_tokens: int = 3, alpha: float = POLICY_ALPHA,
                      miss: float = POLICY_MISS, seed: int = 0, margin: int = 2,
                      max_samples: int = 20_000) -> list[ControlResult]:
    """Push every zoo mutant through `statistical_audit` and report whether it is flagged.

    For each mutant, the first suite pair (in suite order) on which its exact law under the
    sampler's schedule (``scheduler="first"``) differs from the law it promises (the target's,
    or the processed target's for a mutant that samples with processors: `Mutant.law`) and can
    be detected with at most ``max_samples`` draws is used. The power is stated against the
    mutant's exact law and must reach ``1 - miss``; ``margin`` times the required sample size is
    drawn (at least 100). The stated power is the G test's own (its exact miss against that
    law, or a proven bound on it), so the required size alone already keeps the miss at most
    ``miss``: the margin is no longer needed for the guarantee (it was when the power was
    Pearson's noncentral chi-square approximation). It is kept as slack at the cost of the
    extra draws: a control's miss is then far below the ``miss`` it declares, and the report
    states the power at the size drawn. ``via="torch"`` runs the mutant on the models wrapped
    by the torch adapter (float32), ``"sampler"`` on the exact toy models.
    """
    if via not in ("sampler", "torch"):
        raise ValueError(f"via must be 'sampler' or 'torch', got {via!r}")
    results = []
    names = list(MUTANTS) if mutants is None else list(mutants)
    with single_thread():
        for name in names:
            mutant = MUTANTS[name]
            found = _controlled(mutant, via, max_new_tokens, alpha, miss, max_samples)
            if found is None:
                raise LookupError(f"mutant {name!r}: no suite pair where its sampled law differs "
                                  f"from the target's detectably within {max_samples} samples")
            pair, program, law, mutant_law, n = found
            report = statistical_audit(_seeded(program), law, max(margin * n, 100),
                                       alternative=Alternative.of_law(mutant_law, name),
                                       alpha=alpha, power=1 - miss, seed=seed)
            results.append(ControlResult(name, via, pair.name,
                                         float(total_variation(mutant_law, law)), report.power,
                                         report))
    return results


def _seeded(program: Callable[[Randomness], tuple[int, ...]]) -> Callable[[int], tuple[int, ...]]:
    return lambda seed: program(Sampler(seed))


def _controlled(mutant: Mutant, via: str, max_new_tokens: int, alpha: float, miss: float,
                max_samples: int) -> tuple[ModelPair, Callable[[Randomness], tuple[int, ...]],
                                           Law, Law, int] | None:
    for pair in default_suite():
        target, drafter = ((wrap(pair.target), wrap(pair.drafter)) if via == "torch"
                           else (pair.target, pair.drafter))
        program = _mutant_program(mutant, target, drafter, pair, max_new_tokens)
        try:
            mutant_law = exact_distribution(program, scheduler="first")
        except (ScheduleDependenceError, NumericalError):
            continue
        promised = target if mutant.law is None else mutant.law(target)  # e.g. processed
        law = target_distribution(promised, pair.prompt, max_new_tokens)
        if mutant_law == law:
            continue
        n = required_samples(law, Alternative.of_law(mutant_law, mutant.name), alpha=alpha,
                             power=1 - miss, max_samples=max_samples)
        if n is not None:
            return pair, program, law, mutant_law, n
    return None


def _program(fn: Callable[..., Any], target: LanguageModel, drafter: LanguageModel,
             prompt: Sequence[int], max_new_tokens: int
             ) -> Callable[[Randomness], tuple[int, ...]]:
    def program(rng: Randomness) -> tuple[int, ...]:
        return tuple(fn(target, drafter, prompt, max_new_tokens, rng).tokens)
    return program


@dataclass(frozen=True)
class DtypeRow:
    """TV distance that computing the logits in ``dtype`` introduces, for one pair and decoder."""

    model: str
    dtype: str
    decoder: str
    tv: float


def dtype_study(pairs: Sequence[ModelPair] | None = None, max_new_tokens: int = 3,
                dtypes: Sequence[str] = ("float64", "float32", "bfloat16")) -> list[DtypeRow]:
    """Exact TV distance between each decoder's output law on the dtype-``d`` wrapped models and
    the exact target law, for every pair of the toy suite.

    The decoders' laws are computed exactly (`exact_distribution` over the float rows), so the
    only error is the rounding of the log-probabilities to ``dtype``: this is the float noise a
    user can expect, to tell it from a real bug (which shows up as a TV orders of magnitude
    larger; see the zoo).
    """
    rows = []
    with single_thread():
        for pair in pairs if pairs is not None else default_suite():
            exact = target_distribution(pair.target, pair.prompt, max_new_tokens)
            for name in dtypes:
                target, drafter = wrap(pair.target, DTYPES[name]), wrap(pair.drafter, DTYPES[name])
                for decoder, fn in _decoders().items():
                    program = _program(fn, target, drafter, pair.prompt, max_new_tokens)
                    law = exact_distribution(program)
                    rows.append(DtypeRow(pair.name, name, decoder,
                                         float(total_variation(law, exact))))
    return rows


def transformers_version() -> str:
    """The installed ``transformers`` version (the verdict is for this version)."""
    return str(transformers.__version__)

