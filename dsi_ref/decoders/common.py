"""What every decoder shares: argument checks, the one seam where a model is called, the record."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from fractions import Fraction
from functools import partial

from ..base.errors import InvalidParameterError
from ..base.latency import Latency, Time
from ..base.models import LanguageModel, Number, Prefix, checked_probs
from ..base.result import Event, Run
from ..base.validate import check_int, is_int

__all__ = ["Recorder", "check_inputs", "check_rng", "model_probs", "model_reader"]


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


_UNCHECKED: object = object()


def check_rng(rng: object) -> None:
    """Refuse an ``rng`` that is not a `Randomness` (it needs ``categorical``, ``bernoulli`` and
    ``choose``): a ``numpy.random.Generator`` or a seed is named, not an ``AttributeError`` deep
    inside a run. Checked once per run, at its entry."""
    if isinstance(rng, type) or not all(callable(getattr(rng, name, None))
                                        for name in ("categorical", "bernoulli", "choose")):
        hint = (" (a seed: use dsi_ref.Sampler(seed))" if isinstance(rng, int)
                else " (a numpy Generator draws outside the model: use dsi_ref.Sampler(seed))"
                if type(rng).__module__.startswith("numpy") else "")
        raise InvalidParameterError(
            "rng must be a dsi_ref.Randomness (categorical, bernoulli and choose), e.g. "
            f"dsi_ref.Sampler(0), got {type(rng).__name__}{hint}")


def check_inputs(target: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                 drafter: LanguageModel | None = None, *, rng: object = _UNCHECKED) -> Prefix:
    """Validate the arguments every decoder takes; return the prompt as a tuple of ``int``
    (numpy integer ids are accepted and converted; ``bool`` is not an id). ``rng``, when given
    (the decoders give theirs), must be a `Randomness` (`check_rng`)."""
    for name, model in (("target", target), ("drafter", drafter)):
        if model is None:
            continue
        if not all(hasattr(model, attr) for attr in ("probs", "vocab_size", "eos")):
            raise InvalidParameterError(f"{name} is not a LanguageModel (needs vocab_size, eos "
                                        f"and probs), got {type(model).__name__}")
    if drafter is not None:
        if drafter.vocab_size != target.vocab_size:
            raise InvalidParameterError(
                f"target and drafter vocabularies differ: {target.vocab_size} vs "
                f"{drafter.vocab_size}")
        if drafter.eos != target.eos:
            raise InvalidParameterError(
                f"target and drafter disagree on EOS: {target.eos} vs {drafter.eos}")
    check_int("max_new_tokens", max_new_tokens, low=0)
    if isinstance(prompt, str | bytes) or not isinstance(prompt, Iterable):
        raise InvalidParameterError(f"prompt must be a sequence of token ids, got {prompt!r}")
    prompt = tuple(prompt)
    for tok in prompt:
        if not is_int(tok) or not 0 <= tok < target.vocab_size:
            raise InvalidParameterError(
                f"prompt token {tok!r} is not an id of a vocabulary of size {target.vocab_size}")
    if rng is not _UNCHECKED:
        check_rng(rng)
    return tuple(int(tok) for tok in prompt)


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
