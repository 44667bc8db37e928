"""The state of a step-wise run as the exact checker reads it: snapshots, restores, merge states.

A step-wise run (`dsi_ref.base.exact_hooks.StepRun`: `dsi_ref.SIRun`, `dsi_ref.DSIRun` and their
subclasses) is an instance of a dataclass whose fields are everything it changes as it goes, each
value immutable or a list, dict or set of values the run never changes in place. This module reads
those fields generically, from the dataclass's type hints and each field's role
(`dsi_ref.base.exact_hooks.role`):

* `Layout.snapshot` copies the fields (a list or a dict as a tuple, every other value as it is)
  and `Layout.restore` puts such a copy back into a fresh run of the same invocation;
* `States.merge_state` is the state a merge point offers: the fields the run's
  `dsi_ref.base.exact_hooks.Checkpointing` keeps (a nested dataclass field by field, times
  relative to the clock when asked, a trace as the id of its contents), with, for code the run
  does not own, a `fingerprint` of whatever a subclass keeps beside its fields.

The readers are Python functions generated per class and view, as `dataclasses` generates
``__init__``: a merge state is built at every merge point of every run, and a generated tuple
expression costs what a hand-written one does. `States` holds them, one per exploration, with the
table that names traces by their contents (`States.prefix_id`).
"""

from __future__ import annotations

import math
import operator
import struct
import types
from collections import abc
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from fractions import Fraction
from typing import Any, Union, cast, get_args, get_origin, get_type_hints

from ...base.exact_hooks import Checkpointing, Role, StepRun, role

__all__ = ["Layout", "NoMerge", "Reader", "States", "fingerprint", "same_parts", "since"]


def since(time: Any, now: Any) -> object:
    """``time − now`` as a value for a merge state: for two `Fraction` s the difference in lowest
    terms as ``(numerator, denominator)`` (equal pairs for equal differences, without building a
    `Fraction`, which costs most of a relative state), else the difference itself."""
    if type(time) is Fraction and type(now) is Fraction:
        a, b = time.as_integer_ratio()
        c, d = now.as_integer_ratio()
        num, den = (a - c, b) if b == d else (a * d - c * b, b * d)
        g = math.gcd(num, den)
        return num // g, den // g
    return time - now


def same_parts(saved: Sequence[object], now: Sequence[object]) -> bool:
    """Whether the parts a run was built on when a snapshot was taken (models, prompt, budget,
    configuration, rule) are those of the run that restores it: the same objects, or equal
    values of the same type."""
    if len(saved) != len(now):
        return False
    if all(map(operator.is_, saved, now)):  # the usual case, decided in C
        return True
    return all(a is b or (type(a) is type(b) and a == b) for a, b in zip(saved, now, strict=True))


# -- shapes: what a field's type hint says about how to copy and read it -----------------------


@dataclass(frozen=True)
class _Shape:
    """How a value is read: ``kind`` is ``"value"`` (as it is), ``"object"`` (a dataclass
    instance, field by field: ``types``), ``"list"``, ``"dict"`` or ``"set"`` (a container of
    ``item``); ``optional``: it may be ``None``."""

    kind: str
    optional: bool = False
    types: tuple[type, ...] = ()
    item: _Shape | None = None


_VALUE = _Shape("value")


def _shape(hint: object) -> _Shape:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        optional = len(members) < len(args)
        if members and all(isinstance(m, type) and is_dataclass(m) for m in members):
            return _Shape("object", optional, tuple(cast(type, m) for m in members))
        if len(members) == 1:
            inner = _shape(members[0])
            return _Shape(inner.kind, optional, inner.types, inner.item)
        return _Shape("value", optional)
    if origin is list or origin is abc.Sequence:  # a sequence is copied and read as a list is
        return _Shape("list", item=_shape(args[0]) if args else _VALUE)
    if origin is dict:
        return _Shape("dict")
    if origin is set:
        return _Shape("set")
    if isinstance(hint, type) and is_dataclass(hint):
        return _Shape("object", types=(hint,))
    return _VALUE


@dataclass(frozen=True)
class _Field:
    name: str
    role: Role | None
    shape: _Shape


