"""Optimality, exactly: the best acceptance a lossless verifier can reach, as a certified LP.

Two linear programs over couplings, each of the form

    maximise  c·z   subject to   A z = b,   z >= 0,

solved in floats by HiGHS (`scipy.optimize.linprog`) and then **certified in `Fraction`s**: a
`Certificate` holds a primal ``z`` and a dual ``w`` (one entry per row of ``A``) with

* primal feasibility: ``z >= 0`` and ``A z = b`` exactly;
* dual feasibility: ``Aᵀ w >= c`` exactly (the dual is ``minimise b·w  s.t.  Aᵀ w >= c``);
* equal objectives: ``c·z = b·w``, which by weak duality makes both optimal.

`Certificate.check` verifies the three in rational arithmetic and raises `CertificateError`
(naming the condition) when one fails; `solve` never returns an unchecked certificate.

**One-step multi-draft** (`multidraft_program`). The target row ``p`` and ``k`` drafts
``X = (X_1..X_k)`` with a draft law ``Q`` on ``V^k`` (`draft_law`: i.i.d. from ``q``, without
replacement from ``q``, or the top-``k`` tokens of ``q``). A lossless verifier outputs ``Y ~ p``
coupled with ``X``, accepting when ``Y ∈ {X_1..X_k}``; the optimum is

    max over couplings π of (X ~ Q, Y ~ p) of  P_π(Y ∈ X),

a transport problem. By max-flow/min-cut it equals ``1 − max_{B ⊆ V} (Q(X ⊆ B) − p(B))``
(`min_cut_optimum`, an independent check; ``k = 1`` gives ``1 − TV(p, q)``).

**Chain verification** (`chain_program`, Sun et al., arXiv 2403.10444). ``γ`` drafts
``x_{1:γ}`` from the drafter's chain law ``q(x_{1:γ})``; a verifier outputs ``O = (x_{1:τ}, y)``
(``τ`` accepted drafts, then one token ``y``) with any law ``π(x, τ, y)`` whose ``x``-marginal is
``q``. It is *valid* when ``O``, extended to length ``γ + 1`` by sampling from the target, has
the target's law: for every ``s ∈ V^{γ+1}``

    Σ_j P(O = s_{1:j}) · p(s_{j+1:γ+1} | s_{1:j}) = p(s_{1:γ+1}).

The LP maximises ``E[τ]`` over valid verifiers; block verification is claimed to attain it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypeAlias

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import csc_matrix

from ..base.errors import InvalidParameterError
from ..base.models import LanguageModel, TableLM
from ..base.randomness import Randomness
from ..base.result import Run
from ..decoders.common import check_inputs, model_probs
from ..decoders.verification import Rule, VerifyRule
from .acceptance import window_acceptance_law
from .exact import exact_expectation, exact_row

__all__ = ["DRAFT_SCHEMES", "TREE_RULE_DRAFTS", "Certificate", "CertificateError", "Decoder",
           "DraftScheme",
           "LinearProgram", "block_accepted", "chain_optimum", "chain_program", "draft_law",
           "min_cut_optimum", "multidraft_optimum", "multidraft_program", "one_step_acceptance",
           "row_models", "solve"]

DraftScheme: TypeAlias = Literal["iid", "without_replacement", "top_k"]
#: The draft laws of `draft_law`: i.i.d. from ``q``; without replacement from ``q`` (``x_i`` from
#: ``q`` renormalised over the tokens not drafted yet); the ``k`` most likely tokens of ``q``
#: (a point mass; ties broken toward the lower id, in decreasing order of ``q``). Both of the
#: last two draft fewer than ``k`` tokens when fewer have ``q > 0``.
DRAFT_SCHEMES: tuple[DraftScheme, ...] = ("iid", "without_replacement", "top_k")

#: The draft law each tree rule (``dr.TREE_VERIFY_RULES``) draws its children by, so that its
#: one-step acceptance is compared with the optimum for the same drafts. A rule missing here
#: makes no lossless claim (greedy): no optimum applies to it.
TREE_RULE_DRAFTS: dict[str, DraftScheme] = {
    "rrs": "iid", "rrs_without_replacement": "without_replacement", "eagle_topk": "top_k",
    "traversal": "without_replacement"}

#: Largest denominator tried when the float solution is first rounded (`solve`'s first attempt).
MAX_DENOMINATOR = 10**6
#: A float primal entry above this is in the support (the basis is built from it first).
SUPPORT_TOLERANCE = 1e-9
#: Relative residual below which a column is read as dependent on the columns chosen so far.
RANK_TOLERANCE = 1e-9

Tokens: TypeAlias = tuple[int, ...]


class CertificateError(ArithmeticError):
    """An LP certificate does not hold exactly, or none could be built from the float solution.

    Attributes:
        condition: ``"primal"`` (``z < 0`` somewhere or ``A z ≠ b``), ``"dual"`` (``Aᵀ w < c``
            somewhere), ``"gap"`` (``c·z ≠ b·w``), ``"value"`` (the stated value is not
            ``c·z``), ``"shape"`` (wrong lengths) or ``"solver"`` (HiGHS found no optimum, or
            the exact repair failed).
    """

    def __init__(self, condition: str, message: str) -> None:
        super().__init__(f"{condition}: {message}")
        self.condition = condition


@dataclass(frozen=True)
class LinearProgram:
    """``maximise c·z  s.t.  A z = b,  z >= 0``, with ``A`` stored by sparse columns.

    Args:
        columns: ``columns[j]`` maps a row index to the nonzero entry ``A[i, j]``.
        b: the right-hand side, one `Fraction` per row.
        c: the objective, one `Fraction` per column.
        column_labels: what each variable means (e.g. ``(x, y)``), for messages and reading.
        row_labels: what each constraint means.
    """

    columns: tuple[Mapping[int, Fraction], ...]
    b: tuple[Fraction, ...]
    c: tuple[Fraction, ...]
    column_labels: tuple[Hashable, ...]
    row_labels: tuple[Hashable, ...]

    def __post_init__(self) -> None:
        n, m = len(self.columns), len(self.b)
        if len(self.c) != n or len(self.column_labels) != n or len(self.row_labels) != m:
            raise InvalidParameterError(f"LinearProgram: {n} columns, {len(self.c)} costs, "
                                        f"{len(self.column_labels)} column labels; {m} rows, "
                                        f"{len(self.row_labels)} row labels")
        if any(not 0 <= i < m for col in self.columns for i in col):
            raise InvalidParameterError("LinearProgram: a column names a row out of range")

    def dense(self) -> np.ndarray:
        """``A`` as a float array (rows × columns)."""
        a = np.zeros((len(self.b), len(self.columns)))
        for j, col in enumerate(self.columns):
            for i, v in col.items():
                a[i, j] = float(v)
        return a


@dataclass(frozen=True)
class Certificate:
    """An exact optimality certificate: primal ``z``, dual ``w`` and the common ``value``.

    `check` proves, in `Fraction`s, that ``z`` is feasible, ``w`` is dual feasible and
    ``c·z = b·w = value``: then ``value`` is the exact optimum of ``program``.
    """

    program: LinearProgram
    primal: tuple[Fraction, ...]
    dual: tuple[Fraction, ...]
    value: Fraction

    def check(self) -> None:
        """Raise `CertificateError` unless the certificate holds exactly."""
        lp, z, w = self.program, self.primal, self.dual
        if len(z) != len(lp.columns) or len(w) != len(lp.b):
            raise CertificateError("shape", f"{len(z)} primal entries for {len(lp.columns)} "
                                   f"columns, {len(w)} dual entries for {len(lp.b)} rows")
        for j, zj in enumerate(z):
            if not isinstance(zj, Fraction) or zj < 0:
                raise CertificateError("primal", f"z[{lp.column_labels[j]!r}] = {zj!r} is not a "
                                       f"nonnegative Fraction")
        if not all(isinstance(wi, Fraction) for wi in w):
            raise CertificateError("dual", "a dual entry is not a Fraction")
        az = [Fraction(0)] * len(lp.b)
        for j, col in enumerate(lp.columns):
            if z[j]:
                for i, a in col.items():
                    az[i] += a * z[j]
        for i, (lhs, rhs) in enumerate(zip(az, lp.b, strict=True)):
            if lhs != rhs:
                raise CertificateError("primal", f"row {lp.row_labels[i]!r}: A z = {lhs} != "
                                       f"b = {rhs}")
        for j, col in enumerate(lp.columns):
            reduced = sum((a * w[i] for i, a in col.items()), Fraction(0))
            if reduced < lp.c[j]:
                raise CertificateError("dual", f"column {lp.column_labels[j]!r}: Aᵀw = "
                                       f"{reduced} < c = {lp.c[j]}")
        primal_value = sum((cj * zj for cj, zj in zip(lp.c, z, strict=True)), Fraction(0))
        dual_value = sum((bi * wi for bi, wi in zip(lp.b, w, strict=True)), Fraction(0))
        if primal_value != dual_value:
            raise CertificateError("gap", f"c·z = {primal_value} != b·w = {dual_value}")
        if primal_value != self.value:
            raise CertificateError("value", f"stated value {self.value} != c·z = "
                                   f"{primal_value}")


def solve(program: LinearProgram, *, rounding: bool = True) -> Certificate:
    """The exact optimum of ``program`` with its `Certificate`, checked before it is returned.

    HiGHS's dual simplex gives a float vertex ``z̃`` and duals ``w̃``. First attempt: round both
    with `Fraction.limit_denominator` (`MAX_DENOMINATOR`) and check. Repair, when that fails:
    choose a basis ``B`` (the support of ``z̃`` first, then the columns of smallest reduced cost
    ``Aᵀw̃ − c``, each kept when independent of the ones kept), ``rank A`` independent rows ``R``
    of ``A_B``, and solve exactly ``A_{R,B} z_B = b_R`` and ``A_{R,B}ᵀ w_R = c_B`` (``w`` zero
    off ``R``); complementary slackness makes the objectives equal, and `Certificate.check`
    decides the rest. ``rounding=False`` skips the first attempt (the repair alone).

    Raises:
        CertificateError: HiGHS found no optimum, or neither attempt gives a certificate that
            checks (never an unverified optimum).
    """
    a = program.dense()
    b = np.array([float(v) for v in program.b])
    c = np.array([float(v) for v in program.c])
    result = linprog(-c, A_eq=csc_matrix(a), b_eq=b, bounds=(0, None), method="highs-ds")
    if result.status != 0:
        raise CertificateError("solver", f"HiGHS found no optimum: {result.message}")
    x = np.asarray(result.x, dtype=float)
    w = -np.asarray(result.eqlin.marginals, dtype=float)  # duals of max c·z from those of min −c·z
    if rounding:
        try:
            certificate = _rounded(program, x, w)
            certificate.check()
            return certificate
        except CertificateError:
            pass
    certificate = _basis_certificate(program, a, x, w)
    certificate.check()
    return certificate


def _round(v: float) -> Fraction:
    return Fraction(v).limit_denominator(MAX_DENOMINATOR)


def _rounded(program: LinearProgram, x: np.ndarray, w: np.ndarray) -> Certificate:
    z = tuple(max(_round(v), Fraction(0)) for v in x)
    dual = tuple(_round(v) for v in w)
    value = sum((cj * zj for cj, zj in zip(program.c, z, strict=True)), Fraction(0))
    return Certificate(program, z, dual, value)


def _basis_certificate(program: LinearProgram, a: np.ndarray, x: np.ndarray,
                       w: np.ndarray) -> Certificate:
    rank = int(np.linalg.matrix_rank(a))
    reduced = a.T @ w - np.array([float(v) for v in program.c])
    order = sorted(range(len(x)), key=lambda j: (x[j] <= SUPPORT_TOLERANCE, -x[j], reduced[j]))
    basis: list[int] = []
    ortho = np.zeros((a.shape[0], 0))
    for j in order:
        col = a[:, j]
        norm = float(np.linalg.norm(col))
        if norm == 0:
            continue
        rest = col - ortho @ (ortho.T @ col)
        rest = rest - ortho @ (ortho.T @ rest)  # twice is enough (Gram-Schmidt, re-orthogonalised)
        if float(np.linalg.norm(rest)) > RANK_TOLERANCE * norm:
            ortho = np.column_stack([ortho, rest / np.linalg.norm(rest)])
            basis.append(j)
            if len(basis) == rank:
                break
    if len(basis) != rank:
        raise CertificateError("solver", f"could not choose {rank} independent columns")
    rows = _independent_rows(a[:, basis], rank)
    matrix = [[program.columns[j].get(i, Fraction(0)) for j in basis] for i in rows]
    z_b = _solve_exact(matrix, [program.b[i] for i in rows])
    transposed = [list(r) for r in zip(*matrix, strict=True)]
    w_r = _solve_exact(transposed, [program.c[j] for j in basis])
    z = [Fraction(0)] * len(program.columns)
    for j, v in zip(basis, z_b, strict=True):
        z[j] = v
    dual = [Fraction(0)] * len(program.b)
    for i, v in zip(rows, w_r, strict=True):
        dual[i] = v
    value = sum((cj * zj for cj, zj in zip(program.c, z, strict=True)), Fraction(0))
    return Certificate(program, tuple(z), tuple(dual), value)


def _independent_rows(a_b: np.ndarray, rank: int) -> list[int]:
    """``rank`` rows of ``a_b`` (full column rank) that are independent: greedy, in order."""
    rows: list[int] = []
    ortho = np.zeros((a_b.shape[1], 0))
    for i in range(a_b.shape[0]):
        row = a_b[i]
        norm = float(np.linalg.norm(row))
        if norm == 0:
            continue
        rest = row - ortho @ (ortho.T @ row)
        rest = rest - ortho @ (ortho.T @ rest)
        if float(np.linalg.norm(rest)) > RANK_TOLERANCE * norm:
            ortho = np.column_stack([ortho, rest / np.linalg.norm(rest)])
            rows.append(i)
            if len(rows) == rank:
                return rows
    raise CertificateError("solver", f"could not choose {rank} independent rows")


def _solve_exact(matrix: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction]:
    """``M y = rhs`` for a square ``M``, by sparse Gaussian elimination in `Fraction`s."""
    n = len(matrix)
    rows: list[dict[int, Fraction]] = [{j: v for j, v in enumerate(r) if v} for r in matrix]
    values = list(rhs)
    pivots: list[tuple[int, int]] = []  # (row, column), in elimination order
    free = set(range(n))
    for _ in range(n):
        candidates = [(len(rows[i]), i) for i in free if rows[i]]
        if not candidates:
            raise CertificateError("solver", "the chosen basis is singular in exact arithmetic")
        _, r = min(candidates)
        col = min(rows[r], key=lambda j: (abs(rows[r][j]) == 0, j))
        free.discard(r)
        pivot = rows[r][col]
        for i in list(free) + [p for p, _ in pivots]:
            factor = rows[i].get(col)
            if factor:
                factor /= pivot
                for j, v in rows[r].items():
                    new = rows[i].get(j, Fraction(0)) - factor * v
                    if new:
                        rows[i][j] = new
                    else:
                        rows[i].pop(j, None)
                values[i] -= factor * values[r]
        pivots.append((r, col))
    y = [Fraction(0)] * n
    for r, col in pivots:
        y[col] = values[r] / rows[r][col]
    return y


# -- one-step multi-draft ----------------------------------------------------------------------
def _row(probs: Sequence[Fraction | float], name: str) -> tuple[Fraction, ...]:
    row, _ = exact_row(probs)
    if not row or any(v < 0 for v in row) or sum(row) != 1:
        raise InvalidParameterError(f"{name} must be a probability row, got {probs!r}")
    return tuple(row)


def draft_law(q: Sequence[Fraction | float], k: int, scheme: DraftScheme = "iid"
              ) -> dict[Tokens, Fraction]:
    """The law ``Q`` of ``k`` drafts ``(x_1..x_k)`` from the drafter row ``q``.

    ``"iid"``: ``Q(x) = Π_i q(x_i)``. ``"without_replacement"``: ``Q(x) = Π_i q(x_i) /
    (1 − Σ_{j<i} q(x_j))`` over distinct tokens (fewer than ``k`` when fewer tokens have
    ``q > 0``: every one of them is drafted). ``"top_k"``: a point mass on the ``k`` most likely
    tokens with ``q > 0`` (ties: lower id first). As the tree rules draft (`TREE_RULE_DRAFTS`).

    >>> draft_law([Fraction(1, 2), Fraction(1, 2)], 2, "without_replacement")
    {(0, 1): Fraction(1, 2), (1, 0): Fraction(1, 2)}
    """
    row = _row(q, "q")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InvalidParameterError(f"k must be an int >= 1, got {k!r}")
    support = [t for t, v in enumerate(row) if v]
    if scheme == "iid":
        return {x: _product(row[t] for t in x) for x in itertools.product(support, repeat=k)}
    if scheme == "without_replacement":
        law: dict[Tokens, Fraction] = {}
        for x in itertools.permutations(support, min(k, len(support))):
            mass, left = Fraction(1), Fraction(1)
            for t in x:
                mass *= row[t] / left
                left -= row[t]
            law[x] = mass
        return law
    if scheme == "top_k":
        return {tuple(sorted(support, key=lambda t: (-row[t], t))[:k]): Fraction(1)}
    raise InvalidParameterError(f"scheme must be one of {DRAFT_SCHEMES}, got {scheme!r}")


def _product(values: Iterable[Fraction]) -> Fraction:
    out = Fraction(1)
    for v in values:
        out *= v
    return out


def multidraft_program(p: Sequence[Fraction | float], law: Mapping[Tokens, Fraction]
                       ) -> LinearProgram:
    """The transport LP of the one-step multi-draft optimum: variables ``π(x, y)`` for ``x`` in
    the support of ``Q = law`` and ``y ∈ V``; rows ``Σ_y π(x, y) = Q(x)`` and ``Σ_x π(x, y) =
    p(y)``; objective ``Σ_{y ∈ x} π(x, y) = P(Y ∈ X)``."""
    row = _row(p, "p")
    drafts = sorted(x for x, v in law.items() if v)
    if sum(law.values(), Fraction(0)) != 1 or any(v < 0 for v in law.values()):
        raise InvalidParameterError("the draft law must be a probability law")
    if any(not 0 <= t < len(row) for x in drafts for t in x):
        raise InvalidParameterError("a draft holds a token outside p's vocabulary")
    n_x = len(drafts)
    columns: list[dict[int, Fraction]] = []
    c: list[Fraction] = []
    labels: list[Hashable] = []
    for i, x in enumerate(drafts):
        for y in range(len(row)):
            columns.append({i: Fraction(1), n_x + y: Fraction(1)})
            c.append(Fraction(int(y in x)))
            labels.append((x, y))
    b = tuple([law[x] for x in drafts] + list(row))
    row_labels = tuple([("draft", x) for x in drafts] + [("target", y) for y in range(len(row))])
    return LinearProgram(tuple(columns), b, tuple(c), tuple(labels), row_labels)


def multidraft_optimum(p: Sequence[Fraction | float], q: Sequence[Fraction | float], k: int,
                       scheme: DraftScheme = "iid") -> Certificate:
    """The certified maximum of ``P(Y ∈ {X_1..X_k})`` over couplings of ``Y ~ p`` and ``k``
    drafts from ``q`` drawn by ``scheme`` (`draft_law`)."""
    return solve(multidraft_program(p, draft_law(q, k, scheme)))


def row_models(p: Sequence[Fraction | float], q: Sequence[Fraction | float]
               ) -> tuple[TableLM, TableLM]:
    """Context-free target and drafter whose every row is ``p`` and ``q``: the one-step instance
    as models a decoder can run."""
    p_row, q_row = _row(p, "p"), _row(q, "q")
    if len(p_row) != len(q_row):
        raise InvalidParameterError(f"p and q have different lengths: {len(p_row)}, "
                                    f"{len(q_row)}")
    return (TableLM(len(p_row), 0, {(): p_row}, name="p"),
            TableLM(len(q_row), 0, {(): q_row}, name="q"))


#: A decoder as `one_step_acceptance` calls it: ``(target, drafter, prompt, max_new_tokens,
#: rng) -> Run``, e.g. ``lambda t, d, pr, n, rng: tree_speculative(t, d, pr, n, rng, tree=(k,),
#: verify=name)``.
Decoder: TypeAlias = Callable[[LanguageModel, LanguageModel, Tokens, int, Randomness], Run]


def one_step_acceptance(decoder: Decoder, p: Sequence[Fraction | float],
                        q: Sequence[Fraction | float]) -> Fraction:
    """A decoder's exact one-step acceptance probability on the instance ``(p, q)``: the
    expected ``stats["accepted"]`` of a run of 2 tokens on `row_models` (the first step drafts
    and decides; after a rejection the second has no room for a draft, after an acceptance the
    second token is the bonus)."""
    target, drafter = row_models(p, q)
    return Fraction(exact_expectation(
        lambda rng: decoder(target, drafter, (), 2, rng).stats["accepted"]))


def min_cut_optimum(p: Sequence[Fraction | float], law: Mapping[Tokens, Fraction]) -> Fraction:
    """The multi-draft optimum in closed form (max-flow/min-cut of the transport problem):
    ``1 − max_{B ⊆ V} (Q(X ⊆ B) − p(B))``, where ``X ⊆ B`` means every draft lies in ``B``.

    >>> min_cut_optimum([Fraction(1, 2), Fraction(1, 2)], {(0,): Fraction(1)})
    Fraction(1, 2)
    """
    row = _row(p, "p")
    best = Fraction(0)
    for size in range(len(row) + 1):
        for subset in itertools.combinations(range(len(row)), size):
            inside = set(subset)
            mass = sum((v for x, v in law.items() if set(x) <= inside), Fraction(0))
            best = max(best, mass - sum((row[t] for t in subset), Fraction(0)))
    return 1 - best


# -- chain verification (Sun et al.) -------------------------------------------------------------
def _chain_probs(model: LanguageModel, prompt: Tokens, prefix: Tokens) -> tuple[Fraction, ...]:
    return _row(model_probs(model, prompt + prefix), getattr(model, "name", "model"))


def chain_program(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                  gamma: int) -> LinearProgram:
    """The LP of the best valid chain verifier for ``γ = gamma`` drafts after ``prompt``:
    variables ``π(x_{1:γ}, τ, y)`` (``τ ∈ 0..γ``, ``y ∈ V``); rows ``Σ_{τ,y} π(x, τ, y) =
    q(x_{1:γ})`` and, for every ``s ∈ V^{γ+1}``, the validity constraint of the module
    docstring; objective ``E[τ]``. Models without EOS only."""
    prompt = check_inputs(target, prompt, gamma + 1, drafter)
    if not isinstance(gamma, int) or isinstance(gamma, bool) or gamma < 1:
        raise InvalidParameterError(f"gamma must be an int >= 1, got {gamma!r}")
    if target.eos is not None or drafter.eos is not None:
        raise InvalidParameterError("chain_program: models with EOS are not supported")
    vocab = target.vocab_size
    p_rows: dict[Tokens, tuple[Fraction, ...]] = {}

    def p_row(prefix: Tokens) -> tuple[Fraction, ...]:
        if prefix not in p_rows:
            p_rows[prefix] = _chain_probs(target, prompt, prefix)
        return p_rows[prefix]

    def p_cont(prefix: Tokens, rest: Tokens) -> Fraction:  # p(rest | prefix)
        out = Fraction(1)
        for t in rest:
            out *= p_row(prefix)[t]
            prefix = prefix + (t,)
        return out

    drafts: dict[Tokens, Fraction] = {(): Fraction(1)}
    for _ in range(gamma):
        drafts = {x + (t,): v * qt for x, v in drafts.items()
                  for t, qt in enumerate(_chain_probs(drafter, prompt, x)) if qt}
    xs = sorted(drafts)
    sequences = list(itertools.product(range(vocab), repeat=gamma + 1))
    s_index = {s: len(xs) + i for i, s in enumerate(sequences)}
    columns: list[dict[int, Fraction]] = []
    c: list[Fraction] = []
    labels: list[Hashable] = []
    for i, x in enumerate(xs):
        for tau in range(gamma + 1):
            for y in range(vocab):
                out = x[:tau] + (y,)
                col = {i: Fraction(1)}
                for rest in itertools.product(range(vocab), repeat=gamma - tau):
                    weight = p_cont(out, rest)
                    if weight:
                        col[s_index[out + rest]] = weight
                columns.append(col)
                c.append(Fraction(tau))
                labels.append((x, tau, y))
    b = tuple([drafts[x] for x in xs] + [p_cont((), s) for s in sequences])
    row_labels = tuple([("draft", x) for x in xs] + [("valid", s) for s in sequences])
    return LinearProgram(tuple(columns), b, tuple(c), tuple(labels), row_labels)


def chain_optimum(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                  gamma: int) -> Certificate:
    """The certified maximum of ``E[τ]`` over valid chain verifiers (`chain_program`)."""
    return solve(chain_program(target, drafter, prompt, gamma))


def block_accepted(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                   gamma: int, verify: VerifyRule | Rule) -> Fraction:
    """The exact ``E[τ]`` of one SI iteration with ``γ = gamma`` drafts verified by ``verify``:
    the expected ``stats["accepted"]`` after a single `SIRun.iterate` (budget ``γ + 1``, so the
    window is the full ``γ``). One iteration, not a whole run: a run would go on after a
    rejection and count the later iterations' acceptances too."""
    law = window_acceptance_law(target, drafter, gamma, verify, prompt)
    return sum((length * prob for length, prob in law.items()), Fraction(0))


