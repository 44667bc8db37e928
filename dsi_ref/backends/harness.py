"""A statistical audit harness for any engine: ``seed -> tokens`` against a reference law.

An engine under test is described by an `EngineUnderTest`: a sampler ``seed -> generated tokens``
(the engine, seeded, on one prompt) and the reference it must sample from: a `LanguageModel`
whose rows are the target's (a toy `TableLM` loaded into the engine as a real model, or the
target's own next-token probabilities read from the engine, e.g. through
`dsi_ref.FunctionLM`), the prompt and the number of new tokens ``N``. The reference law is
`dsi_ref.target_distribution` of that model: the law of the first ``N`` tokens, or the greedy
sequence's point mass when ``greedy``. `audit_engine` runs `statistical_audit` on the sampler
with the power stated in advance: the sample size is `required_samples` for power ``P`` against
every law at TV ``>= ε`` from the reference, at false-alarm rate ``α``.

``dsi-ref audit-engine MODULE:CALLABLE`` is the command-line face of `audit_engine`: ``CALLABLE``
takes no argument and returns an `EngineUnderTest`. Nothing here imports torch: the engine's own
module does, if it needs to.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..audit.laws import target_distribution
from ..audit.statistical import (
    POLICY_ALPHA,
    Alternative,
    LawLike,
    StatisticalReport,
    required_samples,
    sample_seeds,
    statistical_audit,
)
from ..base.errors import InvalidParameterError, UnderpoweredError
from ..base.models import LanguageModel

__all__ = ["AuditPlan", "EngineUnderTest", "audit_engine", "bigram_llama", "hf_assisted",
           "hf_assisted_greedy", "load_engine", "plan_audit", "report_json", "torch_si",
           "torch_si_greedy"]


@dataclass(frozen=True)
class EngineUnderTest:
    """An engine, seeded, on one prompt, and the law it must sample from.

    Attributes:
        sample: ``seed -> generated tokens`` (the new tokens only, at most ``max_new_tokens``,
            shorter when the engine stops at EOS); the same seed must give the same tokens.
        target: the reference model (rows of the target ``p``, after any processing the engine
            applies: temperature, top-k, top-p).
        prompt: the prompt the sampler starts from (as the reference model's ids).
        max_new_tokens: ``N``, the number of new tokens the sampler draws.
        greedy: the engine decodes greedily: the reference is the point mass on the target's
            greedy sequence (ties: lowest id).
        name: a label for reports.
        reproducible: ``False`` declares an engine that does not give the same tokens for the
            same seed by design (unseeded draft noise, a cache of earlier outputs): the audit
            reports the share of seeds that reproduce and tests serial dependence at lags 1..8
            instead of refusing it (`dsi_ref.audit.serial`).
        why_not_reproducible: the reason, for reports (required with ``reproducible=False``).
        sample_map: ``(sample, seeds) -> samples`` that draws many seeds at once (an engine
            that batches requests); ``None`` draws them one by one.
        law: the reference law itself, when it is not ``target``'s (e.g. computed from a real
            checkpoint's logits); ``target`` is then only a label-bearing placeholder.
    """

    sample: Callable[[int], Sequence[int]]
    target: LanguageModel | None
    prompt: tuple[int, ...] = ()
    max_new_tokens: int = 1
    greedy: bool = False
    name: str = "engine"
    reproducible: bool = True
    why_not_reproducible: str = ""
    sample_map: Callable[[Callable[[int], Any], list[int]], Iterable[Any]] | None = None
    law: LawLike | None = None

    def __post_init__(self) -> None:
        if self.target is None and self.law is None:
            raise InvalidParameterError(f"{self.name}: give the reference as target or law")
        if not self.reproducible and not self.why_not_reproducible:
            raise InvalidParameterError(f"{self.name}: reproducible=False needs "
                                        "why_not_reproducible (the engine's reason)")

    def reference_law(self) -> LawLike:
        """The exact law of the first ``N`` tokens after ``prompt`` (`target_distribution`),
        or `law` when given."""
        if self.law is not None:
            return self.law
        assert self.target is not None
        return target_distribution(self.target, self.prompt, self.max_new_tokens,
                                   greedy=self.greedy)


Entry = str | Callable[[], EngineUnderTest] | EngineUnderTest


def _load_callable(entry: str) -> Callable[[], Any]:
    module_name, colon, attribute = entry.partition(":")
    if not colon or not module_name or not attribute:
        raise InvalidParameterError(f"entry point {entry!r} is not MODULE:CALLABLE (e.g. "
                                    "'my_engine:make_engine')")
    if os.getcwd() not in sys.path:  # as `python -m` does: a module in the current folder
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (module_name == error.name
                                       or module_name.startswith(error.name + ".")):
            raise InvalidParameterError(f"entry point {entry!r}: module {module_name!r} not "
                                        "found") from None
        raise InvalidParameterError(f"entry point {entry!r}: importing {module_name!r} failed: "
                                    f"{type(error).__name__}: {error}") from None
    except Exception as error:  # the user's module failed while importing: say so in one line
        raise InvalidParameterError(f"entry point {entry!r}: importing {module_name!r} failed: "
                                    f"{type(error).__name__}: {error}") from None
    target: object = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise InvalidParameterError(f"entry point {entry!r}: module {module_name!r} has no "
                                        f"attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise InvalidParameterError(f"entry point {entry!r}: {attribute!r} is a "
                                    f"{type(target).__name__}, not a callable")
    return target


def load_engine(entry: Entry) -> EngineUnderTest:
    """The `EngineUnderTest` of ``entry``: ``"MODULE:CALLABLE"`` (imported, then called with no
    argument), a callable, or an `EngineUnderTest` itself.

    Raises `InvalidParameterError` (one line: ``dsi-ref audit-engine`` exits with status 2) when
    the entry point has no colon, its module is not found or fails to import, the attribute is
    missing or not callable, or the callable returns something other than an `EngineUnderTest`.
    """
    if isinstance(entry, EngineUnderTest):
        return entry
    make = _load_callable(entry) if isinstance(entry, str) else entry
    if not callable(make):
        raise InvalidParameterError(f"expected 'MODULE:CALLABLE', a callable or an "
                                    f"EngineUnderTest, got {type(entry).__name__}")
    engine = make()
    if not isinstance(engine, EngineUnderTest):
        where = entry if isinstance(entry, str) else getattr(entry, "__name__", repr(entry))
        raise InvalidParameterError(f"entry point {where!r} returned a "
                                    f"{type(engine).__name__}, not an EngineUnderTest "
                                    "(from dsi_ref.backends.harness import EngineUnderTest)")
    if engine.max_new_tokens < 1:
        raise InvalidParameterError(f"{engine.name}: max_new_tokens must be >= 1, got "
                                    f"{engine.max_new_tokens}")
    return engine


@dataclass(frozen=True)
class AuditPlan:
    """What an audit will do, stated before it samples."""

    engine: str
    outcomes: int
    n_samples: int
    epsilon: float
    alpha: float
    power: float

    def __str__(self) -> str:
        return (f"{self.engine}: {self.n_samples} samples for power {self.power:.10g} against "
                f"every law at TV >= {self.epsilon:g} from the reference ({self.outcomes} "
                f"outcomes), false-alarm rate <= {self.alpha:g}")


def plan_audit(engine: EngineUnderTest, law: LawLike, *, epsilon: float, alpha: float,
               power: float) -> AuditPlan:
    """The sample size (`required_samples`) reaching ``power`` against TV ``>= epsilon``."""
    alternative = Alternative.tv(epsilon)
    n = required_samples(law, alternative, alpha=alpha, power=power)
    if n is None:
        raise UnderpoweredError(10**9, 0.0, power, None, alternative.describe())
    return AuditPlan(engine.name, len(law), n, epsilon, alpha, power)


def audit_engine(entry: Entry, *, epsilon: float = 0.2, alpha: float = POLICY_ALPHA,
                 power: float = 0.99, seed: int = 0,
                 progress: bool | Callable[[Iterable[int]], Iterable[int]] = False,
                 on_plan: Callable[[AuditPlan], None] | None = None,
                 max_samples: int | None = None) -> StatisticalReport:
    """Audit an engine against its reference law at stated power.

    ``entry`` is ``"MODULE:CALLABLE"``, a callable returning an `EngineUnderTest`, or one.
    The verdict is ``"lossless"`` (no deviation found by a test of power ``>= power`` against
    every law at TV ``>= epsilon``) or ``"lossy"`` (rejected at false-alarm rate ``alpha``).
    ``progress``: ``True`` for a tqdm bar on stderr, or a wrapper of the seed iterator.
    ``on_plan`` is called with the `AuditPlan` before sampling starts. ``max_samples`` is a
    budget: a plan that needs more samples raises `UnderpoweredError` before anything is drawn
    (its message says how many the stated power needs).

    An engine declared not to reproduce a seed (``reproducible=False``) is not refused for it:
    the audit tests its law at ``alpha / 2``, reports how many of 10 seeds drawn again gave the
    same tokens, and spends the other ``alpha / 2`` on the test of serial dependence at lags
    1..8 that stands in for the determinism check (`dsi_ref.audit.serial`); it is ``"lossy"``
    if either test rejects, and ``"inconclusive"`` when the serial test cannot state ``power``
    against a copy of an earlier output with probability 1/2.

    >>> import dsi_ref as dr
    >>> target = dr.TableLM.random(3, 1, seed=1)
    >>> def sample(seed: int) -> tuple[int, ...]:
    ...     return dr.autoregressive(target, (0,), 2, dr.Sampler(seed)).tokens
    >>> report = audit_engine(EngineUnderTest(sample, target, (0,), 2), epsilon=0.3)
    >>> report.verdict, report.power >= 0.99
    ('lossless', True)
    """
    engine = load_engine(entry)
    law = engine.reference_law()
    reproducible = engine.reproducible
    main_alpha = alpha if reproducible else alpha / 2  # the other half: independence (serial)
    plan = plan_audit(engine, law, epsilon=epsilon, alpha=main_alpha, power=power)
    if max_samples is not None and plan.n_samples > max_samples:
        from ..audit.statistical import achieved_power

        raise UnderpoweredError(max_samples,
                                achieved_power(law, Alternative.tv(epsilon), max_samples,
                                               alpha=main_alpha),
                                power, plan.n_samples, Alternative.tv(epsilon).describe())
    if on_plan is not None:
        on_plan(plan)
    wrap: Callable[[Iterable[int]], Iterable[int]] | None
    if progress is True:
        from tqdm import tqdm

        def wrap(seeds: Iterable[int]) -> Iterable[int]:
            bar: Iterable[int] = tqdm(seeds, total=plan.n_samples, desc=engine.name[:30],
                                      unit="sample", leave=False)
            return bar
    else:
        wrap = progress or None
    drawn: list[Any] = []

    def recorded(sample: Callable[[int], Any], seeds: list[int]) -> Iterable[Any]:
        values = (engine.sample_map(sample, seeds) if engine.sample_map is not None
                  else (sample(s) for s in seeds))
        for value in values:
            drawn.append(tuple(value))
            yield value

    def sample(s: int) -> tuple[int, ...]:
        return tuple(engine.sample(s))

    report = statistical_audit(sample, law, plan.n_samples, alternative=Alternative.tv(epsilon),
                               alpha=main_alpha, power=power, seed=seed, progress=wrap,
                               determinism_checks=10 if reproducible else 0,
                               sample_map=recorded if (engine.sample_map or not reproducible)
                               else None)
    if reproducible:
        return report
    from ..audit.serial import reproduction_share, serial_check

    seeds = sample_seeds(seed, plan.n_samples)
    again = list(zip(seeds[:10], drawn[:10], strict=True))
    serial = serial_check(drawn, law, alpha=alpha / 2, power=power)
    verdict = ("lossy" if serial.rejected else
               report.verdict if serial.checked or report.verdict == "lossy" else "inconclusive")
    return replace(report, verdict=verdict, reproduced=reproduction_share(sample, again),
                   independence=f"{serial} [{engine.why_not_reproducible}]")


def report_json(report: StatisticalReport, *, engine: str, entry: str, epsilon: float,
                seconds: float | None = None) -> dict[str, Any]:
    """The JSON form of a verdict (what ``dsi-ref audit-engine --json`` writes)."""
    from .. import __version__

    return {
        "engine": engine, "entry": entry, "verdict": report.verdict,
        "n_samples": report.n_samples, "epsilon": epsilon, "alternative": report.alternative,
        "power": report.power, "alpha": report.alpha, "statistic": report.statistic,
        "df": report.df, "p_value": report.p_value, "critical_value": report.critical_value,
        "empirical_tv": report.empirical_tv, "noise_tv": report.noise_tv,
        "impossible": [[list(map(int, o)) if isinstance(o, tuple) else o, c]
                       for o, c in report.impossible],
        "seconds": report.seconds if seconds is None else seconds,
        "samples_per_second": report.samples_per_second, "seed": report.seed,
        "reproduced": list(report.reproduced) if report.reproduced is not None else None,
        "independence": report.independence,
        "dsi_ref": __version__, "python": sys.version.split()[0],
    }


# -- two engines, as entry points (``dsi-ref audit-engine dsi_ref.backends.harness:torch_si``) ----

#: The prompt and budget of the torch examples (vocabulary 11: 121 outcomes for N = 2).
_TORCH_PROMPT = (1, 2)


def _torch_engine(greedy: bool) -> EngineUnderTest:
    import torch

    from ..base.randomness import Sampler
    from ..decoders.verification import VerifyRule
    from .engine.engine import Engine
    from .torch.model import build_pair

    target, drafter = build_pair()
    engine = Engine(target, drafter)
    verify: VerifyRule = "greedy" if greedy else "rejection"
    n = 3 if greedy else 2

    def sample(seed: int) -> tuple[int, ...]:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # tiny tensors: thread hand-offs cost more than the work
        try:
            return engine.speculative(_TORCH_PROMPT, n, Sampler(seed), lookahead=2,
                                      verify=verify).tokens
        finally:
            torch.set_num_threads(threads)

    name = f"dsi-ref torch Engine SI ({verify}, tiny pair, k=2)"
    return EngineUnderTest(sample, target, _TORCH_PROMPT, n, greedy, name)


def torch_si() -> EngineUnderTest:
    """dsi-ref's own torch engine (`dsi_ref.backends.engine.Engine`) running SI with rejection
    sampling on `build_pair`'s tiny target and drafter (float64, CPU), prompt ``(1, 2)``,
    ``N = 2``; the reference is the target itself (a `TorchLM` is a `LanguageModel`)."""
    return _torch_engine(greedy=False)


def torch_si_greedy() -> EngineUnderTest:
    """`torch_si` with greedy verification, ``N = 3``: the reference is the greedy sequence."""
    return _torch_engine(greedy=True)


def _hf(do_sample: bool) -> EngineUnderTest:
    from .hf.generators import GREEDY_PROMPT, Cell, cell_sampler, reference_model

    prompt = (0, 1) if do_sample else GREEDY_PROMPT
    cell = Cell("AssistedCandidateGenerator", do_sample, prompt=prompt)
    import transformers

    from .hf.assisted import single_thread

    sampler = cell_sampler(cell)

    def sample(seed: int) -> tuple[int, ...]:
        with single_thread():
            return sampler(seed)

    return EngineUnderTest(sample, reference_model(cell), cell.prompt,
                           cell.max_new_tokens, not do_sample,
                           f"HF transformers {transformers.__version__} assisted generation "
                           f"({'sampled' if do_sample else 'greedy'}, toy bigram pair)")


def hf_assisted() -> EngineUnderTest:
    """Hugging Face assisted generation (``generate(..., assistant_model=...,
    do_sample=True)``, `AssistedCandidateGenerator`) on the toy bigram pair of
    `dsi_ref.backends.hf.generators`, prompt ``(0, 1)``, ``N = 3``."""
    return _hf(True)


def hf_assisted_greedy() -> EngineUnderTest:
    """`hf_assisted` with ``do_sample=False``, prompt ``(0, 2)``: the greedy point mass."""
    return _hf(False)


# -- a toy as a real model class -------------------------------------------------------------------


def bigram_llama(lm: LanguageModel, *, zero_logit: float = -1e4) -> Any:
    """A ``transformers`` ``LlamaForCausalLM`` whose next-token law is the bigram toy ``lm``'s.

    One decoder layer whose attention and MLP weights are all zero (both add nothing to the
    residual stream), one-hot embeddings (``hidden_size = V``), RMSNorm weights 1 (so the final
    norm maps ``e_x`` to ``sqrt(V) e_x``) and an LM head ``W[y, x] = log p(y | x) / sqrt(V)``
    (``zero_logit / sqrt(V)`` where ``p(y | x) = 0``): the logits after token ``x`` are
    ``log p(· | x)``, whatever came before. Any engine that loads Llama checkpoints (vLLM,
    SGLang, llama.cpp after ``convert_hf_to_gguf.py``) then runs a model whose exact law
    `dsi_ref.target_distribution` knows. ``lm`` must be a bigram model (its row depends on the
    last token only, e.g. ``TableLM.random(V, 1, ...)``); ids are the toy's, there is no BOS:
    give the engine token ids, not text. Rows are float32 in the model: the law is the toy's to
    about 1e-8 (far below any TV an audit can resolve)."""
    import math

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from ..base.models import checked_probs

    v = lm.vocab_size
    config = LlamaConfig(vocab_size=v, hidden_size=v, intermediate_size=4, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, head_dim=v,
                         bos_token_id=None, eos_token_id=lm.eos, pad_token_id=None,
                         tie_word_embeddings=False, rms_norm_eps=1e-12,
                         max_position_embeddings=256)
    model = LlamaForCausalLM(config)
    rows = [[math.log(float(p)) if p > 0 else zero_logit for p in checked_probs(lm, (x,))]
            for x in range(v)]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.model.embed_tokens.weight.copy_(torch.eye(v))
        model.model.norm.weight.fill_(1.0)
        for layer in model.model.layers:
            layer.input_layernorm.weight.fill_(1.0)
            layer.post_attention_layernorm.weight.fill_(1.0)
        model.lm_head.weight.copy_(torch.tensor(rows).T / math.sqrt(v))
    model.eval()
    return model
