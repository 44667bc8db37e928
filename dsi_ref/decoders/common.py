"""What every decoder shares: argument checks, the one seam where a model is called, the record."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction
from functools import partial

from ..base.errors import InvalidParameterError
from ..base.latency import Latency, Time
from ..base.models import LanguageModel, Number, Prefix, checked_probs
from ..base.result import Event, Run
from ..base.validate import check_int

__all__ = ["Recorder", "check_inputs", "model_probs", "model_reader"]


def model_probs(model: LanguageModel, prefix: Prefix) -> tuple[Number, ...]:
    """``model.probs(prefix)``, validated unless the model vouches for its rows (``prevalidated``).

    This is the one place where decoders call a model (`model_reader` resolves it once per run).
    """
    if getattr(model, "prevalidated", False):
        return model.probs(prefix)  # type: ignore[return-value]
    return checked_probs(model, prefix)


def model_reader(model: LanguageModel) -> Callable[[Prefix], tuple[Number, ...]]:
    """`model_probs` with the validation decision taken once: ``prefix -> row``."""
    if getattr(model, "prevalidated", False):
        return model.probs  # type: ignore[return-value]
    return partial(checked_probs, model)


def check_inputs(target: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                 drafter: LanguageModel | None = None) -> Prefix:
    """Validate the arguments every decoder takes; return the prompt as a tuple."""
    for name, model in (("target", target), ("drafter", drafter)):
        if model is None:
            continue
        if not hasattr(model, "probs") or not hasattr(model, "vocab_size"):
            raise TypeError(f"{name} is not a LanguageModel (needs vocab_size, eos, probs)")
    if drafter is not None:
        if drafter.vocab_size != target.vocab_size:
            raise InvalidParameterError(
                f"target and drafter vocabularies differ: {target.vocab_size} vs "
                f"{drafter.vocab_size}")
        if drafter.eos != target.eos:
            raise InvalidParameterError(
                f"target and drafter disagree on EOS: {target.eos} vs {drafter.eos}")
    check_int("max_new_tokens", max_new_tokens, low=0)
    prompt = tuple(prompt)
    for tok in prompt:
        if not isinstance(tok, int) or not 0 <= tok < target.vocab_size:
            raise InvalidParameterError(
                f"prompt token {tok!r} is not an id of a vocabulary of size {target.vocab_size}")
    return prompt


class Recorder:
    """The virtual clock and the trace of one sequential run (non-SI and SI)."""

    __slots__ = ("costs", "first", "latency", "stats", "time", "trace")

    def __init__(self, latency: Latency, stats: Sequence[str]) -> None:
        self.latency = latency
        self.time: Time = Fraction(0)
        self.trace: list[Event] = []
        self.stats = dict.fromkeys(stats, 0)
        self.first = {"drafter": True, "target": True}
        # constant costs looked up once (the sampling hot path); random ones are drawn per call
        self.costs: dict[tuple[str, bool], Time] | None = None
        if latency.is_constant:
            self.costs = {(m, f): latency.cost(m, f, None)  # type: ignore[arg-type]
                          for m in ("drafter", "target") for f in (True, False)}

    def forward(self, model: str, kind: str, positions: tuple[int, ...], rng: object,
                note: str = "") -> None:
        """Advance the clock by one forward of ``model`` and record it."""
        first = self.first[model]
        if self.costs is not None:
            cost = self.costs[model, first]
        else:
            cost = self.latency.cost(model, first, rng)  # type: ignore[arg-type]
        if first:
            self.first[model] = False
        end = self.time + cost
        self.trace.append(Event(model, kind, self.time, end, positions, note))
        self.time = end

    def commit(self, positions: tuple[int, ...], note: str) -> None:
        """Mark a commit on the trace."""
        self.trace.append(Event("committer", "commit", self.time, self.time, positions, note))

    def state(self, tokens: list[int]) -> Hashable:
        """Everything the rest of the run depends on (for the exact engine's merge points)."""
        return (tuple(tokens), self.time, tuple(self.trace), tuple(self.stats.items()),
                tuple(self.first.items()))

    def result(self, tokens: list[int]) -> Run:
        """The finished `Run`."""
        return Run(tuple(tokens), self.time, tuple(self.trace), dict(self.stats))


def merge_hint(rng: object) -> Callable[..., None] | None:
    """The exact engine's ``merge_point`` method when ``rng`` has one."""
    return getattr(rng, "merge_point", None)