def _fields_of(cls: type) -> tuple[_Field, ...]:
    """The fields of ``cls``, a dataclass or a class derived from one, with their roles and
    shapes (the type hints of the nearest class in its MRO that is a dataclass itself)."""
    state = next(k for k in cls.__mro__ if "__dataclass_fields__" in vars(k))
    hints = get_type_hints(state)
    return tuple(_Field(f.name, role(f.metadata), _shape(hints[f.name])) for f in fields(state))


# -- generated readers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _View:
    """What a merge state keeps (`Checkpointing`'s flags), and whether the run's own code is
    all that reads it (else nested objects are read with their class)."""

    history: bool
    absolute_time: bool
    derived: bool
    own: bool


def _kept(field: _Field, view: _View) -> bool:
    if field.role == "history":
        return view.history
    if field.role == "clock":
        return view.absolute_time
    if field.role == "derived":
        return view.derived
    return True


class _Generator:
    """Writes the source of the readers of one view, one function per dataclass met."""

    def __init__(self, view: _View, prefixes: bool) -> None:
        self.view = view
        self.prefixes = prefixes  # history lists read as the id of their contents
        self.namespace: dict[str, Any] = {"since": since, "tuple": tuple}
        self.written: dict[type, str] = {}

    def reader(self, cls: type) -> str:
        """The name of the function ``(obj, clock, ids) -> tuple`` that reads an instance of
        ``cls``, written on first use."""
        name = self.written.get(cls)
        if name is not None:
            return name
        name = self.written[cls] = f"_read_{len(self.written)}"
        layout = _fields_of(cls)
        parts = [self.expr(f"obj.{f.name}", f) for f in layout if _kept(f, self.view)]
        if not self.view.own:
            parts.insert(0, "type(obj)")  # code the run does not own may tell classes apart
        clock = next((f.name for f in layout if f.role == "clock"), None)
        head = f"    clock = obj.{clock}\n" if clock is not None else ""
        body = ", ".join(parts)
        source = f"def {name}(obj, clock, ids):\n{head}    return ({body}{',' if parts else ''})\n"
        exec(source, self.namespace)  # generated from the dataclass's own fields only
        return name

    def item(self, text: str, shape: _Shape) -> str:
        if shape.kind == "object":
            if len(shape.types) == 1:
                read = f"{self.reader(shape.types[0])}({text}, clock, ids)"
            else:
                table = f"_table_{len(self.namespace)}"
                self.namespace[table] = {t: self.namespace_fn(self.reader(t)) for t in shape.types}
                read = f"{table}[type({text})]({text}, clock, ids)"
            return f"(None if {text} is None else {read})" if shape.optional else read
        return text

    def namespace_fn(self, name: str) -> Callable[..., Any]:
        return cast(Callable[..., Any], self.namespace[name])

    def expr(self, text: str, field: _Field) -> str:
        shape = field.shape
        if field.role == "instant" and not self.view.absolute_time:
            return (f"(None if {text} is None else since({text}, clock))" if shape.optional
                    else f"since({text}, clock)")
        if shape.kind == "list":
            if field.role == "history" and self.prefixes:
                read = f"ids({text}, {field.name!r})"
            elif shape.item is not None and shape.item.kind == "object":
                read = f"tuple([{self.item('o', shape.item)} for o in {text}])"
            else:
                read = f"tuple({text})"
        elif shape.kind == "dict":
            read = f"tuple({text}.items())"
        elif shape.kind == "set":
            read = f"frozenset({text})"
        else:
            return self.item(text, shape)
        return f"(None if {text} is None else {read})" if shape.optional else read


