"""What SI's and DSI's step-wise runs share as the exact checker reads them
(`dsi_ref.base.exact_hooks.StepRun`).

A step-wise run (`dsi_ref.decoders.speculative.SIRun`, `dsi_ref.decoders.dsi.DSIRun`) is an
instance of its state dataclass: the fields are everything it changes as it goes, and every other
attribute its own ``__init__`` sets is one of the parts it is built on (`built_parts`). Whether a
class is the run's own code is decided once per class (`overridden`), from its methods.
"""

from __future__ import annotations

from collections.abc import Iterable

from .verification import RULES

__all__ = ["built_parts", "overridden", "stateless_rule", "with_built"]


def overridden(cls: type, base: type, names: Iterable[str] | None = None) -> bool:
    """Whether ``cls`` replaces any method of ``base`` (or one of ``names``) with its own."""
    names = [n for n, v in vars(base).items() if callable(v) or isinstance(v, property)
             if n not in ("__init__", "__init_subclass__")] if names is None else list(names)
    return any(getattr(cls, n, None) is not getattr(base, n, None) for n in names)


def built_parts(run: object) -> dict[str, object]:
    """The parts ``run`` is built on: every attribute it holds now, by name. Called by a run's
    own ``__init__`` after it set its parts and before it sets its state fields (so that what a
    subclass adds later is not a part), and kept by the run as ``_built``; its ``built_on`` gives
    this mapping with ``_built`` itself added (`with_built`)."""
    return dict(vars(run))


def with_built(parts: dict[str, object]) -> dict[str, object]:
    """``parts`` (from `built_parts`) with the attribute that keeps it, ``_built``: every part of
    the run (a copy, so that the run holds no reference cycle to itself)."""
    return {**parts, "_built": parts}


def stateless_rule(rule: object) -> bool:
    """Whether ``rule`` is one of the built-in rule objects (`dsi_ref.decoders.verification.RULES`),
    which keep nothing between calls: a run's fields are then all of its state."""
    return id(rule) in _BUILTIN_RULES


#: The ids of the built-in rule objects, which live as long as the module.
_BUILTIN_RULES = frozenset(id(rule) for rule in RULES.values())
