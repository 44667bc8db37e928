"""The llama.cpp matrix: every speculative path × sampler × draft length, each a statistical audit.

A `Cell` is one path (`PATHS`), one sampler (`dsi_ref.backends.llama_cpp.sampling.SAMPLERS`),
one draft length ``k`` and one drafter; `audit_cell` samples it against the exact coarsened law
of the target's first `N_TOKENS` tokens under that sampler, at false-alarm rate `POLICY_ALPHA`
with power `POWER` against every law at TV ``>= EPSILON`` (`dsi_ref.audit.statistical`), after
checking that the reference is robust to the engine's float32 logits (its margin, at least
`MIN_MARGIN`).

`cells` lays the matrix out: every path with every sampler at ``k = 2`` (near drafter, the
first `N_TOKENS` tokens); the draft-length sweep, every path at ``k = 1 .. 4`` with ``N = k + 1``
tokens (`SWEEP_SAMPLER`), so that every draft position shows in the outcome (the first token is
the target's own: with ``N = 3`` a draft past the second would not); and the draft-model paths
with the independent drafter. A path that equals plain sampling per seed (its ``control``) also
reports the share of seeds on which its first tokens are the control's, over the same seeds.

``llama-speculative`` is expected lossy. Each of its cells is sized for power `POWER` both
against TV ``>= EPSILON`` and against the law its mechanism predicts
(`dsi_ref.backends.llama_cpp.whitebox`), so that "lossy" is expected at the stated power even
where the predicted loss is small, and is audited against that predicted law too (it must
follow it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ...audit.statistical import (
    POLICY_ALPHA,
    Alternative,
    StatisticalReport,
    achieved_power,
    laws_tv,
    required_samples,
    statistical_audit,
)
from ...base.errors import InvalidParameterError, NumericalError
from .binding import BindingPath, binding_sampler
from .cpp import CppPath, cpp_sampler
from .models import (
    BOS,
    TinyLlama,
    byte_token,
    gguf_path,
    independent_drafter,
    near_drafter,
    target_model,
)
from .sampling import SAMPLERS, SamplerConfig, coarsen, reference_law
from .whitebox import speculative_example_law

__all__ = ["EPSILON", "MIN_MARGIN", "N_TOKENS", "PATHS", "POWER", "PROMPT", "SWEEP_KS",
           "SWEEP_SAMPLER", "Cell", "CellResult", "PathSpec", "audit_cell", "cell_sampler", "cells",
           "planned_samples", "predicted_law", "prompt_ids", "run_matrix"]

#: The prompt (its bytes; the tokenizer adds BOS): a repeated pattern, so that prompt lookup and
#: the n-gram drafter find matches.
PROMPT = b"abcabcab"
#: The audited outcome: the first ``N`` new tokens.
N_TOKENS = 3
#: The statistical plan of every cell.
EPSILON, POWER = 0.2, 0.99
#: The draft lengths of the sweep, and its sampler (min-p keeps the laws of up to 5 tokens to a
#: few hundred outcomes; its cut's margin stays above `MIN_MARGIN`).
SWEEP_KS = (1, 2, 3, 4)
SWEEP_SAMPLER = SAMPLERS[4]
#: The smallest margin a reference may have (`dsi_ref.backends.llama_cpp.sampling`): 25 times
#: the largest distance measured between llama.cpp's float32 logits and the float64 forward
#: (4e-6, tests/test_llama_models.py).
MIN_MARGIN = 1e-4


def prompt_ids() -> tuple[int, ...]:
    """The prompt as token ids: BOS, then one token per byte."""
    return (BOS, *(byte_token(b) for b in PROMPT))


@dataclass(frozen=True)
class PathSpec:
    """One path of the matrix.

    Attributes:
        name: its label.
        family: ``"binding"`` (llama-cpp-python, in this process) or ``"cpp"`` (an example
            binary, one process per sample).
        mode: the family's mode (`dsi_ref.backends.llama_cpp.binding.BINDING_MODES`,
            `dsi_ref.backends.llama_cpp.cpp.CPP_MODES`).
        expected: the verdict the audit must give.
        control: the path it equals per seed (``None``: not claimed).
        drafter: whether it takes a draft model.
    """

    name: str
    family: str
    mode: str
    expected: str
    control: str | None = None
    drafter: bool = False

    @property
    def speculative(self) -> bool:
        """The path drafts (it has a draft length)."""
        return self.mode not in {"plain", "no-draft"}


#: The paths, controls first.
PATHS: tuple[PathSpec, ...] = (
    PathSpec("binding, no speculation", "binding", "plain", "lossless"),
    PathSpec("binding, prompt lookup", "binding", "prompt-lookup", "lossless",
             "binding, no speculation"),
    PathSpec("binding, draft model", "binding", "draft-model", "lossless",
             "binding, no speculation", drafter=True),
    PathSpec("speculative-simple, no draft", "cpp", "no-draft", "lossless"),
    PathSpec("speculative-simple, draft-simple", "cpp", "draft-simple", "lossless",
             "speculative-simple, no draft", drafter=True),
    PathSpec("speculative-simple, ngram-simple", "cpp", "ngram-simple", "lossless",
             "speculative-simple, no draft"),
    PathSpec("speculative (stochastic)", "cpp", "speculative", "lossy", drafter=True),
)
_PATHS = {p.name: p for p in PATHS}
_DRAFTERS: dict[str, Callable[[], TinyLlama]] = {"near": near_drafter,
                                                 "independent": independent_drafter}


@dataclass(frozen=True)
class Cell:
    """One audit: a path, a sampler, a draft length, a drafter (``"-"`` for none) and the number
    of tokens audited."""

    path: str
    sampler: SamplerConfig
    k: int = 0
    drafter: str = "-"
    n_tokens: int = N_TOKENS

    @property
    def spec(self) -> PathSpec:
        """The path's definition."""
        return _PATHS[self.path]

    @property
    def name(self) -> str:
        """``path / sampler / k / drafter / N`` (``N`` when it is not `N_TOKENS`)."""
        parts = [self.path, self.sampler.name]
        if self.spec.speculative:
            parts.append(f"k={self.k}")
        if self.spec.drafter:
            parts.append(f"{self.drafter} drafter")
        if self.n_tokens != N_TOKENS:
            parts.append(f"N={self.n_tokens}")
        return " / ".join(parts)


