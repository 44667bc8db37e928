"""The OpenVINO GenAI matrix: speculative modes × sampling settings × draft lengths, audited.

A cell is one pipeline (`EngineConfig`: no speculation, a draft model with ``k`` or a
confidence threshold, prompt lookup; attention backend; prefix caching) and one request setting
(`Sampling`). Its verdict comes from `dsi_ref.backends.harness.audit_engine`: the first
`MAX_NEW_TOKENS` tokens after `PROMPT`, one seeded request per sample, against their exact law
(`dsi_ref.backends.openvino.sampling.reference_law`, GenAI's sampling order on the target's
float64 logits), with the sample size that gives power 0.99 against every law at total-variation
distance ≥ 0.2, at false-alarm rate 1e-8 (the policy's). A cell can also end without a verdict:
``refused`` (GenAI rejects the configuration, with its message) or ``crash`` (a request raised).

Each cell has the verdict the findings predict (`expected`), so a run that differs is news: the
section fails. The cells of one pipeline run in one process (`EngineProcess`), started once and
started again after a crash.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...audit.statistical import POLICY_ALPHA, StatisticalReport
from ...base.errors import EngineCrashError, EngineOptionError, NondeterministicProgramError
from ..harness import EngineUnderTest, audit_engine
from .engine import EngineConfig, EngineProcess
from .models import IRSet, build_ir
from .sampling import Sampling, reference_law

__all__ = ["CELLS", "MAX_NEW_TOKENS", "PROMPT", "QUICK_CELLS", "Cell", "CellResult",
           "audit_cell", "batched", "expected", "resolved", "run_matrix"]

#: The prompt of every request: repeated pairs, so that prompt lookup finds drafts.
PROMPT: tuple[int, ...] = (0, 1, 2, 1, 2)
#: Tokens per request: the first is sampled before any draft, the next two are verified ones.
MAX_NEW_TOKENS = 3
#: Seeds per request sent to the engine process (one progress-bar step).
BATCH = 1000


@dataclass(frozen=True)
class Cell:
    """One pipeline (drafters named, not yet converted) and one request setting."""

    engine: EngineConfig
    sampling: Sampling

    @property
    def name(self) -> str:
        """``draft(near) k=2 [no prefix caching] / T=0.7``."""
        return f"{self.engine.label} / {self.sampling.label}"


def expected(cell: Cell) -> tuple[str, str]:
    """The verdict the findings predict for ``cell``, and the finding behind it."""
    e, s = cell.engine, cell.sampling
    if e.mode != "draft" or s.greedy:
        return "lossless", ""
    if e.prefix_caching is None:
        return "crash", ("prefix caching (on in LLMPipeline's scheduler) hashes a block longer "
                         "than the sequence after a rejected draft")
    return "lossy", ("validate_candidate accepts draft d with probability q(d)/p(x) for an "
                     "independent x ~ p, and replaces a rejected draft with a token drawn from "
                     "the next position's row")


def _near(k: int | None = 2, prefix_caching: bool | None = False, **kw: Any) -> EngineConfig:
    return EngineConfig("draft", "near", "near", k, prefix_caching=prefix_caching, **kw)


_T1, _T07 = Sampling(), Sampling(temperature=0.7)
_TOP_K, _TOP_P = Sampling(top_k=3), Sampling(top_p=0.8)
_REP = Sampling(repetition_penalty=1.3)
_GREEDY = Sampling(temperature=0.0)
#: Every sampling setting of the matrix.
SETTINGS: tuple[Sampling, ...] = (_T1, _T07, _TOP_K, _TOP_P, _REP, _GREEDY)
_LOOKUP = EngineConfig("prompt_lookup", k=2, max_ngram_size=2)


def _cells() -> tuple[Cell, ...]:
    plan: list[tuple[EngineConfig, Sequence[Sampling]]] = [
        (EngineConfig(), SETTINGS),                                   # the control
        (EngineConfig(attention_backend="SDPA"), (_T1, _GREEDY)),     # the stateful control
        (EngineConfig(properties=()), (_T1,)),                        # bf16 on this CPU
        (_near(prefix_caching=None), (_T1, _GREEDY)),                 # as LLMPipeline makes it
        (_near(), SETTINGS),
        *((_near(k), (_T1,)) for k in (1, 3, 4)),
        (_near(None, confidence=0.5), (_T1,)),
        (EngineConfig("draft", "independent", "independent", 2, prefix_caching=False),
         (_T1, _GREEDY)),
        (_LOOKUP, SETTINGS),
        (replace(_LOOKUP, k=4, max_ngram_size=3), (_T1,)),
    ]
    return tuple(Cell(engine, s) for engine, settings in plan for s in settings)


#: The default matrix.
CELLS: tuple[Cell, ...] = _cells()
#: The smoke (CI): the control and prompt lookup (lossless), a draft model (lossy).
QUICK_CELLS: tuple[Cell, ...] = (Cell(EngineConfig(), _T1), Cell(_LOOKUP, _T1),
                                 Cell(_near(), _T1))


@dataclass
class CellResult:
    """The outcome of one cell.

    ``verdict``: ``lossless``, ``lossy``, ``refused`` (GenAI rejected the configuration),
    ``crash`` (a request raised) or ``nondeterministic`` (a seed did not reproduce).
    ``ok``: the verdict is the expected one.
    """

    cell: Cell
    verdict: str
    expected: str
    why: str = ""
    message: str = ""
    report: StatisticalReport | None = field(default=None, repr=False)
    seconds: float = 0.0
    engine_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    version: str = ""

    @property
    def ok(self) -> bool:
        """The verdict is the one the findings predict."""
        return self.verdict == self.expected

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (a cell without a report has no sample fields)."""
        out: dict[str, Any] = {
            "cell": self.cell.name, "engine": self.cell.engine.as_dict(),
            "sampling": self.cell.sampling.as_dict(), "verdict": self.verdict,
            "expected": self.expected, "why": self.why, "message": self.message,
            "seconds": self.seconds, "engine_seconds": self.engine_seconds,
            "peak_rss_mb": self.peak_rss_mb, "openvino_genai": self.version}
        r = self.report  # a lossy report is falsy (StatisticalReport.__bool__): test for None
        if r is not None:
            out |= {"n_samples": r.n_samples, "power": r.power, "alpha": r.alpha,
                    "statistic": r.statistic, "empirical_tv": r.empirical_tv,
                    "samples_per_second": r.samples_per_second}
        return out


