"""The statistical audit: a black-box sampler's law of sequences against an exact reference law.

Exact enumeration needs a decoder that draws through `Randomness`; a real decoder (torch, another
library) draws its own randomness, so it is audited from samples. The test is designed *before*
sampling, from the reference law, the sample size and the stated alternative:

1. **Cells** (`pool_cells`). Every outcome (a whole generated sequence) with expected count
   ``n · p >= min_expected`` is a cell of its own; the rarer outcomes are sorted by probability
   (ascending) and pooled greedily, in that order, into groups whose expected count reaches
   ``min_expected`` (a remainder below it joins the last group; if every outcome is rare they all
   form one cell). Pooling depends on the reference law and ``n`` only, never on the data, so
   the false-alarm rate is not inflated. Outcomes outside the reference support form no cell: one
   observation of such an outcome rejects outright (it has probability 0 under the reference).
2. **Statistic and threshold**. The likelihood-ratio statistic ``G = 2 n KL(P̂ ‖ P)`` over the
   cells (``P̂`` the empirical cell frequencies), ``df = cells - 1``. The threshold is *not* the
   asymptotic chi-square quantile (far in the tail, at the suite's ``alpha = 1e-8``, it is
   anti-conservative: see docs/statistical-policy.md) but a finite-sample bound (Agrawal 2020,
   "Finite-sample concentration of the multinomial in relative entropy", IEEE Trans. Inf. Theory
   66(10)): for ``x = n KL > k - 1``, ``P[n KL(P̂ ‖ P) >= x] <= e^{-x} (e x / (k - 1))^{k - 1}``
   with ``k`` cells. The test rejects when that bound is ``<= alpha``, so the false-alarm rate is
   at most ``alpha`` for every ``n``, with no approximation; the reported p-value is the bound.
3. **Power against a named alternative** (`Alternative`): a lower bound on the probability
   that *this* test (``n KL(P̂ ‖ P) >= x``, ``x`` half the threshold of step 2, with this
   pooling) rejects, never an approximation of it. Write ``t`` for the alternative's mass
   outside the reference support and ``q`` for its law given that a draw falls inside, pooled
   into the cells. No draw falls outside with probability ``(1 - t)^n``, and then the cell
   counts are multinomial ``(n, q)``, so ``power = 1 - (1 - t)^n · miss(q)`` with
   ``miss(q) = P_q[n KL(P̂ ‖ P) < x]``. Each cell contributes ``O ln(O / E) - O + E >= 0`` to
   ``n KL`` (its deviance; they add up to ``n KL`` because ``Σ O = Σ E = n``), so a count
   vector that misses has every cell's deviance below ``x``.

   * **A specific wrong law** ``q`` (`Alternative.of_law`, e.g. a zoo mutant's exact law):
     ``miss(q)`` is computed **exactly** when affordable: the count vectors of all cells but the
     two most likely are enumerated (those whose partial deviance already reaches ``x``, or that
     cannot be completed to ``n`` draws, dropped), and given one of them the two last cells
     share the remaining draws binomially, the counts that miss forming an interval (the sum of
     two deviances is convex), so their probability is a difference of binomial distribution
     functions. With two cells this is one binomial probability. When the enumeration would hold
     more than ``_ENUMERATION_LIMIT`` partial vectors (many cells, or large ``n``), ``miss(q)``
     is bounded above by the smaller of two proven bounds:

     - *Chernoff*: ``miss <= e^{θ x} E_q[e^{-θ n KL} ; every deviance < x]`` for every
       ``θ >= 0`` (Markov). The expectation is exact: the multinomial is the law of independent
       Poisson counts ``Pois(n q_i)`` given that they add up to ``n``, so it is the
       coefficient of ``z^n`` in ``Π_i Σ_o Pois(o; n q_i) e^{-θ dev_i(o)} z^o`` divided by
       ``P[Pois(n) = n]``, read off a circular FFT convolution (aliasing only adds nonnegative
       terms, and ``_FFT_SLACK`` per cell covers the FFT's rounding); ``θ`` is chosen on a grid.
       It sees every cell's noise; its slack is Markov's (a factor of a few on ``miss``).
     - *binary*: for a set ``A`` of cells, ``n KL(P̂ ‖ P) >= n kl(P̂(A) ‖ P(A))`` (data
       processing), and the count in ``A`` is ``Bin(n, q(A))``: the probability that it lies
       strictly between the two cuts where ``n kl`` reaches ``x`` is a bound on ``miss``; the
       smallest over the ``k - 1`` sets of cells of largest ``q / P``.

   * **Every law at total-variation distance ``>= ε``** (`Alternative.tv`): a lower bound over
     the whole class. Deviations inside pools are invisible; they hide at most
     ``H = Σ_pools (P_g - min p in g)`` of TV. A law with mass ``t`` outside the support has
     ``TV(q, P) >= ε - t - H`` on the cells (``t`` of the TV is the outside mass, and
     renormalising the inside mass moves it by ``t`` more). For a law ``q`` on the cells at TV
     ``δ' >= δ`` let ``A = {q > P}``, ``π = P(A)``: then ``q(A) = π + δ'``, the count in ``A``
     is ``Bin(n, π + δ')``, and the test rejects once it reaches ``m_hi(π)``, the smallest count
     ``>= n π`` with ``n kl(m / n ‖ π) >= x`` (data processing again). So
     ``miss(q) <= M(δ) = sup_π P[Bin(n, π + δ) < m_hi(π)]`` over the masses ``π <= 1 - δ`` of
     the sets of cells: all of them with up to ``_SUBSET_CELLS`` cells, else the interval
     ``[min P, 1 - max(δ, min P)]`` by branch and bound (`_tv_inside_miss`: the largest
     interval bound, within 1 % or one binomial term of the sup). The
     audit's miss is at most ``sup_t (1 - t)^n M(ε - t - H)``, taken over a grid of ``t`` with
     the monotone bound ``(1 - t_a)^n M(ε - t_b - H)`` on each step ``[t_a, t_b]`` (one cell:
     exactly ``(1 - (ε - H))^n``). The bound ignores the noise of the cells other than the two
     sets, so it is conservative, more so with many cells.

   Every draw counted as rejected has ``n KL >= x (1 + 1e-9) + 1e-14 n``, beyond the rounding
   of ``G``, so the stated power is that of the test as implemented.

The package's modules follow those steps: `dsi_ref.audit.statistical.design` (the cells, the
statistic and its threshold, the alternatives: everything fixed before sampling),
`dsi_ref.audit.statistical.power` (step 3), `dsi_ref.audit.statistical.report` (the verdict
of drawn counts) and `dsi_ref.audit.statistical.driver` (the sampling).

`statistical_audit` refuses (`UnderpoweredError`, before drawing anything) to run a sample that
cannot reach the requested power, and says how many samples would; a rejection is reported as
``"lossy"`` with the cells of largest standardised residual and every impossible outcome seen.
Per-sample seeds derive from one seed (`sample_seeds`), so an audit is reproducible.
"""

from __future__ import annotations

from ...base.errors import InvalidAuditError, UnderpoweredError
from .design import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
    LawLike,
    Pooling,
    g_statistic,
    pool_cells,
)
from .driver import laws_tv, rejection_rate, rejects, sample_seeds, statistical_audit
from .power import achieved_power, required_samples
from .report import Residual, StatisticalReport, audit_counts

__all__ = [
    "POLICY_ALPHA",
    "POLICY_MISS",
    "Alternative",
    "InvalidAuditError",
    "LawLike",
    "Pooling",
    "Residual",
    "StatisticalReport",
    "UnderpoweredError",
    "achieved_power",
    "audit_counts",
    "g_statistic",
    "laws_tv",
    "pool_cells",
    "rejection_rate",
    "rejects",
    "required_samples",
    "sample_seeds",
    "statistical_audit",
]
