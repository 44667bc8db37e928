"""Virtual time: what a forward pass costs, in units of one target forward.

A cost is a positive constant (`Fraction` for exact work, or float) or a small discrete law
``{value: probability}``; random costs are drawn through ``rng`` (so the exact interpreter covers
them). ``*_first`` is the cost of a model's first forward in a run (TTFT, the prefill over the
prompt); later forwards cost the plain value (TPOT). docs/paper.md notation: the drafter
forward costs ``c`` (0 < c ≤ 1 in the paper's regime), the target forward ``1``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, TypeAlias

from .errors import InvalidParameterError
from .randomness import Key, Randomness
from .validate import is_finite

__all__ = ["Cost", "InvalidParameterError", "Latency", "Time"]

Time: TypeAlias = Fraction | float
Cost: TypeAlias = Fraction | float | int | Mapping[Any, Any]



def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def _check_cost(name: str, cost: Cost | None) -> None:
    """Refuse a cost that is not a finite number > 0 or a ``{value: probability}`` law of them."""
    if cost is None:
        return
    if isinstance(cost, Mapping):
        if not cost:
            raise InvalidParameterError(f"{name}: an empty latency distribution")
        for value, prob in cost.items():
            if not _is_number(value) or not is_finite(value) or not value > 0:
                raise InvalidParameterError(f"{name}: latency value {value!r} must be > 0 and "
                                            "finite")
            if not _is_number(prob) or not 0 < prob <= 1:
                raise InvalidParameterError(f"{name}: probability {prob!r} must be a number in "
                                            "(0, 1]")
        total = sum(cost.values())
        if (total != 1) if all(isinstance(p, Fraction | int) for p in cost.values()) \
                else abs(float(total) - 1) > 1e-9:
            raise InvalidParameterError(f"{name}: probabilities sum to {total}, not 1")
        return
    if not _is_number(cost):
        raise InvalidParameterError(f"{name}: expected a number or a {{value: prob}} mapping, "
                                    f"got {type(cost).__name__}")
    if not is_finite(cost) or not cost > 0:
        raise InvalidParameterError(f"{name} must be > 0 and finite, got {cost!r}")


@dataclass(frozen=True)
class Latency:
    """Forward-pass costs on the virtual clock (time unit: one target forward by default).

    Args:
        drafter: cost of a drafter forward after its first (``c``, TPOT of the drafter).
        target: cost of a target forward after its first (TPOT of the target; 1 by default).
        drafter_first: cost of the drafter's first forward (TTFT); ``None``: same as ``drafter``.
        target_first: cost of the target's first forward (TTFT); ``None``: same as ``target``.
    """

    drafter: Cost = Fraction(1, 10)
    target: Cost = Fraction(1)
    drafter_first: Cost | None = None
    target_first: Cost | None = None

    def __post_init__(self) -> None:
        for name in ("drafter", "target", "drafter_first", "target_first"):
            value = getattr(self, name)
            if value is None and name in ("drafter", "target"):
                raise InvalidParameterError(f"Latency.{name}: expected a number or a "
                                            "{value: prob} mapping, got None")
            _check_cost(f"Latency.{name}", value)

    @classmethod
    def from_ms(cls, *, target_ttft: float, target_tpot: float, drafter_ttft: float,
                drafter_tpot: float) -> Latency:
        """Costs in milliseconds from measured TTFT/TPOT pairs (docs/paper.md's table inputs)."""
        return cls(drafter=drafter_tpot, target=target_tpot, drafter_first=drafter_ttft,
                   target_first=target_ttft)

    @cached_property
    def is_constant(self) -> bool:
        """True when no cost is random (computed once: the fields are frozen, and whether each
        is a mapping cannot change)."""
        return not any(isinstance(getattr(self, n), Mapping)
                       for n in ("drafter", "target", "drafter_first", "target_first"))

    def cost(self, model: str, first: bool, rng: Randomness, key: Key = None) -> Time:
        """The cost of one forward of ``model`` (``"drafter"`` or ``"target"``)."""
        value: Cost | None = getattr(self, f"{model}_first") if first else None
        if value is None:
            value = getattr(self, model)
        if isinstance(value, Mapping):
            values = list(value)
            return values[rng.categorical([value[v] for v in values], key=key)]  # type: ignore[no-any-return]
        return value