def resolved(config: EngineConfig, models: IRSet) -> EngineConfig:
    """``config`` with a named drafter (``near``, ``independent``) replaced by its IR folder."""
    if config.drafter in {"near", "independent"}:
        return replace(config, drafter=str(models.drafter(config.drafter)))
    return config


def batched(engine: EngineProcess, sampling: Sampling, bar: Callable[[int], None],
            prompt: Sequence[int] = PROMPT, max_new_tokens: int = MAX_NEW_TOKENS
            ) -> Callable[[Callable[[int], Any], list[int]], Iterable[Any]]:
    """``sample_map`` for `EngineUnderTest`: the seeds sent to the engine in batches."""
    def sample_map(_: Callable[[int], Any], seeds: list[int]) -> Iterator[tuple[int, ...]]:
        for batch in engine.batches(prompt, max_new_tokens, sampling, seeds, batch=BATCH):
            bar(len(batch))
            yield from batch
    return sample_map


def audit_cell(cell: Cell, engine: EngineProcess, *, epsilon: float = 0.2,
               alpha: float = POLICY_ALPHA, power: float = 0.99, seed: int = 0,
               max_samples: int | None = None, models: IRSet | None = None,
               law: dict[tuple[int, ...], float] | None = None,
               bar: Callable[[int], None] = lambda n: None) -> StatisticalReport:
    """The statistical audit of ``cell`` on a started ``engine`` (`audit_engine`, batched),
    against ``law`` (default: the exact law of the target, `reference_law`)."""
    models = models or build_ir()
    if law is None:
        law = reference_law(models.hf_target, PROMPT, MAX_NEW_TOKENS, cell.sampling)
    sampling = cell.sampling

    def sample(s: int) -> tuple[int, ...]:
        return engine.generate(PROMPT, MAX_NEW_TOKENS, sampling, [s])[0]

    under = EngineUnderTest(sample, None, PROMPT, MAX_NEW_TOKENS, sampling.greedy, cell.name,
                            sample_map=batched(engine, sampling, bar), law=law)
    return audit_engine(under, epsilon=epsilon, alpha=alpha, power=power, seed=seed,
                        max_samples=max_samples)


def run_matrix(cells: Sequence[Cell] = CELLS, *, epsilon: float = 0.2, power: float = 0.99,
               alpha: float = POLICY_ALPHA, seed: int = 0, progress: bool = True,
               on_result: Callable[[CellResult], None] | None = None) -> list[CellResult]:
    """Audit every cell, pipeline by pipeline (each started once, again after a crash)."""
    models = build_ir()
    groups: dict[EngineConfig, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(cell.engine, []).append(cell)
    results: list[CellResult] = []
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(cells), desc="OpenVINO cells", unit="cell", leave=False)

    def record(result: CellResult) -> None:
        results.append(result)
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(result.cell.name[:40])
        if on_result is not None:
            on_result(result)

    for config, group in groups.items():
        todo = list(group)
        while todo:
            try:
                engine = EngineProcess(resolved(config, models), models.target).__enter__()
            except EngineOptionError as error:
                for cell in todo:
                    want, why = expected(cell)
                    record(CellResult(cell, "refused", want, why, str(error)))
                break
            try:
                while todo:
                    cell = todo.pop(0)
                    want, why = expected(cell)
                    start = time.perf_counter()
                    try:
                        report = audit_cell(cell, engine, epsilon=epsilon, alpha=alpha,
                                            power=power, seed=seed, models=models)
                    except EngineOptionError as error:
                        record(CellResult(cell, "refused", want, why, str(error),
                                          seconds=time.perf_counter() - start))
                        continue
                    except EngineCrashError as error:
                        record(CellResult(cell, "crash", want, why, str(error),
                                          seconds=time.perf_counter() - start,
                                          engine_seconds=engine.start_seconds,
                                          version=engine.version))
                        break  # the pipeline is gone: start a fresh one for the rest
                    except NondeterministicProgramError as error:
                        record(CellResult(cell, "nondeterministic", want, why, str(error),
                                          seconds=time.perf_counter() - start))
                        continue
                    record(CellResult(cell, report.verdict, want, why, "", report,
                                      time.perf_counter() - start, engine.start_seconds,
                                      engine.peak_rss_mb(), engine.version))
            finally:
                engine.close()
    if bar is not None:
        bar.close()
    return results
