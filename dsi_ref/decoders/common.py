"""What every decoder shares: argument checks, the one seam where a model is called, the record."""

from __future__ import annotations

import itertools
import operator
import struct
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from enum import Enum
from fractions import Fraction
from functools import partial
from typing import Any, TypeAlias, TypeVar, cast

from ..base.errors import InvalidParameterError
from ..base.latency import Latency, Time
from ..base.models import LanguageModel, Number, Prefix, checked_probs
from ..base.randomness import Randomness
from ..base.result import Event, Run
from ..base.validate import check_int, is_int
from .verification import RULES

__all__ = [
    "DEFAULT_LATENCY",
    "CostLaw",
    "FixedParts",
    "NoMerge",
    "PrefixKey",
    "Recorder",
    "attribute_state",
    "check_inputs",
    "check_record",
    "check_rng",
    "cost_laws",
    "fingerprint",
    "forward_cost",
    "model_probs",
    "model_reader",
    "overridden",
    "resumes",
    "reuse_config",
    "same_parts",
    "slot_names",
    "stateless_rule",
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


#: `PrefixKey`'s table: ``(id of a list's prefix, next item) -> id of the longer prefix``.
_PREFIXES: dict[tuple[int, object], int] = {}
#: Ids handed out so far (never reused, even after the table is cleared).
_PREFIX_IDS = itertools.count(1)
#: `_PREFIXES` is cleared past this many entries (ids already handed out stay unique).
_PREFIX_TABLE_SIZE = 1 << 20


class PrefixKey:
    """An int that names the contents of a list that only grows (a trace), kept up to date in
    time proportional to what was appended: two lists get the same id only when their items are
    equal one by one (each id is handed out once, for one ``(shorter prefix, item)`` pair; the
    empty list is 0). A merge state can then hold the id instead of the whole list, which would
    be hashed again at every merge point.

    ``of(items)`` reads ``items``, which must extend the list the key last read (or be it);
    `state`/`set_state` save and restore the key with a copy of the list it read.
    """

    __slots__ = ("id", "length")

    def __init__(self) -> None:
        self.id = 0
        self.length = 0

    def of(self, items: Sequence[object]) -> int:
        """The id of ``items``."""
        if len(items) < self.length:
            self.id, self.length = 0, 0
        for i in range(self.length, len(items)):
            pair = (self.id, items[i])
            known = _PREFIXES.get(pair)
            if known is None:
                if len(_PREFIXES) >= _PREFIX_TABLE_SIZE:
                    _PREFIXES.clear()
                known = _PREFIXES[pair] = next(_PREFIX_IDS)
            self.id = known
        self.length = len(items)
        return self.id

    def state(self) -> tuple[int, int]:
        """The id and the length it covers (for a snapshot of the list)."""
        return self.id, self.length

    def set_state(self, state: tuple[int, int]) -> None:
        """Back to a `state`, with the list restored to the copy saved with it."""
        self.id, self.length = state


def merge_hint(rng: object) -> Callable[..., None] | None:
    """The exact engine's ``merge_point`` method when ``rng`` has one."""
    return getattr(rng, "merge_point", None)


def resumes(rng: object) -> bool:
    """Whether ``rng`` resumes runs from snapshots taken at their merge points (``rng.resumes``:
    the exact engine with merging on; see `dsi_ref.base.randomness.merge_point`)."""
    return getattr(rng, "resumes", False) is True


def stateless_rule(rule: object) -> bool:
    """Whether ``rule`` is one of the built-in rule objects (`dsi_ref.decoders.verification.RULES`),
    which keep nothing between calls: a snapshot of a run need not copy anything of it."""
    return any(rule is builtin for builtin in RULES.values())


def same_parts(saved: Sequence[object], now: Sequence[object]) -> bool:
    """Whether the parts a run was built on when a snapshot was taken (models, prompt, budget,
    configuration, rule) are those of the run that restores it: the same objects, or equal
    values of the same type."""
    return len(saved) == len(now) and all(a is b or (type(a) is type(b) and a == b)
                                          for a, b in zip(saved, now, strict=True))


# ---------------------------------------------------------------------------------------------
# Fingerprints: the state a step-wise run offers the exact engine, computed for it

class NoMerge:
    """A state equal to no other (equality is identity): a merge point offered with it merges
    nothing, so the engine enumerates plainly. What `fingerprint` gives for a value it cannot
    read (an arbitrary object): never a guess."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NoMerge()"


class _Opaque(Exception):
    """A value with no canonical form."""


_REF = NoMerge()  # tags a reference to an object met before (sharing and cycles)
_MISSING = NoMerge()  # a declared attribute (slot or dataclass field) that is not set
#: Immutable values equal only to values of their own type: their own fingerprint.
_BARE: frozenset[type] = frozenset({type(None), int, str, bytes})
_FLOAT = struct.Struct("<d")


def _canonical(value: object, seen: dict[int, Hashable], depth: int) -> Hashable:
    """The canonical form of ``value`` (see `fingerprint`); `_Opaque` if it has none."""
    kind = type(value)
    if kind in _BARE:
        return value
    if depth > 100:
        raise _Opaque  # too deep to be plain data worth merging on
    if kind is tuple:
        items = cast(tuple[object, ...], value)
        if all(type(v) is int for v in items):
            return (tuple, items)
        return (tuple, tuple([_canonical(v, seen, depth + 1) for v in items]))
    if kind is bool or kind is float:
        return (kind, value if kind is bool else _FLOAT.pack(cast(float, value)))
    if kind is Fraction:
        f = cast(Fraction, value)
        return (Fraction, f.numerator, f.denominator)
    if kind is complex:
        c = cast(complex, value)
        return (complex, _FLOAT.pack(c.real), _FLOAT.pack(c.imag))
    if kind is frozenset:
        return (frozenset, tuple([_canonical(v, seen, depth + 1)
                                  for v in cast(frozenset[object], value)]))
    if kind is range:
        r = cast(range, value)
        return (range, r.start, r.stop, r.step)
    if isinstance(value, Enum):
        return (kind, value.name)
    if isinstance(value, tuple) and hasattr(kind, "_fields") and not getattr(value, "__dict__",
                                                                              None):
        return (kind, tuple([_canonical(v, seen, depth + 1) for v in value]))  # a namedtuple
    # mutable containers: identity matters (two names for one list), so each is described once
    # and named by a reference afterwards, which also ends cycles
    ref = seen.get(id(value))
    if ref is not None:
        return ref
    if kind is list or kind is set:
        seen[id(value)] = (_REF, len(seen))
        return (kind, tuple([_canonical(v, seen, depth + 1)
                             for v in cast(list[object], value)]))  # a set in iteration order
    if kind is dict:
        seen[id(value)] = (_REF, len(seen))
        return (dict, tuple([(_canonical(k, seen, depth + 1), _canonical(v, seen, depth + 1))
                             for k, v in cast(dict[object, object], value).items()]))
    if is_dataclass(value) and not isinstance(value, type):
        seen[id(value)] = (_REF, len(seen))
        names = [f.name for f in fields(value)]
        names += sorted(set(getattr(value, "__dict__", ())) - set(names))
        return (kind, tuple([(name, _canonical(getattr(value, name, _MISSING), seen, depth + 1))
                             for name in names]))
    if value is _MISSING:
        return value
    raise _Opaque  # an arbitrary object: its state is not readable as data


def fingerprint(value: object, known: Mapping[int, str] | None = None) -> Hashable:
    """``value`` as plain data, canonical and hashable: two values with equal fingerprints are
    indistinguishable to any code that reads them (``==`` on the results is that test).

    Reads ``None``, ``bool``, ``int``, ``float`` (its bits: ``-0.0`` is not ``0.0``), ``complex``,
    ``Fraction``, ``str``, ``bytes``, ``range``, enum members, tuples and named tuples, lists,
    dicts (in order), sets and frozensets (in iteration order), and dataclass instances (their
    fields and any other attribute), nested; every number is tagged with its type (``1``,
    ``1.0``, ``True`` and ``Fraction(1)`` differ). A mutable object met twice (two names for one
    list, a cycle) is described once and referred to after; ``known`` names objects outside
    ``value`` (``id -> name``) that it may refer to, such as a run's models or its token list.
    Anything else (an arbitrary object, a function, a class, a numpy array) has no fingerprint:
    the result is then a fresh `NoMerge`, equal to nothing.
    """
    seen: dict[int, Hashable] = {}
    if known:
        seen.update({i: (_REF, name) for i, name in known.items()})
    try:
        return _canonical(value, seen, 0)
    except (_Opaque, RecursionError):
        return NoMerge()


_SLOTS: dict[type, tuple[str, ...]] = {}


def slot_names(cls: type) -> tuple[str, ...]:
    """The slots ``cls`` and its bases declare (instance attributes outside ``__dict__``)."""
    cached = _SLOTS.get(cls)
    if cached is not None:
        return cached
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__"):
                names.append(slot)
    _SLOTS[cls] = tuple(names)
    return _SLOTS[cls]


def attribute_state(obj: object, skip: frozenset[str] | set[str],
                    known: Mapping[int, str]) -> Hashable:
    """`fingerprint` of the instance attributes of ``obj`` (its ``__dict__`` and its slots)
    not in ``skip``, by sorted name (``()`` when there are none); a `NoMerge` if one of them
    has no fingerprint."""
    names = [name for name in getattr(obj, "__dict__", ()) if name not in skip]
    names += [name for name in slot_names(type(obj)) if name not in skip]
    if not names:
        return ()
    return fingerprint({name: getattr(obj, name, _MISSING) for name in sorted(names)}, known)


def own_parts(run: Any, skip: frozenset[str],
              known: Callable[[], Mapping[int, str]]) -> tuple[Hashable, Hashable]:
    """The two parts of a run's merge state that its own fields do not give (`SIRun.own_state`;
    the exact checker reads a `dsi_ref.decoders.dsi.DSIRun` itself): the `attribute_state` of
    its rule (``run.rule``; ``()`` for a rule without attributes) and that of the run's
    attributes outside ``skip``, whose references to the run's own objects are named by
    ``known()`` (only called when there is something to read)."""
    rule = run.rule
    rule_state = (attribute_state(rule, frozenset(), {})
                  if getattr(rule, "__dict__", None) or slot_names(type(rule)) else ())
    extra = (attribute_state(run, skip, known())
             if not skip.issuperset(vars(run)) or slot_names(type(run)) else ())
    return rule_state, extra


def overridden(cls: type, base: type, names: Iterable[str] | None = None) -> bool:
    """Whether ``cls`` replaces any method of ``base`` (or one of ``names``) with its own."""
    names = [n for n, v in vars(base).items() if callable(v) or isinstance(v, property)
             if n not in ("__init__", "__init_subclass__")] if names is None else list(names)
    return any(getattr(cls, n, None) is not getattr(base, n, None) for n in names)


_NOTHING: frozenset[str] = frozenset()


def _same_item(now: tuple[object, object], before: tuple[object, object]) -> bool:
    """The same key, bound to the very same object."""
    return now[0] == before[0] and now[1] is before[1]


class FixedParts:
    """The objects a run is built on (models, ``rng``, config, rule...), as they stand before
    its first merge point: a function of the choices made before it (which the engine's scope
    of ``entry=True`` tells apart), the same objects later unless the run rebinds them.

    ``changed(run)`` names those that no longer are; ``known(changed)`` names the others
    (``id -> name``) for `fingerprint`, so that a subclass attribute that refers to one of them
    is read as that name.
    """

    __slots__ = ("contents", "names", "objects")

    def __init__(self, run: object, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.objects = tuple([getattr(run, name, _MISSING) for name in self.names])
        # a dict of parts (the readers) is checked item by item
        self.contents = tuple([tuple(obj.items()) for obj in self.objects if type(obj) is dict])

    def changed(self, run: object) -> frozenset[str]:
        """The parts that are no longer the very object they were (a dict: with the same
        items); empty on the usual path."""
        current = [getattr(run, name, _MISSING) for name in self.names]
        if all(map(operator.is_, current, self.objects)) and all(
                len(obj) == len(before) and all(map(_same_item, obj.items(), before))
                for obj, before in zip([o for o in current if type(o) is dict], self.contents,
                                       strict=True)):
            return _NOTHING  # the usual path: every part is what it was
        out = frozenset(name for name, obj in zip(self.names, self.objects, strict=True)
                        if getattr(run, name, _MISSING) is not obj)
        dicts = [(name, obj) for name, obj in zip(self.names, self.objects, strict=True)
                 if type(obj) is dict]
        for (name, obj), before in zip(dicts, self.contents, strict=True):
            now = tuple(obj.items())
            if len(now) != len(before) or any(x[0] != y[0] or x[1] is not y[1]
                                              for x, y in zip(now, before, strict=True)):
                out |= {name}
        return out

    def known(self, changed: frozenset[str] = frozenset()) -> dict[int, str]:
        """``id -> name`` of the parts, but those ``changed`` (a dict whose items changed is
        not the part it was)."""
        return {id(obj): name for name, obj in zip(self.names, self.objects, strict=True)
                if name not in changed}