def cells(quick: bool = False, families: Sequence[str] = ("binding", "cpp")) -> list[Cell]:
    """The matrix (module docstring); ``quick``: the plain sampler at ``k = 2`` for the two
    controls, prompt lookup and ``llama-speculative`` only."""
    plain = SAMPLERS[0]
    out: list[Cell] = []

    def add(path: PathSpec, sampler: SamplerConfig, k: int, drafter: str = "near",
            n_tokens: int = N_TOKENS) -> None:
        cell = Cell(path.name, sampler, k if path.speculative else 0,
                    drafter if path.drafter else "-", n_tokens)
        if path.family in families and cell not in out:
            out.append(cell)

    if quick:
        for name in ("binding, no speculation", "binding, prompt lookup",
                     "speculative-simple, no draft", "speculative (stochastic)"):
            add(_PATHS[name], plain, 2)
        return out
    for path in PATHS:
        for sampler in SAMPLERS:
            add(path, sampler, 2)
    for k in SWEEP_KS:
        for path in PATHS:
            add(path, SWEEP_SAMPLER, k, n_tokens=k + 1)
    for path in PATHS:
        if path.drafter:
            add(path, plain, 2, "independent")
    return out


@cache
def _reference(sampler: SamplerConfig, n_tokens: int
               ) -> tuple[dict[tuple[int, ...], float], float]:
    law = reference_law(target_model(), prompt_ids(), n_tokens, sampler)
    return law.law, law.margin


def _required(law: dict[tuple[int, ...], float], alternative: Alternative, what: str) -> int:
    n = required_samples(law, alternative, alpha=POLICY_ALPHA, power=POWER)
    if n is None:
        raise InvalidParameterError(f"{what}: no sample size reaches power {POWER}")
    return n


@cache
def _plan(sampler: SamplerConfig, n_tokens: int) -> int:
    law, _ = _reference(sampler, n_tokens)
    return _required(law, Alternative.tv(EPSILON), sampler.name)


@cache
def predicted_law(cell: Cell) -> dict[tuple[int, ...], float] | None:
    """The law ``cell`` is predicted to follow when its path is ``llama-speculative``
    (`dsi_ref.backends.llama_cpp.whitebox`), else ``None``."""
    if cell.spec.mode != "speculative":
        return None
    law, _ = speculative_example_law(target_model(), _DRAFTERS[cell.drafter](), prompt_ids(),
                                     cell.n_tokens, cell.sampler, cell.k)
    return law


def planned_samples(cell: Cell) -> int:
    """The sample size of ``cell``'s audit: power `POWER` against every law at TV ``>=
    EPSILON``, and for ``llama-speculative`` also against its predicted law."""
    n = _plan(cell.sampler, cell.n_tokens)
    predicted = predicted_law(cell)
    if predicted is not None:
        law, _ = _reference(cell.sampler, cell.n_tokens)
        n = max(n, _required(law, Alternative.of_law(predicted), cell.name))
    return n


@dataclass(frozen=True)
class CellResult:
    """One cell's audit.

    Attributes:
        cell, report: the cell and its `StatisticalReport`.
        expected: the verdict its path must give.
        margin: the reference's margin (module docstring).
        agreement: the share of seeds whose first tokens are the control's (``None``: no
            control, or the control was not run).
        predicted: for ``llama-speculative``, the audit against the law its mechanism predicts,
            that law's exact TV to the target's, and the power of the cell's audit against it.
        samples: the generated token tuples by seed.
    """

    cell: Cell
    report: StatisticalReport
    expected: str
    margin: float
    agreement: float | None = None
    predicted: tuple[StatisticalReport, float, float] | None = None
    samples: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """The verdict is the expected one (and the predicted law holds, where audited)."""
        return self.report.verdict == self.expected and (
            self.predicted is None or self.predicted[0].verdict == "lossless")


