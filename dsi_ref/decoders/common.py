"""What every decoder shares: argument checks, the one seam where a model is called, the record."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from fractions import Fraction
from functools import partial
from typing import TypeAlias, TypeVar, cast

from ..base.errors import InvalidParameterError
from ..base.latency import Latency, Time
from ..base.models import LanguageModel, Number, Prefix, checked_probs
from ..base.randomness import Randomness
from ..base.result import Event, Run
from ..base.validate import check_int, is_int

__all__ = [
    "DEFAULT_LATENCY",
    "CostLaw",
    "Recorder",
    "check_inputs",
    "check_record",
    "check_rng",
    "cost_laws",
    "forward_cost",
    "model_probs",
    "model_reader",
    "reuse_config",
]


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
#: The default costs (`Latency()`), made once: a `Latency` is immutable, and validating it is a
#: visible share of a short run (the exact engine runs a decoder thousands of times).
DEFAULT_LATENCY = Latency()


def check_record(record: object, keep_time: object) -> None:
    """The rule for a decoder's ``record`` and ``keep_time`` (both bools; ``keep_time=False``
    needs ``record=False``, a trace holding the times): `InvalidParameterError` otherwise."""
    if not isinstance(record, bool):
        raise InvalidParameterError(f"record must be a bool, got {record!r}")
    if not isinstance(keep_time, bool):
        raise InvalidParameterError(f"keep_time must be a bool, got {keep_time!r}")
    if not keep_time and record:
        raise InvalidParameterError("keep_time=False needs record=False (a trace holds the "
                                    "times)")


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


#: The arguments `check_inputs` last accepted (models, a tuple prompt, the budget) and its
#: result: the exact engine runs a decoder thousands of times on the very same objects.
_LAST_INPUTS: list[tuple[object, object, object, int, Prefix]] = []


def check_inputs(target: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                 drafter: LanguageModel | None = None, *, rng: object = _UNCHECKED) -> Prefix:
    """Validate the arguments every decoder takes; return the prompt as a tuple of ``int``
    (numpy integer ids are accepted and converted; ``bool`` is not an id). ``rng``, when given
    (the decoders give theirs), must be a `Randomness` (`check_rng`). The same objects as the
    last call accepted (a prompt that is a tuple, immutable) are not checked again."""
    if _LAST_INPUTS:
        last = _LAST_INPUTS[0]
        if (last[0] is target and last[1] is drafter and last[2] is prompt
                and type(max_new_tokens) is int and last[3] == max_new_tokens):
            if rng is not _UNCHECKED:
                check_rng(rng)
            return last[4]
    checked = _check_inputs(target, prompt, max_new_tokens, drafter)
    if rng is not _UNCHECKED:
        check_rng(rng)
    if type(prompt) is tuple and type(max_new_tokens) is int:
        _LAST_INPUTS[:] = [(target, drafter, prompt, max_new_tokens, checked)]
    return checked


C = TypeVar("C")


def reuse_config(cls: type[C], *args: object) -> C:
    """``cls(*args)``, a frozen configuration validated on construction, or the one the last
    call made when every argument is the same object (or an equal int, str or bool): the
    exact engine runs a decoder thousands of times with the same arguments."""
    last = _LAST_CONFIGS.get(cls)
    if last is not None and len(last[0]) == len(args) and all(
            a is b or (type(a) is type(b) and type(a) in (int, str, bool) and a == b)
            for a, b in zip(args, last[0], strict=True)):
        return cast(C, last[1])
    config = cls(*args)
    _LAST_CONFIGS[cls] = (args, config)
    return config


#: `reuse_config`'s last configuration per class, with its arguments.
_LAST_CONFIGS: dict[type, tuple[tuple[object, ...], object]] = {}


def _check_inputs(target: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                  drafter: LanguageModel | None) -> Prefix:
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
    return tuple(int(tok) for tok in prompt)


#: A forward's cost as `forward_cost` reads it: a constant, or a random cost's law as
#: ``(values, weights)`` in its mapping's order.
CostLaw: TypeAlias = "Time | tuple[tuple[Time, ...], tuple[Number, ...]]"
#: `cost_laws` per `Latency` object, by identity with a reference held, with the items of each
#: random cost's mapping as read (a mapping changed since is read again).
_COST_LAWS: dict[int, tuple[Latency, tuple[object, ...], dict[tuple[str, bool], CostLaw]]] = {}


def _cost_items(latency: Latency) -> tuple[object, ...]:
    return tuple(tuple(value.items()) if isinstance(value, Mapping) else value
                 for value in (latency.drafter, latency.target, latency.drafter_first,
                               latency.target_first))


def cost_laws(latency: Latency) -> dict[tuple[str, bool], CostLaw]:
    """Per ``(model, first)``: the cost `Latency.cost` gives, read once per `Latency` object
    (the run's hot path; shared, read only): a constant, or the law of a random cost as
    ``(values, weights)`` tuples in the mapping's order (the same draw as `Latency.cost`'s, its
    weights a tuple that interpreters cache by identity)."""
    items = _cost_items(latency) if not latency.is_constant else ()
    hit = _COST_LAWS.get(id(latency))
    if hit is not None and hit[0] is latency and hit[1] == items:
        return hit[2]
    laws: dict[tuple[str, bool], CostLaw] = {}
    for model in ("drafter", "target"):
        for first in (True, False):
            value = getattr(latency, f"{model}_first") if first else None
            if value is None:
                value = getattr(latency, model)
            if isinstance(value, Mapping):
                values = tuple(value)
                laws[model, first] = (values, tuple(value[v] for v in values))
            else:
                laws[model, first] = value
    if len(_COST_LAWS) >= 256:
        _COST_LAWS.clear()
    _COST_LAWS[id(latency)] = (latency, items, laws)
    return laws


def forward_cost(laws: dict[tuple[str, bool], CostLaw], model: str, first: bool,
                 rng: Randomness) -> Time:
    """The cost of one forward of ``model`` (its first or a later one), drawn through ``rng``
    when random: `Latency.cost` with the laws of `cost_laws`."""
    law = laws[model, first]
    if type(law) is tuple:
        values, weights = law
        return values[rng.categorical(weights)]
    return cast(Time, law)


class Recorder:
    """The virtual clock and the trace of one sequential run (non-SI and SI)."""

    __slots__ = ("costs", "first", "latency", "record", "stats", "time", "trace")

    def __init__(self, latency: Latency, stats: Sequence[str], *, record: bool = True) -> None:
        self.latency = latency
        self.record = record  # False: a lean run, whose trace stays empty
        self.time: Time = Fraction(0)
        self.trace: list[Event] = []
        self.stats = dict.fromkeys(stats, 0)
        self.first = {"drafter": True, "target": True}
        # the costs read once per Latency (the sampling hot path); random ones drawn per call
        self.costs = cost_laws(latency)

    def forward(self, model: str, kind: str, positions: tuple[int, ...], rng: object,
                note: str = "") -> None:
        """Advance the clock by one forward of ``model`` and record it."""
        first = self.first[model]
        cost = forward_cost(self.costs, model, first, rng)  # type: ignore[arg-type]
        if first:
            self.first[model] = False
        end = self.time + cost
        if self.record:
            self.trace.append(Event(model, kind, self.time, end, positions, note))
        self.time = end

    def commit(self, positions: tuple[int, ...], note: str) -> None:
        """Mark a commit on the trace."""
        if self.record:
            self.trace.append(Event("committer", "commit", self.time, self.time, positions, note))

    def state(self, tokens: list[int]) -> Hashable:
        """Everything the rest of the run depends on (for the exact engine's merge points)."""
        return (tuple(tokens), self.time, tuple(self.trace), tuple(self.stats.items()),
                tuple(self.first.items()))

    def result(self, tokens: list[int]) -> Run:
        """The finished `Run`."""
        return Run(tuple(tokens), self.time, tuple(self.trace), dict(self.stats))
