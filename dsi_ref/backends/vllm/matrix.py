"""The vLLM matrix: speculative methods × sampling settings × draft lengths, each cell audited.

A cell is one engine configuration (`EngineConfig`: method, drafter, ``k``, draft and
rejection sampling methods, which CPU expand shim) and one request setting (`Sampling`). Its
verdict comes from `dsi_ref.backends.harness.audit_engine`: the engine's first
`MAX_NEW_TOKENS` tokens after `PROMPT`, drawn with 64-bit per-request seeds, against their
exact law (`dsi_ref.backends.vllm.sampling.reference_law`), with the sample size that gives
power 0.99 against every law at total-variation distance ≥ 0.2, at false-alarm rate 1e-8
(the policy's). A cell can also end without a verdict: ``refused`` (vLLM rejects the setting or
the method, with its message) or ``crash`` (the engine raised while sampling).

Each cell has the verdict the findings predict (`expected`), so a run that differs is news: the
section fails. The cells of one engine run in one process (`EngineProcess`), started once.
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
from .kernel import BONUS_MUTANTS
from .models import ModelSet, build_models
from .sampling import Sampling, reference_law

__all__ = ["ACCEPT_PATH_SHARE", "CELLS", "MAX_NEW_TOKENS", "PROMPT", "QUICK_CELLS", "Cell",
           "CellResult",
           "audit_cell", "batched", "expected", "run_matrix"]

#: The prompt of every request: repeated pairs, so that n-gram and suffix lookups find drafts.
PROMPT: tuple[int, ...] = (0, 1, 2, 1, 2)
#: Tokens per request: the first is sampled before any draft, the next two are verified ones.
MAX_NEW_TOKENS = 3
#: Samples per batch sent to the engine (one progress-bar step).
BATCH = 2000


@dataclass(frozen=True)
class Cell:
    """One engine configuration (drafters named, not yet built) and one request setting."""

    engine: EngineConfig
    sampling: Sampling
    #: Tokens per request (`MAX_NEW_TOKENS` but in the cells that need a longer budget to reach
    #: the bonus token: the name then says ``N=4``).
    max_new_tokens: int = MAX_NEW_TOKENS

    @property
    def name(self) -> str:
        """``draft_model(near) k=2 [fixed] / T=0.7`` (``... / T=1, N=4`` with another budget)."""
        budget = "" if self.max_new_tokens == MAX_NEW_TOKENS else f", N={self.max_new_tokens}"
        return f"{self.engine.label} [{self.engine.expand}] / {self.sampling.label}{budget}"

    @property
    def reproducible(self) -> bool:
        """Whether vLLM gives the same tokens for the same seed here: not with probabilistic
        drafts (their noise is unseeded) nor with suffix decoding (it drafts from a cache of
        earlier requests' outputs)."""
        return not (self.engine.draft_sample_method == "probabilistic"
                    or self.engine.method == "suffix")


def expected(cell: Cell) -> tuple[str, str]:
    """The verdict the findings predict for ``cell``, and the finding behind it."""
    e, s = cell.engine, cell.sampling
    if e.mutant == "one-early" and e.method == "ngram":
        return "lossless", ("a negative control this cell MISSES: n-gram drafts are accepted "
                            "about 12% of the time here, and the target's rows at consecutive "
                            "positions are close, so a bonus drawn one position early moves "
                            "the law too little to see (a stated hole)")
    if e.mutant is not None:
        return "lossy", "negative control: a wrong bonus token (dsi_ref.backends.vllm.mutants)"
    if e.rejection_sample_method == "synthetic" and e.method is not None:
        return "crash", "synthetic acceptance: accepted at start, asserts at the first request"
    if e.method is None or s.greedy:
        return "lossless", ""
    if s.min_p or s.logit_bias:
        return "refused", "vLLM refuses min_p and logit_bias with speculative decoding"
    if s.top_k is not None and s.top_p is None and e.expand != "fixed":
        return "crash", "top-k alone: a step without drafts calls max() on zero rows"
    if e.expand == "stock":
        return "lossy", "#55005: temperature, top-k and top-p read from uninitialised memory"
    if e.expand == "copy-back" and (s.temperature != 1 or s.top_p is not None):
        return "lossy", "#55005, second layer: temperature and top-p truncated to integers"
    return "lossless", ""


def _near(k: int = 2, **kw: Any) -> EngineConfig:
    return EngineConfig("draft_model", "near", "near", k, **kw)


_T1, _T07, _T13 = Sampling(), Sampling(temperature=0.7), Sampling(temperature=1.3)
_TOP_K, _TOP_P = Sampling(top_k=3), Sampling(top_p=0.8)
_MIN_P, _BIAS = Sampling(min_p=0.2), Sampling(logit_bias=((3, 1.5),))
_REP = Sampling(repetition_penalty=1.3)
_PRESENCE, _FREQUENCY = Sampling(presence_penalty=0.7), Sampling(frequency_penalty=0.5)
_GREEDY = Sampling(temperature=0.0)
#: Every sampling setting of the matrix.
SETTINGS: tuple[Sampling, ...] = (_T1, _T07, _T13, _TOP_K, _TOP_P, _MIN_P, _BIAS, _REP,
                                  _PRESENCE, _FREQUENCY, _GREEDY)


#: One engine of each speculative family (with one draft a step in the bonus cells).
_BONUS_FAMILIES: tuple[EngineConfig, ...] = (
    _near(expand="fixed"), EngineConfig("ngram", k=1, expand="fixed"),
    EngineConfig("suffix", k=1, expand="fixed"),
    EngineConfig("eagle", "eagle", "eagle", 1, expand="fixed"))
#: A lossless verdict counts for the accept path only where at least this share of the drafts
#: was accepted; below it the cell tested the rejection path almost alone.
ACCEPT_PATH_SHARE = 0.2


def _cells() -> tuple[Cell, ...]:
    plan: list[tuple[EngineConfig, Sequence[Sampling]]] = [
        (EngineConfig(), SETTINGS),                                   # the control
        (_near(expand="stock"), (_T1, _T07, _TOP_P, _TOP_K, _GREEDY)),
        (_near(expand="copy-back"), (_T1, _T07, _T13, _TOP_P)),
        (_near(expand="fixed"), SETTINGS),
        (_near(expand="fixed", draft_sample_method="probabilistic"),
         (_T1, _T07, _TOP_K, _TOP_P, _REP, _GREEDY)),
        (EngineConfig("ngram", k=2, expand="stock"), (_T1,)),
        (EngineConfig("ngram", k=2, expand="fixed"), (_T1, _T07, _TOP_K, _TOP_P, _REP, _GREEDY)),
        (EngineConfig("suffix", k=2, expand="fixed"), (_T1, _T07, _TOP_P, _GREEDY)),
        (EngineConfig("eagle", "eagle", "eagle", 2, expand="fixed"), (_T1, _T07, _TOP_P, _GREEDY)),
        *((EngineConfig("draft_model", "independent", "independent", k, expand="fixed"),
           (_T1, _T07)) for k in (1, 2, 3, 4)),
        (_near(expand="fixed", rejection_sample_method="synthetic",
               options=(("synthetic_acceptance_length", 2.5),)), (_T1,)),
    ]
    cells = [Cell(engine, s) for engine, settings in plan for s in settings]
    # one draft a step: a token after an accepted draft is the bonus, so every speculative
    # family has cells that emit it, and the negative controls (a wrong bonus token, installed
    # in the engine's process) that must be flagged there. n-gram drafting finds no accepted
    # draft before the third token from this prompt, so its cells run 4 tokens.
    for family in _BONUS_FAMILIES:
        n = 4 if family.method == "ngram" else MAX_NEW_TOKENS
        cells += [Cell(replace(family, k=1, mutant=mutant), _T1, n)
                  for mutant in (None, *BONUS_MUTANTS)]
    return tuple(cells)


#: The default matrix.
CELLS: tuple[Cell, ...] = _cells()
#: The smoke (CI): the control, one stock cell (lossy) and the same cell fixed (lossless).
QUICK_CELLS: tuple[Cell, ...] = (Cell(EngineConfig(), _T1), Cell(_near(expand="stock"), _T1),
                                 Cell(_near(expand="fixed"), _T1))


@dataclass
class CellResult:
    """The outcome of one cell.

    ``verdict``: ``lossless``, ``lossy``, ``refused`` (vLLM rejected the setting or method),
    ``crash`` (the engine raised while sampling) or ``nondeterministic`` (an engine expected to
    reproduce a seed did not). ``ok``: the verdict is the expected one.
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
    drafted: int = 0
    accepted: int = 0

    @property
    def ok(self) -> bool:
        """The verdict is the one the findings predict."""
        return self.verdict == self.expected

    @property
    def acceptance(self) -> float | None:
        """The share of the cell's draft tokens that were accepted (``None``: no drafts)."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def accept_path(self) -> str:
        """``tested`` when at least `ACCEPT_PATH_SHARE` of the drafts were accepted,
        ``untested`` below (a lossless verdict there says little about the accept path and
        the bonus token), ``-`` without drafts."""
        if self.acceptance is None:
            return "-"
        return "tested" if self.acceptance >= ACCEPT_PATH_SHARE else "untested"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (a cell without a report has no sample fields)."""
        out: dict[str, Any] = {
            "cell": self.cell.name, "engine": self.cell.engine.as_dict(),
            "sampling": self.cell.sampling.as_dict(), "verdict": self.verdict,
            "expected": self.expected, "why": self.why, "message": self.message,
            "seconds": self.seconds, "engine_seconds": self.engine_seconds,
            "peak_rss_mb": self.peak_rss_mb, "vllm": self.version,
            "drafted": self.drafted, "accepted": self.accepted}
        r = self.report  # a lossy report is falsy (StatisticalReport.__bool__): test for None
        if r is not None:
            out |= {"n_samples": r.n_samples, "power": r.power, "alpha": r.alpha,
                    "statistic": r.statistic, "empirical_tv": r.empirical_tv,
                    "reproduced": list(r.reproduced) if r.reproduced else None,
                    "independence": r.independence,
                    "samples_per_second": r.samples_per_second}
        return out


def _resolved(config: EngineConfig, models: ModelSet) -> EngineConfig:
    if config.drafter and config.drafter in {"near", "independent", "wide", "eagle"}:
        return replace(config, drafter=str(models.drafter(config.drafter)))
    return config


def batched(engine: EngineProcess, sampling: Sampling, bar: Callable[[int], None],
             prompt: Sequence[int] = PROMPT, max_new_tokens: int = MAX_NEW_TOKENS
             ) -> Callable[[Callable[[int], Any], list[int]], Iterable[Any]]:
    """``sample_map`` for `EngineUnderTest`: the seeds drawn as batches of requests."""
    def sample_map(_: Callable[[int], Any], seeds: list[int]) -> Iterator[tuple[int, ...]]:
        for batch in engine.batches(prompt, max_new_tokens, sampling, seeds, batch=BATCH):
            bar(len(batch))
            yield from batch
    return sample_map


def audit_cell(cell: Cell, engine: EngineProcess, *, epsilon: float = 0.2,
               alpha: float = POLICY_ALPHA, power: float = 0.99, seed: int = 0,
               max_samples: int | None = None, models: ModelSet | None = None,
               bar: Callable[[int], None] = lambda n: None) -> StatisticalReport:
    """The statistical audit of ``cell`` on a started ``engine`` (`audit_engine`, batched).

    Raises `UnderpoweredError` before sampling when the plan needs more than ``max_samples``.
    """
    models = models or build_models()
    n = cell.max_new_tokens
    law = reference_law(models.target, PROMPT, n, cell.sampling)
    sampling = cell.sampling

    def sample(s: int) -> tuple[int, ...]:
        return engine.generate(PROMPT, n, sampling, [s])[0]

    why = "" if cell.reproducible else (
        "probabilistic drafts draw unseeded noise" if cell.engine.method != "suffix"
        else "suffix decoding drafts from a cache of earlier requests' outputs")
    under = EngineUnderTest(sample, None, PROMPT, n, sampling.greedy, cell.name,
                            reproducible=cell.reproducible, why_not_reproducible=why,
                            sample_map=batched(engine, sampling, bar, max_new_tokens=n),
                            law=law)
    return audit_engine(under, epsilon=epsilon, alpha=alpha, power=power, seed=seed,
                        max_samples=max_samples)


def run_matrix(cells: Sequence[Cell] = CELLS, *, epsilon: float = 0.2, power: float = 0.99,
               alpha: float = POLICY_ALPHA, seed: int = 0, progress: bool = True,
               on_result: Callable[[CellResult], None] | None = None) -> list[CellResult]:
    """Audit every cell, engine by engine (each started once, restarted after a crash)."""
    models = build_models()
    groups: dict[EngineConfig, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(cell.engine, []).append(cell)
    results: list[CellResult] = []
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(cells), desc="vLLM cells", unit="cell", leave=False)

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
                engine = EngineProcess(_resolved(config, models), models.target).__enter__()
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
                    engine.take_acceptance()  # count this cell's drafts only
                    try:
                        report = audit_cell(cell, engine, epsilon=epsilon, alpha=alpha,
                                            power=power, seed=seed, models=models)
                    except EngineOptionError as error:
                        record(CellResult(cell, "refused", want, why, str(error),
                                          seconds=time.perf_counter() - start))
                        continue
                    except EngineCrashError as error:
                        record(CellResult(cell, "crash", want, why, str(error),
                                          seconds=time.perf_counter() - start))
                        break  # the engine is gone: start a fresh one for the rest
                    except NondeterministicProgramError as error:
                        record(CellResult(cell, "nondeterministic", want, why, str(error),
                                          seconds=time.perf_counter() - start))
                        continue
                    drafted, accepted = engine.take_acceptance()
                    record(CellResult(cell, report.verdict, want, why, "", report,
                                      time.perf_counter() - start, engine.start_seconds,
                                      engine.peak_rss_mb(), engine.version, drafted, accepted))
            finally:
                engine.close()
    if bar is not None:
        bar.close()
    return results
