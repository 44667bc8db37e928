"""From a decoder written against `Randomness` to the statistical audit's sample function.

The exact audit runs ``program(rng)`` under its own interpreter; the statistical audit
(`dsi_ref.audit.statistical.statistical_audit`) wants ``sample_fn(seed) -> outcome``. `sample_fn`
builds the second from the first: each seed runs the program once under ``Sampler(seed)``, and
the outcome is converted as the audits convert one (`as_outcome`: a `Run` counts as its tokens),
optionally decoded into a string. The same program can then be judged both ways, e.g. exactly on
toy models and from samples where enumeration is too expensive.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from ..base.errors import InvalidAuditError
from ..base.randomness import Sampler
from .exact.witness import as_outcome

__all__ = ["ProgramSampler", "sample_fn"]


class ProgramSampler:
    """``seed -> outcome`` for a ``program(rng)``: see `sample_fn`. Picklable when the program
    and the decoder are (a parallel ``sample_map`` ships it to workers)."""

    def __init__(self, program: Callable[[Any], Any],
                 decode: Callable[[tuple[Any, ...]], Any] | None) -> None:
        self.program, self.decode = program, decode

    def __call__(self, seed: int) -> Hashable:
        """Run the program once under ``Sampler(seed)``; its outcome (decoded, if asked)."""
        value = self.program(Sampler(seed))
        if value is None:
            raise InvalidAuditError(
                f"the program returned None for seed {seed}: return the generated tokens "
                "(e.g. run.tokens) or the Run (a missing return statement gives None)")
        outcome = as_outcome(value, source="the program returned")
        if self.decode is None:
            return outcome
        if not isinstance(outcome, tuple):
            raise InvalidAuditError(f"the program returned {value!r}, not a sequence of ids to "
                                    "decode")
        return as_outcome(self.decode(outcome), source="decoding the program's ids gave")

    def __repr__(self) -> str:
        return f"sample_fn({self.program!r}{'' if self.decode is None else ', decoded'})"


def sample_fn(program: Callable[[Any], Any], *, tokenizer: Any = None) -> ProgramSampler:
    """The statistical audit's sample function for a decoder written against `Randomness`:
    ``seed -> program(Sampler(seed))``, as an outcome.

    Args:
        program: ``program(rng)`` returns the generated ids (a tuple, a list, an array) or a
            `Run` (its ``tokens``), as for `dsi_ref.exact_distribution`.
        tokenizer: ``None`` (default): the outcome is the ids. Otherwise the ids are decoded,
            for an audit over strings (reference: `dsi_ref.target_string_distribution`):
            ``tokenizer`` is anything with a ``decode(ids)`` method (a `dsi_ref.Tokenizer`, a
            Hugging Face tokenizer) or a function ``ids -> string``.

    The returned function raises `InvalidAuditError` when the program returns ``None`` (a
    forgotten ``return``), or something that is not ids while a ``tokenizer`` is given.

    Raises:
        InvalidAuditError: ``program`` is not callable, or ``tokenizer`` has no ``decode`` and is
            not a function.

    >>> import dsi_ref as dr
    >>> from fractions import Fraction
    >>> t = dr.TableLM.context_free((Fraction(1, 2), Fraction(1, 2)))
    >>> draw = sample_fn(lambda rng: dr.autoregressive(t, (), 3, rng))
    >>> draw(7) == draw(7) == dr.autoregressive(t, (), 3, dr.Sampler(7)).tokens
    True
    >>> text = sample_fn(lambda rng: dr.autoregressive(t, (), 3, rng),
    ...                  tokenizer=dr.Tokenizer(("a", "b")))(7)
    >>> len(text) == 3 and set(text) <= {"a", "b"}
    True
    """
    if not callable(program):
        raise InvalidAuditError(f"program must be a function rng -> tokens, got {program!r}")
    decode: Callable[[tuple[Any, ...]], Any] | None
    if tokenizer is None:
        decode = None
    elif callable(getattr(tokenizer, "decode", None)):
        decode = tokenizer.decode
    elif callable(tokenizer):
        decode = tokenizer
    else:
        raise InvalidAuditError(f"tokenizer must have a decode(ids) method or be a function "
                                f"ids -> string, got {tokenizer!r}")
    return ProgramSampler(program, decode)