class Layout:
    """The fields of a step-wise run's class, with their generated copy and restore."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.fields = _fields_of(cls)
        self.names = frozenset(f.name for f in self.fields)
        #: the class declares slots beyond its fields (a subclass's attributes outside
        #: ``__dict__``)
        self.slotted = any(n not in self.names for n in _slot_names(cls))
        self.committed = next((f.name for f in self.fields if f.role == "committed"), None)
        self.history = tuple(f.name for f in self.fields
                             if f.role == "history" and f.shape.kind == "list")
        copies, restores = [], []
        for i, f in enumerate(self.fields):
            kind = f.shape.kind
            copy = ("tuple({0})" if kind == "list" else "tuple({0}.items())" if kind == "dict"
                    else "frozenset({0})" if kind == "set" else "{0}")
            back = ("list({0})" if kind == "list" else "dict({0})" if kind == "dict"
                    else "set({0})" if kind == "set" else "{0}")
            value = f"run.{f.name}"
            if f.shape.optional and kind in ("list", "dict", "set"):
                copies.append(f"(None if {value} is None else {copy.format(value)})")
                restores.append(f"    run.{f.name} = None if saved[{i}] is None else "
                                f"{back.format(f'saved[{i}]')}")
            else:
                copies.append(copy.format(value))
                restores.append(f"    run.{f.name} = {back.format(f'saved[{i}]')}")
        namespace: dict[str, Any] = {}
        source = (f"def snapshot(run):\n    return ({', '.join(copies)},)\n"
                  f"def restore(run, saved):\n" + "\n".join(restores or ["    pass"]) + "\n")
        exec(source, namespace)  # generated from the dataclass's own fields only
        self.snapshot: Callable[[object], tuple[object, ...]] = namespace["snapshot"]
        self.restore: Callable[[object, tuple[object, ...]], None] = namespace["restore"]


#: A merge state's reader: ``(run, clock, ids) -> tuple``.
Reader = Callable[[object, object, Callable[[list[object], str], int]], tuple[object, ...]]


class States:
    """The state readers of one exploration: layouts and readers per class and view, and the
    table behind `prefix_id` (nothing here outlives the engine that holds it)."""

    def __init__(self) -> None:
        self.layouts: dict[type, Layout] = {}
        self.readers: dict[tuple[type, bool, bool, bool, bool], Reader] = {}
        self.entries: dict[tuple[type, bool, bool, bool, bool], tuple[Layout, Reader]] = {}
        #: ``(id of a list's prefix, next item) -> id of the longer prefix``; 0 is the empty list
        self.prefixes: dict[tuple[int, object], int] = {}

    def layout(self, cls: type) -> Layout:
        """The `Layout` of ``cls``."""
        known = self.layouts.get(cls)
        if known is None:
            known = self.layouts[cls] = Layout(cls)
        return known

    def prefix_id(self, items: Sequence[object], start: tuple[int, int]) -> tuple[int, int]:
        """The id of ``items`` and its length, from ``start``, the ``(id, length)`` of a prefix of
        ``items`` (``(0, 0)``: none): two lists get the same id only when their items are equal
        one by one, so a merge state can hold a trace's id instead of the trace."""
        ident, length = start if len(items) >= start[1] else (0, 0)
        table = self.prefixes
        for i in range(length, len(items)):
            pair = (ident, items[i])
            known = table.get(pair)
            if known is None:
                known = table[pair] = len(table) + 1
            ident = known
        return ident, len(items)

    def reader(self, cls: type, checkpointing: Checkpointing) -> Reader:
        """The merge-state reader of ``cls`` under ``checkpointing`` (when only the run's own
        code reads and writes its fields, a history list, which then only grows, is read as the
        id of its contents)."""
        key = (cls, checkpointing.history, checkpointing.absolute_time, checkpointing.derived,
               checkpointing.own)
        known = self.readers.get(key)
        if known is None:
            view = _View(checkpointing.history, checkpointing.absolute_time,
                         checkpointing.derived, checkpointing.own)
            generator = _Generator(view, prefixes=checkpointing.own)
            known = self.readers[key] = cast(Reader, generator.namespace_fn(
                generator.reader(cls)))
        return known

    def entry(self, cls: type, checkpointing: Checkpointing) -> tuple[Layout, Reader]:
        """The `Layout` of ``cls`` and its `reader` under ``checkpointing`` (what
        `dsi_ref.audit.exact.replay.Replay.enter` needs at every invocation, kept per class and
        view)."""
        key = (cls, checkpointing.own, checkpointing.history, checkpointing.absolute_time,
               checkpointing.derived)
        known = self.entries.get(key)
        if known is None:
            known = self.entries[key] = (self.layout(cls), self.reader(cls, checkpointing))
        return known

    def plain(self, run: StepRun, layout: Layout, built: Mapping[str, object],
              checkpointing: Checkpointing) -> bool:
        """Whether a merge state of ``run`` is its fields alone (no `extras`): its own code, no
        part read as data, no attribute beside its fields and the parts ``built``, and no part
        rebound since the run was built (code outside the run may have set one before it
        started). The run's own code adds and rebinds nothing, so this holds for the whole
        invocation when it holds at its entry."""
        if not checkpointing.own or checkpointing.data_parts or layout.slotted:
            return False
        attributes = getattr(run, "__dict__", None)
        if attributes is None or len(attributes) != len(layout.names) + len(built):
            return False
        # its attributes are the fields and the parts (set operations and an identity check
        # per part, in C: this runs once per invocation)
        keys = attributes.keys()
        return (keys >= layout.names and keys >= built.keys()
                and all(map(operator.is_, map(attributes.get, built), built.values())))

    def merge_state(self, run: StepRun, checkpointing: Checkpointing) -> Hashable:
        """The state a merge point of ``run`` offers under ``checkpointing`` now: what the
        checker memoises with the invocation and the keyed intervals (`dsi_ref.audit.exact.replay.
        Replay.merge`). It is the `reader`'s tuple of the fields kept, the `extras` beside it
        when the run is not `plain`; a history list read as an id is named by this table
        (`prefix_id`), so two merge states from one `States` are equal exactly when the
        checker's are."""
        layout = self.layout(type(run))
        built = run.built_on()
        state: Hashable = self.reader(type(run), checkpointing)(run, None, self._ids)
        if self.plain(run, layout, built, checkpointing):
            return state
        return (state, self.extras(run, layout, built, checkpointing))

    def _ids(self, items: list[object], name: str) -> int:
        """The `prefix_id` of the history list ``name`` (``items``), from the empty list."""
        return self.prefix_id(items, (0, 0))[0]

    def extras(self, run: StepRun, layout: Layout, built: Mapping[str, object],
               checkpointing: Checkpointing) -> Hashable:
        """What a merge state must add for code the run does not own: a `fingerprint` of the
        attributes that are neither fields nor parts (whatever a subclass added), of the parts
        rebound since the run was built (read as data), and of the own attributes of
        ``checkpointing.data_parts``; ``()`` when there are none. An attribute that is the run,
        a part it was built on or a container of a field the merge state keeps is named, not
        read (it is in the state already, and an alias grows with it)."""
        changed = _changed(run, built)
        names = [n for n in getattr(run, "__dict__", ()) if n not in layout.names
                 and (n not in built or n in changed)]
        names += [n for n in _slot_names(type(run)) if n not in layout.names]
        parts = tuple(_attributes(p) for p in checkpointing.data_parts
                      if getattr(p, "__dict__", None) or _slot_names(type(p)))
        if not names and not any(parts):
            return ()
        known = {id(obj): name for name, obj in built.items() if name not in changed}
        known[id(run)] = "self"
        view = _View(checkpointing.history, checkpointing.absolute_time, checkpointing.derived,
                     checkpointing.own)
        for f in layout.fields:
            # a container is named only when the merge state holds it: an alias of one it
            # leaves out (a lean run's trace) is read as data
            value = getattr(run, f.name, None)
            if type(value) in (list, dict, set) and _kept(f, view):
                known[id(value)] = f.name
        own = fingerprint({n: getattr(run, n, _MISSING) for n in sorted(names)}, known) \
            if names else ()
        return (own, tuple(fingerprint(p) for p in parts))


def _changed(run: object, built: Mapping[str, object]) -> frozenset[str]:
    """The parts that are no longer the very object they were."""
    return frozenset(name for name, obj in built.items() if getattr(run, name, _MISSING) is not obj)


def _attributes(obj: object) -> dict[str, object]:
    names = list(getattr(obj, "__dict__", ())) + list(_slot_names(type(obj)))
    return {n: getattr(obj, n, _MISSING) for n in sorted(names)}


def _slot_names(cls: type) -> tuple[str, ...]:
    """The slots ``cls`` and its bases declare (instance attributes outside ``__dict__``)."""
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__"):
                names.append(slot)
    return tuple(names)


# -- fingerprints: plain data as a canonical value ---------------------------------------------


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

