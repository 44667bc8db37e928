"""Verification rules: how one position is decided from target probs, draft probs and a draft.

Glossary (defined once, used everywhere in dsi-ref)
---------------------------------------------------
Convention: ``p`` is the **target** distribution and ``q`` the **drafter** distribution at the same
position, both conditioned on the same committed prefix. (Leviathan et al. use p for the target as
here; Chen et al. and several codebases flip the letters — read carefully when comparing.) In code
they are ``target_probs`` and ``draft_probs``.

* **draft** — a token ``x ~ q`` proposed by the drafter for a position not yet decided.
* **accepted** — the draft is committed as is. Rejection sampling accepts with probability
  ``min(1, p(x)/q(x))``; exact-match sampling accepts when an independent ``y ~ p`` equals ``x``;
  greedy decoding accepts when ``x = argmax p``.
* **rejected** — the draft is not committed; the position is decided by a **residual** (a.k.a.
  **recovered**) token instead, and every draft after it is discarded. Rejection sampling draws
  the residual from the normalised ``(p − q)+``; exact-match commits ``y``; greedy ``argmax p``.
* **bonus** — a token drawn from ``p`` at a position with no draft (after all drafts of a window
  were accepted, or whenever the target alone decides a position).
* **committed** — decided for good: part of the output. Positions are committed left to right.

Note: why the residual is normalised. Conditioned on a rejection, rejection sampling must
output ``y`` with probability ``(p(y) − q(y))+ / Σ_z (p(z) − q(z))+``; then
``P(out = y) = min(p(y), q(y)) + (1 − Σ_z min(p(z), q(z))) · (p(y) − q(y))+ / Σ_z (p(z) − q(z))+
= p(y)`` because ``Σ_z (p − q)+ = 1 − Σ_z min(p, q)``. `Randomness.categorical` normalises its
weights, so passing ``(p − q)+`` draws from the normalised residual. When ``p = q`` no rejection
can happen, and the residual (all zeros) is never drawn.

Randomness is drawn in a fixed order, each draw keyed ``(role, i, context)`` where ``i`` is the
position and ``context`` the generated tokens before it (so ``len(context) == i``): the draft
``("draft", i, ctx)``, the acceptance coin ``("accept", i, ctx)``, the residual
``("residual", i, ctx)``, a token drawn from ``p`` (bonus, exact-match ``y``, non-SI)
``("target", i, ctx)``. A key names one decision in one context: whoever makes it (SI, DSI, any
server of DSI), under keyed randomness it comes out the same.

Windows. A rule decides a **window** — the drafts ``x_1 … x_m`` at consecutive positions after a
committed prefix, with ``p`` and ``q`` at each of them — with `decide_window`: some drafts are
accepted, then (unless all were) one position gets a correction token. The per-position rules
above decide a window position by position (a chain of `Rule.decide`), stopping at the first
rejection. **Block verification** (`BlockVerification`; Sun et al. 2024, "Block Verification
Accelerates Speculative Decoding") decides the window as a whole: it may accept a later prefix
than the first position where the token-level test would have failed, and its correction comes
from a residual adjusted by how much target mass the accepted prefix carries. A window rule
implements `WindowRule`; its coins are keyed ``("block", i, ctx)``: the coin that accepts the
drafts before position ``i`` (``ctx`` = the tokens before ``i``, ending with those drafts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple, Protocol, TypeAlias, runtime_checkable

from ..base.errors import InvalidParameterError, NumericalError
from ..base.models import Number, sequential_sum
from ..base.randomness import Randomness

__all__ = [
    "RULES",
    "VERIFY_RULES",
    "BlockVerification",
    "Decision",
    "ExactMatch",
    "Greedy",
    "NumericalError",
    "RejectionSampling",
    "Rule",
    "VerifyRule",
    "WindowRule",
    "argmax",
    "as_rule",
    "decide",
    "decide_window",
    "draft_token",
    "is_window_rule",
    "path_weight",
    "residual",
    "residual_row",
    "stop_weight",
    "weighted_residual",
]

VerifyRule: TypeAlias = Literal["rejection", "exact_match", "greedy", "block"]
VERIFY_RULES: tuple[VerifyRule, ...] = ("rejection", "exact_match", "greedy", "block")


class Decision(NamedTuple):
    """How a position was decided: the committed ``token`` and whether it was the draft.

    (A named tuple: one is made per committed token, on the sampling hot path.)"""

    token: int
    accepted: bool
    kind: Literal["accepted", "rejected", "bonus"]


def argmax(probs: Sequence[Number]) -> int:
    """The most likely token; ties go to the lowest id (temperature-0 decoding)."""
    best = 0
    for i in range(1, len(probs)):
        if probs[i] > probs[best]:
            best = i
    return best


def residual(target_probs: Sequence[Number], draft_probs: Sequence[Number]) -> list[Number]:
    """The unnormalised residual ``(p − q)+`` (see the module's note on normalisation). Rows
    that are tuples are remembered (`residual_row`)."""
    if type(target_probs) is tuple and type(draft_probs) is tuple:
        return list(residual_row(1, target_probs, draft_probs)[0])
    return _residual(target_probs, draft_probs)


def _residual(target_probs: Sequence[Number], draft_probs: Sequence[Number]) -> list[Number]:
    return [t - d if t > d else 0 * t for t, d in zip(target_probs, draft_probs, strict=True)]


def residual_row(weight: Number, target_probs: Sequence[Number], draft_probs: Sequence[Number]
                 ) -> tuple[Sequence[Number], Number]:
    """``(w · p − q)+`` (with ``w = 1``: ``(p − q)+``) and its mass ``ρ``, for the rules to read
    (not to change). Rows that are tuples (a model's rows: the same objects at every draw) are
    remembered by their identity and the weight (its type too), so that an exact run computes
    each residual once and hands the exact engine the same tuple each time."""
    if type(target_probs) is not tuple or type(draft_probs) is not tuple:
        row = _residual([weight * t for t in target_probs], draft_probs)
        return row, sequential_sum(row)
    key = (id(target_probs), id(draft_probs), type(weight), weight)
    hit = _RESIDUALS.get(key)
    if hit is None or hit[0] is not target_probs or hit[1] is not draft_probs:
        if len(_RESIDUALS) >= _RESIDUALS_SIZE:
            _RESIDUALS.clear()
        scaled = target_probs if type(weight) is int and weight == 1 else [
            weight * t for t in target_probs]
        remembered = tuple(_residual(scaled, draft_probs))
        hit = (target_probs, draft_probs, remembered, sequential_sum(remembered))
        _RESIDUALS[key] = hit
    return hit[2], hit[3]


#: `residual_row`'s table: ``(id p, id q, type of w, w) -> (p, q, (w·p − q)+, its mass)``,
#: holding the rows so that an id is not reused while remembered; cleared past
#: `_RESIDUALS_SIZE` entries.
_RESIDUALS: dict[tuple[int, int, type, object],
                 tuple[object, object, tuple[Number, ...], Number]] = {}
_RESIDUALS_SIZE = 1 << 14


def path_weight(weight: Number, target_prob: Number, draft_prob: Number) -> Number:
    """The weight of a prefix grown by one draft ``x``: ``w_i = min(1, w_{i−1} · p_i(x) / q_i(x))``
    from ``w_{i−1}`` (``weight``), ``p_i(x)`` and ``q_i(x) > 0`` (``x ~ q_i``): how much of the
    target's mass the accepted prefix ``x_≤i`` may still carry (Sun et al. 2024, block
    verification; Traversal Verification's ``α(Y) = min(1, α(P) · B_P(y) / S_P(y))``). The cap
    is ``1`` of the ratio's own type (a ``Fraction`` stays a ``Fraction``, a float a float)."""
    ratio = weight * target_prob / draft_prob
    return ratio if ratio < 1 else 1 + 0 * ratio


def weighted_residual(weight: Number, target_probs: Sequence[Number],
                      draft_probs: Sequence[Number]) -> list[Number]:
    """The unnormalised block residual ``(w · p − q)+`` of a prefix of weight ``w``
    (`path_weight`): ``ρ = Σ_y (w · p(y) − q(y))+`` is its mass, and a correction after the
    prefix is drawn from it normalised (Sun et al. 2024, Algorithm 2; Traversal Verification's
    ``(α(P) B_P − S_P)+``). With ``w = 1`` it is the token-level `residual` ``(p − q)+``.

    Rows that are tuples are remembered (`residual_row`)."""
    if type(target_probs) is tuple and type(draft_probs) is tuple:
        return list(residual_row(weight, target_probs, draft_probs)[0])
    return _residual([weight * t for t in target_probs], draft_probs)


def stop_weight(weight: Number, mass: Number) -> Number:
    """The probability ``ρ / (ρ + 1 − w)`` that a prefix of weight ``w`` (`path_weight`) with
    residual mass ``ρ = Σ (w · p − q)+`` (`weighted_residual`) at the next position is where
    the accepted path stops, given that no longer prefix was accepted: block verification's
    ``h_i`` (Sun et al. 2024) and Traversal Verification's updated ``α(P)`` after a child's
    subtree accepted nothing (``ρ + 1 − w = 1 − Σ min(w · p, q)``). ``1`` when the denominator
    is 0 (``w = 1`` and ``ρ = 0``: ``p = q`` there). At most 1 in floats too: ``w <= 1``, so
    ``1 − w >= 0`` and the rounded denominator is ``>= ρ``."""
    denominator = mass + (1 - weight)
    return mass / denominator if denominator > 0 else 1 + 0 * denominator


def draft_token(rule: VerifyRule, draft_probs: Sequence[Number], rng: Randomness,
                context: tuple[int, ...]) -> int:
    """The drafter's proposal after ``context``: ``x ~ q`` (``argmax q`` for greedy)."""
    return as_rule(rule).draft(draft_probs, rng, context)


def decide(rule: VerifyRule, target_probs: Sequence[Number],
           draft_probs: Sequence[Number] | None, draft: int | None, rng: Randomness,
           context: tuple[int, ...]) -> Decision:
    """Decide the position after ``context`` from ``p = target_probs`` and the draft ``x ~ q``.

    ``context`` is the committed generated tokens before the position (its length is the
    position). With ``draft=None`` the position gets a bonus token from ``p``; otherwise the rule
    accepts the draft or commits a residual token (see the glossary).
    """
    return as_rule(rule).decide(target_probs, draft_probs, draft, rng, context)


@runtime_checkable
class Rule(Protocol):
    """A verification rule as an object: how to draft and how to decide a position.

    The built-in rules are `RejectionSampling` and its subclasses `ExactMatch` and `Greedy` (by
    name in `RULES`); a custom rule (a new verification scheme, or a deliberately wrong one from
    the zoo) passes as ``verify=`` to `speculative` and `dsi`.
    ``greedy`` says whether its reference is the target's greedy sequence.
    """

    @property
    def name(self) -> str:
        """A short name for reports."""
        ...

    @property
    def greedy(self) -> bool:
        """True when the reference is the target's greedy sequence."""
        ...

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """The drafter's proposal after ``context``."""
        ...

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Decide the position after ``context`` (see `decide`)."""
        ...


class RejectionSampling:
    """Token-level rejection sampling (Leviathan et al. 2023; Chen et al. 2023).

    Split into the steps that real implementations get wrong, so that the zoo's mutants
    (`dsi_ref.audit.zoo`) override exactly one of them.
    """

    name = "rejection"
    greedy = False

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """``x ~ q``."""
        return rng.categorical(draft_probs, key=("draft", len(context), context))

    def accept(self, target_probs: Sequence[Number], draft_probs: Sequence[Number], draft: int,
               rng: Randomness, context: tuple[int, ...]) -> bool:
        """Accept ``x`` with probability ``min(1, p(x)/q(x))`` (``q(x) > 0`` since ``x ~ q``)."""
        p, q = target_probs[draft], draft_probs[draft]
        return bool(p >= q or rng.bernoulli(p / q, key=("accept", len(context), context)))

    def residual(self, target_probs: Sequence[Number], draft_probs: Sequence[Number],
                 rng: Randomness, context: tuple[int, ...]) -> int:
        """A token from the normalised residual ``(p − q)+``."""
        weights, mass = residual_row(1, target_probs, draft_probs)
        if not mass > 0:
            raise NumericalError(f"rejected the draft at position {len(context)} but the "
                                 "residual (p - q)+ is empty: float rounding in p or q")
        return rng.categorical(weights, key=("residual", len(context), context))

    def bonus(self, target_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """A token from ``p`` at a position with no draft."""
        return rng.categorical(target_probs, key=("target", len(context), context))

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Accept the draft or commit a residual token; a bonus token without a draft."""
        if draft is None:
            return Decision(self.bonus(target_probs, rng, context), False, "bonus")
        assert draft_probs is not None
        if self.accept(target_probs, draft_probs, draft, rng, context):
            return Decision(draft, True, "accepted")
        return Decision(self.residual(target_probs, draft_probs, rng, context), False,
                        "rejected")


class ExactMatch(RejectionSampling):
    """Exact-match sampling: draw ``y ~ p``; accept the draft iff ``y = x``, else commit ``y``."""

    name = "exact_match"

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Commit ``y ~ p`` whatever the draft; it is accepted when equal."""
        y = self.bonus(target_probs, rng, context)
        if draft is None:
            return Decision(y, False, "bonus")
        return Decision(y, y == draft, "accepted" if y == draft else "rejected")


class Greedy(RejectionSampling):
    """Temperature-0 decoding for both models: draft ``argmax q``, accept iff it is ``argmax p``."""

    name = "greedy"
    greedy = True

    def draft(self, draft_probs: Sequence[Number], rng: Randomness,
              context: tuple[int, ...]) -> int:
        """``argmax q`` (ties: lowest id)."""
        return argmax(draft_probs)

    def decide(self, target_probs: Sequence[Number], draft_probs: Sequence[Number] | None,
               draft: int | None, rng: Randomness, context: tuple[int, ...]) -> Decision:
        """Commit ``argmax p``; the draft is accepted when equal."""
        y = argmax(target_probs)
        if draft is None:
            return Decision(y, False, "bonus")
        return Decision(y, y == draft, "accepted" if y == draft else "rejected")


@runtime_checkable
class WindowRule(Rule, Protocol):
    """A `Rule` that decides a whole window at once (`BlockVerification`).

    Its ``decide`` still decides one position alone (a window of one draft, or a bonus token).
    """

    def decide_window(self, target_rows: Sequence[Sequence[Number]],
                      draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int],
                      rng: Randomness, context: tuple[int, ...]) -> list[Decision]:
        """Decide the drafts after ``context`` (see `decide_window`)."""
        ...


class BlockVerification(RejectionSampling):
    """Block verification (Sun et al. 2024, arXiv 2403.10444, Algorithm 2): decide a window of
    ``m`` drafts ``x_1 … x_m`` at once.

    With ``p_i = p(· | ctx, x_<i)`` and ``q_i`` the drafter's row there (``i = 1 … m``), and
    ``p_{m+1}`` the target's row after the last draft (used only by the caller's bonus token):

    * **weights** ``w_0 = 1``, ``w_i = min(1, w_{i−1} · p_i(x_i) / q_i(x_i))`` — how much of the
      target's mass the accepted prefix ``x_≤i`` may still carry;
    * **stop probabilities** ``h_m = w_m`` and, for ``i < m``,
      ``h_i = ρ_i / (ρ_i + 1 − w_i)`` with ``ρ_i = Σ_y (w_i · p_{i+1}(y) − q_{i+1}(y))+``
      (``h_i = 1`` when the denominator is 0: then ``w_i = 1`` and ``p_{i+1} = q_{i+1}``, so every
      later weight is 1, ``h_m = 1``, and the scan below never gets down to ``i``);
    * **select**: for ``i = m, m − 1, …, 1`` flip a coin with probability ``h_i``; the first success
      gives ``τ = i``; no success gives ``τ = 0``. The drafts ``x_1 … x_τ`` are accepted;
    * **correction**: if ``τ < m``, position ``τ + 1`` gets a token from the normalised
      ``(w_τ · p_{τ+1} − q_{τ+1})+``; if ``τ = m`` the caller draws the bonus from ``p_{m+1}``.

    The correction can never be ``x_{τ+1}``: a positive residual there means ``w_{τ+1} = 1`` and
    hence ``h_{τ+1} = 1``, so the scan would have stopped at ``τ + 1`` or above. So a context
    after a correction is new, and keyed randomness never reuses a coin or a draft.

    With ``m = 1`` it is token-level rejection sampling (``h_1 = w_1 = min(1, p/q)``, residual
    ``(p − q)+``), which is what ``decide`` does for a lone position. The steps are separate
    methods so that the zoo's mutants override one each.
    """

    name = "block"

    def weights(self, target_rows: Sequence[Sequence[Number]],
                draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int]) -> list[Number]:
        """``[w_0, w_1, …, w_m]`` with ``w_0 = 1`` and ``w_i = min(1, w_{i−1} p_i(x_i) / q_i(x_i))``
        (``q_i(x_i) > 0`` since ``x_i ~ q_i``)."""
        w: list[Number] = [1]
        for i, x in enumerate(drafts):
            w.append(path_weight(w[-1], target_rows[i][x], draft_rows[i][x]))
        return w

    def stop_probability(self, weight: Number, target_row: Sequence[Number] | None,
                         draft_row: Sequence[Number] | None) -> Number:
        """``h_i`` from ``w_i``: ``w_m`` for the last draft (rows ``None``), else
        ``ρ_i / (ρ_i + 1 − w_i)`` with ``ρ_i = Σ_y (w_i p_{i+1}(y) − q_{i+1}(y))+`` from the rows
        at the next position."""
        if target_row is None or draft_row is None:
            return weight
        return stop_weight(weight, residual_row(weight, target_row, draft_row)[1])

    def select(self, weights: Sequence[Number], target_rows: Sequence[Sequence[Number]],
               draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int], rng: Randomness,
               context: tuple[int, ...]) -> int:
        """``τ``: scan ``i = m … 1``, coin ``h_i`` keyed ``("block", len(ctx_i), ctx_i)`` with
        ``ctx_i = context + x_≤i``; the first success is ``τ``, none gives 0."""
        m = len(drafts)
        for i in range(m, 0, -1):
            h = self.stop_probability(weights[i], target_rows[i] if i < m else None,
                                      draft_rows[i] if i < m else None)
            accepted = context + tuple(drafts[:i])
            if rng.bernoulli(h, key=("block", len(accepted), accepted)):
                return i
        return 0

    def correction(self, weight: Number, target_row: Sequence[Number],
                   draft_row: Sequence[Number], rng: Randomness, context: tuple[int, ...]) -> int:
        """A token from the normalised ``(w_τ · p_{τ+1} − q_{τ+1})+`` at the position after
        ``context`` (key ``("residual", i, context)``)."""
        weights, mass = residual_row(weight, target_row, draft_row)
        if not mass > 0:
            raise NumericalError(f"block verification stopped before position {len(context)} "
                                 "but the residual (w p - q)+ is empty: float rounding in p or q")
        return rng.categorical(weights, key=("residual", len(context), context))

    def decide_window(self, target_rows: Sequence[Sequence[Number]],
                      draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int],
                      rng: Randomness, context: tuple[int, ...]) -> list[Decision]:
        """Accept ``x_1 … x_τ``; then a correction at ``τ + 1`` unless ``τ = m`` (see the class)."""
        weights = self.weights(target_rows, draft_rows, drafts)
        tau = self.select(weights, target_rows, draft_rows, drafts, rng, context)
        decisions = [Decision(x, True, "accepted") for x in drafts[:tau]]
        if tau < len(drafts):
            token = self.correction(weights[tau], target_rows[tau], draft_rows[tau], rng,
                                    context + tuple(drafts[:tau]))
            decisions.append(Decision(token, False, "rejected"))
        return decisions


#: The built-in rules by name.
RULES: dict[str, Rule] = {"rejection": RejectionSampling(), "exact_match": ExactMatch(),
                          "greedy": Greedy(), "block": BlockVerification()}


def is_window_rule(rule: object) -> bool:
    """Whether ``rule`` decides whole windows (has a callable ``decide_window``, as a
    `WindowRule` does). A plain attribute test: it runs once per decision, and a
    runtime-checkable protocol's ``isinstance`` costs a scan of every member."""
    return callable(getattr(rule, "decide_window", None))


def decide_window(rule: VerifyRule | Rule, target_rows: Sequence[Sequence[Number]],
                  draft_rows: Sequence[Sequence[Number]], drafts: Sequence[int], rng: Randomness,
                  context: tuple[int, ...]) -> list[Decision]:
    """Decide the window of drafts ``x_1 … x_m`` (``drafts``) after ``context``.

    ``target_rows[i]`` and ``draft_rows[i]`` are ``p`` and ``q`` at the position of ``x_{i+1}``
    (``target_rows`` may hold one more row, the bonus row, which is not read). Returns the
    decisions of the positions it commits, left to right: the accepted drafts, then — unless every
    draft was accepted — one ``"rejected"`` decision with the correction token. A `WindowRule`
    decides the window as a whole; any other rule decides it position by position with
    `Rule.decide`, stopping at the first rejection.
    """
    checked = None if isinstance(rule, str) else rule
    window = getattr(checked, "decide_window", None)
    if checked is None or not callable(window):  # a name, or not a window rule: validate it
        checked = as_rule(rule)
        window = getattr(checked, "decide_window", None)
    if callable(window):
        return list(window(target_rows, draft_rows, drafts, rng, context))
    decisions: list[Decision] = []
    for i, x in enumerate(drafts):
        decision = checked.decide(target_rows[i], draft_rows[i], x, rng,
                                  context + tuple(drafts[:i]))
        decisions.append(decision)
        if not decision.accepted:
            break
    return decisions


def as_rule(verify: VerifyRule | Rule) -> Rule:
    """The `Rule` object for a rule name or a rule object; a clear error otherwise."""
    if isinstance(verify, str):
        if verify not in RULES:
            raise InvalidParameterError(f"verify must be one of {VERIFY_RULES} or a Rule, got "
                                        f"{verify!r}")
        return RULES[verify]
    if isinstance(verify, Rule):
        return verify
    raise InvalidParameterError(f"verify must be a rule name {VERIFY_RULES} or a Rule object, "
                                f"got {type(verify).__name__}")