@cache
def _files(drafter: str) -> tuple[Path, Path | None]:
    target = gguf_path(target_model())
    return target, (gguf_path(_DRAFTERS[drafter]()) if drafter in _DRAFTERS else None)


def cell_sampler(cell: Cell) -> Callable[[int], tuple[int, ...]]:
    """``seed -> the tokens`` of ``cell``'s engine path (at least ``cell.n_tokens`` unless it
    stopped), before coarsening."""
    target, drafter = _files(cell.drafter)
    spec = cell.spec
    if spec.family == "binding":
        return binding_sampler(target, BindingPath(spec.mode, cell.k, drafter), prompt_ids(),
                               cell.n_tokens, cell.sampler)
    return cpp_sampler(target, CppPath(spec.mode, cell.k, drafter), PROMPT, cell.n_tokens,
                       cell.sampler)


def _parallel_map(workers: int) -> Callable[[Callable[[int], Any], list[int]], Iterable[Any]]:
    def sample_map(fn: Callable[[int], Any], seeds: list[int]) -> Iterable[Any]:
        with ThreadPoolExecutor(workers) as pool:
            yield from pool.map(fn, seeds)
    return sample_map


def audit_cell(cell: Cell, *,
               controls: dict[tuple[str, str, int], dict[int, tuple[int, ...]]]
               | None = None, workers: int | None = None,
               on_sample: Callable[[], None] | None = None) -> CellResult:
    """Audit one cell. ``controls`` maps ``(control path, sampler name, N)`` to its samples by seed
    (filled by the controls' own cells, read by the paths that claim to equal them); ``workers``
    processes at a time for the C++ paths (default: one per core); ``on_sample`` is called after
    every sample (a progress bar)."""
    law, margin = _reference(cell.sampler, cell.n_tokens)
    if margin < MIN_MARGIN:
        raise NumericalError(f"{cell.name}: the reference's margin {margin:.2g} is below "
                             f"{MIN_MARGIN:g}: float32 rounding could move a token across a cut")
    raw = cell_sampler(cell)
    seen: dict[int, tuple[int, ...]] = {}

    def sample(seed: int) -> tuple[int, ...]:
        tokens = tuple(raw(seed)[:cell.n_tokens])
        seen.setdefault(seed, tokens)
        if on_sample is not None:
            on_sample()
        return coarsen(tokens, cell.n_tokens)

    many = cell.spec.family == "cpp" and (workers or os.cpu_count() or 1) > 1
    sample_map = _parallel_map(workers or os.cpu_count() or 1) if many else None
    report = statistical_audit(sample, law, planned_samples(cell),
                               alternative=Alternative.tv(EPSILON), alpha=POLICY_ALPHA,
                               power=POWER, sample_map=sample_map)
    agreement = None
    control = cell.spec.control
    key = (cell.sampler.name, cell.n_tokens)
    if controls is not None:
        if control is None:
            controls[(cell.path, *key)] = seen
        elif (control, *key) in controls:
            theirs = controls[(control, *key)]
            shared = [s for s in seen if s in theirs]
            if shared:
                agreement = sum(seen[s] == theirs[s] for s in shared) / len(shared)
    predicted = None
    law_pred = predicted_law(cell)
    if law_pred is not None:
        check = statistical_audit(sample, law_pred, alternative=Alternative.tv(EPSILON),
                                  alpha=POLICY_ALPHA, power=POWER, seed=1, sample_map=sample_map)
        power = achieved_power(law, Alternative.of_law(law_pred), report.n_samples,
                               alpha=POLICY_ALPHA)
        predicted = (check, laws_tv(law_pred, law), power)
    return CellResult(cell, report, cell.spec.expected, margin, agreement, predicted, seen)


def run_matrix(chosen: Sequence[Cell], *, progress: bool = True, workers: int | None = None,
               on_result: Callable[[CellResult], None] | None = None) -> list[CellResult]:
    """Audit ``chosen`` in order (controls first, so the agreement shares can be measured), with
    one progress bar over all their samples."""
    order = sorted(chosen, key=lambda c: c.spec.control is not None)
    controls: dict[tuple[str, str, int], dict[int, tuple[int, ...]]] = {}
    results: list[CellResult] = []
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=sum(planned_samples(c) + 10 for c in order), unit="sample",
                   desc="llama.cpp", leave=False)

    def tick() -> None:
        bar.update(1)

    try:
        for cell in order:
            if bar is not None:
                bar.set_description(cell.name[:48])
            result = audit_cell(cell, controls=controls, workers=workers,
                                on_sample=tick if bar is not None else None)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        if bar is not None:
            bar.close()
    return sorted(results, key=lambda r: list(chosen).index(r.cell))
