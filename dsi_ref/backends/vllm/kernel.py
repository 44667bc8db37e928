"""vLLM's rejection sampler called directly, on synthetic rows: each position audited.

``vllm.v1.sample.rejection_sampler.rejection_sample`` takes, for a batch of requests, the draft
tokens, the draft rows ``q`` (or none: n-gram-style drafts, one-hot), the target logits and the
bonus tokens, and returns the tokens each request emits. Here the rows are built in code, the
same for every request of a batch (a context-free target): position ``j``'s row ``p_j`` and
draft row ``q_j``. The drafts are drawn from ``q_j`` and the bonus token from ``p_{k+1}`` by
this module (numpy, seeded), so the kernel's job is to verify and to place the bonus.
Speculative sampling is then correct exactly when, for every position ``j`` from 1 to
``k + 1``, the tokens emitted there follow ``p_j``: whether a request reaches ``j`` depends on
the earlier positions' drafts and coins alone, which are independent of position ``j``'s, so the
tokens emitted at ``j`` are an i.i.d. sample of ``p_j`` whatever the acceptance rates. Position
``k + 1`` is the **bonus**, emitted only after all ``k`` drafts were accepted: a kernel that
emits another token there (one drawn from the drafter's row, or from the last verified
position's row) is seen only at this position. Each position is a G test against ``p_j`` (the
power stated against TV >= ``epsilon``, the case's ``alpha`` split over its ``k + 1``
positions); batches are drawn until every position has the planned number of tokens (a
stopping rule on counts only), or until `MAX_REQUESTS`, after which a position short of its plan
is reported ``inconclusive`` with the power it reached. The share of drafts accepted is
reported with each case.

**Negative controls** (`MUTANTS`): a caller that tells the kernel a permuted ``q`` (`MUTANT`),
and two kernels wrapped in-process to emit a wrong bonus: one drawn from the drafter's last
row ``q_k``, one taken a position early (from ``p_k``). Each must be flagged.

Greedy requests (temperature 0) mixed into the batch must emit the greedy chain exactly:
accept a draft equal to the target's argmax, else emit the argmax and stop, else the bonus.

The cases (`CASES`) cover rows with zeros, ties, ``p == q``, vocabularies up to 32,000, ``k``
from 1 to 5, one-hot drafts, and greedy and random requests in one batch. Block verification is
not reachable on a CPU: vLLM's CPU runner uses this sampler, which has none (a finding).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...audit.statistical import (
    POLICY_ALPHA,
    Alternative,
    StatisticalReport,
    audit_counts,
    required_samples,
)

__all__ = ["BONUS_MUTANTS", "CASES", "MAX_REQUESTS", "MUTANT", "MUTANTS", "KernelCase",
           "KernelResult", "audit_kernel", "case_rows", "told_rows", "verified_law"]

#: The most requests a case sends before the positions short of their plan are reported with
#: the power they reached (the bonus position is reached only when every draft is accepted).
MAX_REQUESTS = 400_000
#: How a kernel may place the bonus token: as vLLM does (``"kept"``: the token it was handed),
#: or two wrong ways, the negative controls: ``"from-q"`` (a token drawn from the drafter's last
#: row ``q_k``) and ``"one-early"`` (a token drawn from ``p_k``, the last verified position's).
BONUS_MUTANTS = ("from-q", "one-early")


@dataclass(frozen=True)
class KernelCase:
    """One synthetic batch shape.

    Attributes:
        name: a label.
        vocab_size: ``V``.
        k: draft tokens per request.
        rows: ``random`` (random rows on ``support`` tokens), ``zeros`` (``q`` puts mass where
            ``p`` has none and the other way round), ``ties`` (rows of equal probabilities),
            ``equal`` (``q == p``).
        draft_probs: hand the kernel ``q`` (probabilistic drafts); ``False``: none (one-hot
            drafts, as n-gram speculation does).
        greedy_share: the share of the batch's requests that are greedy.
        support: the number of tokens with mass in a row (the rest of ``V`` is zero).
        mutant: tell the kernel a permuted ``q`` (the drafts are still drawn from ``q``): a
            wrong caller, the negative control that shows the audit sees a loss here.
        bonus: ``"kept"`` (vLLM's kernel as it is) or one of `BONUS_MUTANTS` (the kernel
            wrapped in-process to emit a wrong bonus token: a negative control).
    """

    name: str
    vocab_size: int = 8
    k: int = 3
    rows: str = "random"
    draft_probs: bool = True
    greedy_share: float = 0.0
    support: int = 6
    mutant: bool = False
    bonus: str = "kept"

    @property
    def negative_control(self) -> bool:
        """A case that must be flagged."""
        return self.mutant or self.bonus != "kept"


#: The default cases.
CASES: tuple[KernelCase, ...] = (
    KernelCase("random rows, k=1", k=1),
    KernelCase("random rows, k=3"),
    KernelCase("random rows, k=5", k=5),
    KernelCase("zeros in p and q", rows="zeros"),
    KernelCase("ties", rows="ties"),
    KernelCase("p == q", rows="equal"),
    KernelCase("one-hot drafts (no q)", draft_probs=False),
    KernelCase("V = 32,000", vocab_size=32_000, k=2),
    KernelCase("V = 32,000, one-hot drafts", vocab_size=32_000, k=2, draft_probs=False),
    KernelCase("greedy and random mixed", greedy_share=0.5),
)
#: The negative control: drafts drawn from q, the kernel told q permuted (must be lossy).
MUTANT = KernelCase("mutant: q told permuted", k=1, mutant=True)
#: Every negative control: `MUTANT`, and the two wrong bonus tokens (each must be lossy).
MUTANTS: tuple[KernelCase, ...] = (
    MUTANT,
    KernelCase("mutant: bonus drawn from q", k=1, bonus="from-q"),
    KernelCase("mutant: bonus taken one position early", k=1, bonus="one-early"),
)


def case_rows(case: KernelCase, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)``: the target rows of positions ``1..k+1`` and the draft rows of ``1..k``
    (float64, each row a law over ``V``), per ``case.rows``."""
    rng = np.random.default_rng(seed)
    v, s, k = case.vocab_size, case.support, case.k
    support = rng.choice(v, size=s, replace=False)
    p = np.zeros((k + 1, v))
    q = np.zeros((k, v))
    for j in range(k + 1):
        if case.rows == "ties":
            p[j, support[: s // 2]] = 1.0
        else:
            p[j, support] = rng.dirichlet(np.ones(s))
        p[j] /= p[j].sum()
    for j in range(k):
        if case.rows == "equal":
            q[j] = p[j]
        elif case.rows == "zeros":
            # q shares half of p's support and adds two tokens p does not have
            others = np.setdiff1d(np.arange(v), support)[:2]
            q[j, support[: s // 2]] = rng.dirichlet(np.ones(s // 2))
            q[j, others] = rng.dirichlet(np.ones(2))
        elif case.rows == "ties":
            q[j, support[1: s // 2 + 1]] = 1.0
        else:
            q[j, support] = rng.dirichlet(np.ones(s))
        q[j] /= q[j].sum()
    return p, q


def told_rows(case: KernelCase, q: np.ndarray) -> np.ndarray:
    """The draft rows the kernel is told: ``q``, or for a mutant ``q`` with its support
    rotated by one token (the drafts still come from ``q``)."""
    if not case.mutant:
        return q
    told = np.zeros_like(q)
    for j, row in enumerate(q):
        support = np.flatnonzero(row)
        told[j, np.roll(support, 1)] = row[support]
    return told


def verified_law(p: np.ndarray, q: np.ndarray, told: np.ndarray) -> np.ndarray:
    """The law of the token emitted at one position by speculative sampling with the draft
    drawn from ``q`` and verified against ``told`` (``= p`` exactly when ``told == q``):
    ``q(x) min(1, p(x)/told(x))`` plus the rejection mass times ``(p - told)+`` normalised."""
    ratio = np.divide(p, told, out=np.full_like(p, np.inf), where=told > 0)
    accepted = q * np.minimum(1.0, ratio)
    residual = np.maximum(p - told, 0.0)
    out: np.ndarray = accepted + (1.0 - accepted.sum()) * residual / residual.sum()
    return out


@dataclass
class KernelResult:
    """The per-position reports of one case, and the greedy requests' check."""

    case: KernelCase
    reports: list[StatisticalReport] = field(default_factory=list)
    greedy_checked: int = 0
    greedy_wrong: int = 0
    requests: int = 0

    drafted: int = 0
    accepted: int = 0

    @property
    def verdict(self) -> str:
        """``lossy`` if a position's test rejects or a greedy request is wrong; else
        ``inconclusive`` if a position (the bonus, when drafts are rarely all accepted) did not
        reach its planned sample; else ``lossless``."""
        if self.greedy_wrong or any(r.rejected for r in self.reports):
            return "lossy"
        if any(r.verdict == "inconclusive" for r in self.reports):
            return "inconclusive"
        return "lossless"

    @property
    def acceptance(self) -> float:
        """The share of the sampled requests' drafts that were accepted."""
        return self.accepted / self.drafted if self.drafted else 0.0


_REGISTERED: list[Any] = []


def _kernel() -> Any:
    """vLLM's ``rejection_sample``, with the CPU platform's kernels registered (once)."""
    from vllm.platforms import current_platform
    from vllm.v1.sample.rejection_sampler import rejection_sample

    if not _REGISTERED:
        current_platform.import_kernels()
        current_platform.register_triton_kernel_overrides()
        _REGISTERED.append(True)
    return rejection_sample


def _greedy_chain(p: np.ndarray, drafts: np.ndarray, bonus: int) -> list[int]:
    out = []
    for j, d in enumerate(drafts):
        best = int(np.argmax(p[j]))
        out.append(best)
        if int(d) != best:
            return out
    return [*out, bonus]


def _draw(rng: np.random.Generator, rows: np.ndarray, n: int) -> np.ndarray:
    """``n`` independent draws from each row: shape ``(n, len(rows))``."""
    cdf = np.cumsum(rows, axis=1)
    u = rng.random((n, len(rows)))
    out = np.empty((n, len(rows)), dtype=np.int64)
    for j in range(len(rows)):
        out[:, j] = np.minimum(np.searchsorted(cdf[j], u[:, j] * cdf[j, -1], side="right"),
                               rows.shape[1] - 1)
    return out


def audit_kernel(case: KernelCase, *, epsilon: float = 0.2, alpha: float = POLICY_ALPHA,
                 power: float = 0.99, seed: int = 0, batch: int | None = None) -> KernelResult:
    """Run vLLM's rejection sampler on ``case``'s rows until every position has the planned
    sample, and audit each position (module docstring)."""
    import torch

    rejection_sample = _kernel()
    p, q = case_rows(case, seed)
    k, v = case.k, case.vocab_size
    laws = [{(t,): float(p[j, t]) for t in np.flatnonzero(p[j])} for j in range(k + 1)]
    share = alpha / (k + 1)
    needed = [required_samples(law, Alternative.tv(epsilon), alpha=share, power=power) or 0
              for law in laws]
    batch = batch or max(64, min(4000, 2 * 10**8 // (k * v * 4 * 3)))
    rng = np.random.default_rng(seed + 1)
    torch.manual_seed(seed + 2)
    counts: list[Counter[Any]] = [Counter() for _ in range(k + 1)]
    wrong_bonus = _wrong_bonus(case, p, q, np.random.default_rng(seed + 3))
    result = KernelResult(case)
    logits = torch.tensor(np.log(np.where(p[:k] > 0, p[:k], 1.0)) + np.where(p[:k] > 0, 0,
                          -math.inf), dtype=torch.float32)
    draft_rows = torch.tensor(told_rows(case, q), dtype=torch.float32)
    while (any(sum(c.values()) < n for c, n in zip(counts, needed, strict=True))
           and result.requests < MAX_REQUESTS):
        drafts = _draw(rng, q, batch)
        bonus = _draw(rng, p[k:], batch)[:, 0]
        greedy = rng.random(batch) < case.greedy_share
        metadata = _Metadata(greedy)
        out = rejection_sample(
            torch.tensor(drafts.reshape(-1), dtype=torch.int32), [k] * batch, k,
            torch.arange(1, batch + 1, dtype=torch.int32) * k,
            draft_rows.repeat(batch, 1).contiguous() if case.draft_probs else None,
            logits.repeat(batch, 1).contiguous(),
            torch.tensor(bonus, dtype=torch.int32).view(-1, 1), metadata)
        rows = wrong_bonus(out.numpy())
        result.requests += batch
        for b in range(batch):
            emitted = [int(t) for t in rows[b] if t != -1]
            if greedy[b]:
                result.greedy_checked += 1
                result.greedy_wrong += emitted != _greedy_chain(p, drafts[b], int(bonus[b]))
                continue
            result.drafted += k
            result.accepted += len(emitted) - 1
            for j, token in enumerate(emitted[:k + 1]):
                counts[j][(token,)] += 1
    result.reports = [audit_counts(c, law, alternative=Alternative.tv(epsilon), alpha=share,
                                   power=power, on_underpowered="report")
                      for c, law in zip(counts, laws, strict=True)]
    return result


def _wrong_bonus(case: KernelCase, p: np.ndarray, q: np.ndarray, rng: np.random.Generator
                 ) -> Any:
    """The in-process wrapper of the kernel's output for ``case.bonus``: the identity, or a
    kernel whose bonus token (position ``k + 1``, emitted after ``k`` accepted drafts) is drawn
    from ``q_k`` (``"from-q"``) or from ``p_k`` (``"one-early"``) instead of the one handed in."""
    if case.bonus == "kept":
        return lambda rows: rows
    if case.bonus not in BONUS_MUTANTS:
        raise ValueError(f"bonus must be 'kept' or one of {BONUS_MUTANTS}, got {case.bonus!r}")
    row = q[case.k - 1] if case.bonus == "from-q" else p[case.k - 1]

    def wrapped(rows: np.ndarray) -> np.ndarray:
        rows = rows.copy()
        full = np.flatnonzero(rows[:, case.k] != -1)
        rows[full, case.k] = _draw(rng, row[None, :], len(full))[:, 0]
        return rows

    return wrapped


class _Metadata:
    """The fields of vLLM's ``SamplingMetadata`` that ``rejection_sample`` reads."""

    def __init__(self, greedy: np.ndarray) -> None:
        import torch

        self.all_greedy = bool(greedy.all())
        self.all_random = bool(not greedy.any())
        self.temperature = torch.tensor(np.where(greedy, 0.0, 1.0), dtype=torch.float32)
        self.generators: dict[int, Any] = {}
