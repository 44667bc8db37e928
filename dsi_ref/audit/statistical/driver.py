"""The sampling side of the statistical audit: per-sample seeds, the determinism check, and
`statistical_audit`, which draws the planned sample and hands its counts to `audit_counts`;
`rejection_rate` and `rejects` for simulations of the test."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from ...base.errors import InvalidAuditError, NondeterministicProgramError, UnderpoweredError
from ...base.validate import check_int, check_seed
from ..exact import as_outcome
from .design import (
    POLICY_ALPHA,
    Alternative,
    LawLike,
    Outcome,
    Pooling,
    check_alpha,
    check_law,
    check_n,
    check_options,
    critical_value,
    pool_cells,
)
from .power import required_samples, stated_power
from .report import StatisticalReport, audit_counts

__all__ = ["as_sample_outcome", "laws_tv", "rejection_rate", "rejects", "sample_seeds",
           "statistical_audit"]


def sample_seeds(seed: int, n_samples: int) -> list[int]:
    """The per-sample seeds of an audit: 64-bit words of ``numpy.random.SeedSequence(seed)``.

    64 bits make a repeated seed (hence two identical samples) negligibly likely
    (probability about ``n² / 2^65``).
    """
    words = np.random.SeedSequence(seed).generate_state(n_samples, dtype=np.uint64)
    return [int(w) for w in words]


def as_sample_outcome(value: Any, seed: int | None = None) -> Outcome:
    """One sample as a hashable outcome (`dsi_ref.audit.exact.as_outcome`: a `Run` as its
    tokens, a list, array or tensor as a tuple; unhashable values refused). ``None`` is refused
    too (`InvalidAuditError`): a sampler that forgot its ``return`` would otherwise give an
    outcome outside every reference law, and a "lossy" verdict."""
    if value is None:
        raise InvalidAuditError(
            f"sample_fn returned None{'' if seed is None else f' for seed {seed}'}: return the "
            "generated tokens (e.g. run.tokens) or the Run (a missing return statement gives "
            "None)")
    return as_outcome(value, source="sample_fn returned")


def _check_determinism(sample_fn: Callable[[int], Any], drawn: list[tuple[int, Outcome]]) -> None:
    """Draw the seeds of ``drawn`` again: `NondeterministicProgramError` on a different outcome."""
    for s, outcome in drawn:
        again = as_sample_outcome(sample_fn(s), s)
        if again != outcome:
            raise NondeterministicProgramError(
                f"sample_fn is not a function of its seed: seed {s} gave {outcome!r}, then "
                f"{again!r} when drawn again after the sample; draw from a generator seeded "
                "from the seed (e.g. numpy.random.default_rng(seed)), not from a global or "
                "unseeded one", source="sample_fn")


def statistical_audit(sample_fn: Callable[[int], Any], reference_law: LawLike,
                      n_samples: int | None = None, *, alternative: Alternative | None = None,
                      alpha: float = POLICY_ALPHA, power: float = 0.99, seed: int = 0,
                      min_expected: float = 5.0, top: int = 5,
                      on_underpowered: Literal["raise", "report"] = "raise",
                      progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                      determinism_checks: int = 10,
                      sample_map: Callable[[Callable[[int], Any], list[int]], Iterable[Any]]
                      | None = None) -> StatisticalReport:
    """Audit ``sample_fn`` (``seed -> one generated sequence``) against ``reference_law``.

    ``sample_fn`` may draw from a generator of its own, seeded from ``seed`` (a black box cannot
    draw through `dsi_ref.Randomness`), but the same seed must give the same sample, or the audit
    would not be reproducible: after sampling, the first ``determinism_checks`` seeds are drawn
    again and a different outcome raises `NondeterministicProgramError` (naming the seed and both
    outcomes) instead of a verdict. This catches a sampler that ignores ``seed`` (a global or
    unseeded generator) unless its randomness rarely shows in the outcome: it misses with
    probability ``(Σ_x P(x)²)^determinism_checks``, e.g. below 1e-6 for 10 checks of a law
    whose most likely outcome has probability below 1/4. Unlike the exact audit, global
    generators are not forbidden here (``np.random.seed(seed)`` then ``np.random.*`` is a
    legitimate sampler). A sampler whose law the test already rejects is reported ``"lossy"``
    rather than refused (rejecting "independent draws from the reference" is sound whether or
    not the draws are seeded), with the number of re-drawn seeds that reproduced
    (``reproduced``) when some did not.

    Args:
        sample_fn: draws one outcome given a seed (a tuple of tokens, a list, or a `Run`; a
            ``None`` raises `InvalidAuditError`). For a ``program(rng)`` written against
            `dsi_ref.Randomness`, `dsi_ref.audit.sampling.sample_fn` builds it.
        reference_law: the exact law (e.g. `dsi_ref.target_distribution`).
        n_samples: sample size; ``None`` picks `required_samples` for ``power``.
        alternative: what the power is stated against (default: TV >= 0.1).
        alpha: false-alarm rate (default: the suite's per-test budget, `POLICY_ALPHA`).
        power: the power required before the audit may say ``"lossless"``.
        seed: root of the per-sample seeds (`sample_seeds`).
        min_expected: pooling threshold (expected count per cell).
        on_underpowered: ``"raise"`` (default) raises `UnderpoweredError` before sampling;
            ``"report"`` samples anyway and says ``"inconclusive"`` unless it rejects.
        progress: optional wrapper of the seed iterator (e.g. ``tqdm``).
        determinism_checks: how many seeds are sampled twice (0: none).
        sample_map: how the samples are drawn: ``sample_map(sample_fn, seeds)`` gives
            ``sample_fn(s)`` for each seed, in order (default: one by one, here). A parallel map
            (e.g. `dsi_ref.backends.ray.ray_map`) draws the same samples elsewhere, so the
            counts and the verdict do not depend on it.

    >>> import dsi_ref as dr
    >>> t = dr.TableLM.context_free((Fraction(1, 2), Fraction(1, 2)))
    >>> law = dr.target_distribution(t, (), 2)
    >>> r = statistical_audit(lambda s: dr.autoregressive(t, (), 2, dr.Sampler(s)).tokens, law,
    ...                       alternative=Alternative.tv(0.2), alpha=1e-6)
    >>> r.verdict, r.n_samples < 2000
    ('lossless', True)
    """
    check_alpha(alpha)
    check_alpha(power, "power")
    if not callable(sample_fn):
        raise InvalidAuditError(f"sample_fn must be a function seed -> outcome, got "
                                f"{sample_fn!r}")
    check_seed("seed", seed, error=InvalidAuditError)
    check_options(alternative, seed, min_expected, top, on_underpowered, progress)
    alternative = alternative or Alternative.tv(0.1)
    law = check_law(reference_law, "reference law")
    if n_samples is None:
        n_samples = required_samples(law, alternative, alpha=alpha, power=power,
                                     min_expected=min_expected)
        if n_samples is None:
            raise UnderpoweredError(0, 0.0, power, None, alternative.describe())
    check_n(n_samples)
    achieved = stated_power(pool_cells(law, n_samples, min_expected), n_samples, alpha, alternative)
    if achieved < power and on_underpowered == "raise":
        raise UnderpoweredError(n_samples, achieved, power,
                                required_samples(law, alternative, alpha=alpha, power=power,
                                                 min_expected=min_expected),
                                alternative.describe())
    determinism_checks = check_int("determinism_checks", determinism_checks, low=0,
                                   error=InvalidAuditError)
    if sample_map is not None and not callable(sample_map):
        raise InvalidAuditError(f"sample_map must be a function (sample_fn, seeds) -> samples, "
                                f"got {sample_map!r}")
    seeds: Iterable[int] = sample_seeds(seed, n_samples)
    if progress is not None:
        seeds = progress(seeds)
    start = time.perf_counter()
    counts: Counter[Outcome] = Counter()
    first: list[tuple[int, Outcome]] = []
    samples: Iterable[tuple[int, Any]]
    if sample_map is None:
        samples = ((s, sample_fn(s)) for s in seeds)
    else:
        listed = list(seeds)
        samples = zip(listed, sample_map(sample_fn, listed), strict=True)
    for s, value in samples:
        outcome = as_sample_outcome(value, s)
        counts[outcome] += 1
        if len(first) < determinism_checks:
            first.append((s, outcome))
    seconds = time.perf_counter() - start
    report = audit_counts(counts, law, alternative=alternative, alpha=alpha, power=power,
                          min_expected=min_expected, top=top, on_underpowered=on_underpowered,
                          seed=seed, seconds=seconds)
    if report.rejected:  # lossy whether or not seeded: say how many seeds reproduce
        same = sum(as_sample_outcome(sample_fn(s), s) == outcome for s, outcome in first)
        return report if same == len(first) else replace(report, reproduced=(same, len(first)))
    _check_determinism(sample_fn, first)
    return report


def rejection_rate(true_law: LawLike, reference_law: LawLike, n_samples: int, repeats: int,
                   rng: np.random.Generator, *, alpha: float = POLICY_ALPHA,
                   min_expected: float = 5.0) -> float:
    """How often the audit rejects samples of size ``n_samples`` drawn from ``true_law``.

    Simulates ``repeats`` multinomial samples (vectorised) and applies the exact decision rule of
    `audit_counts`: the false-alarm rate when ``true_law`` is the reference, the power otherwise.
    Used to check ``alpha`` (the finite-sample threshold) and the stated power (the G test's,
    exact or a proven bound) against simulation.
    """
    check_alpha(alpha)
    check_n(n_samples)
    ref = check_law(reference_law, "reference law")
    true = check_law(true_law, "true law")
    pooling = pool_cells(ref, n_samples, min_expected)
    outcomes = list(true)
    probs = np.array([true[o] for o in outcomes], dtype=np.float64)
    probs /= probs.sum()  # float noise only: check_law bounds |sum - 1| <= 1e-9
    draws = rng.multinomial(n_samples, probs, size=repeats)  # (repeats, outcomes)
    index = {o: i for i, c in enumerate(pooling.cells) for o in c}
    to_cell = np.zeros((len(outcomes), len(pooling.cells) + 1))
    for j, o in enumerate(outcomes):
        to_cell[j, index.get(o, len(pooling.cells))] = 1.0
    cell_counts = draws @ to_cell  # (repeats, cells + 1); the last column: impossible outcomes
    return float(rejects(cell_counts, pooling, alpha=alpha).mean())


def rejects(counts: np.ndarray, pooling: Pooling, *, alpha: float = POLICY_ALPHA) -> np.ndarray:
    """The decision of `audit_counts` on many samples at once, given by their counts per cell.

    ``counts`` has one row per sample: the number of draws in each cell of ``pooling`` (in its
    order), then the number of draws outside the reference support (last column); the sample
    size is the row's sum. A row is rejected when it has a draw outside the support or when
    ``G = 2 Σ O ln(O / E)`` over the cells reaches the threshold of ``alpha``
    (`rejection_rate` simulates with it; the power tests draw the pooled counts directly).

    >>> pooling = pool_cells({"a": 0.5, "b": 0.5}, 100)
    >>> rejects(np.array([[50, 50, 0], [20, 80, 0], [50, 49, 1]]), pooling, alpha=1e-3).tolist()
    [False, True, True]
    """
    check_alpha(alpha)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] != len(pooling.cells) + 1:
        raise InvalidAuditError(f"counts must have one row per sample and {len(pooling.cells) + 1} "
                                f"columns (the cells, then the draws outside the support), got "
                                f"shape {counts.shape}")
    n = counts.sum(axis=1, keepdims=True)
    inside = counts[:, :-1]
    expected = n * np.array(pooling.probs)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(inside > 0, inside * np.log(inside / expected), 0.0)
    statistic = 2.0 * terms.sum(axis=1)
    crit = critical_value(pooling.df, alpha)
    return np.asarray((counts[:, -1] > 0) | (statistic >= crit))


def laws_tv(p: LawLike, q: LawLike) -> float:
    """Total-variation distance of two laws given as mappings (floats)."""
    keys = set(p) | set(q)
    return 0.5 * math.fsum(abs(float(p.get(k, 0)) - float(q.get(k, 0))) for k in keys)
