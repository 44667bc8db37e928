"""Every public function and class of the packages is documented (docs/design.md: docstrings
with the paper's notation). Public = listed in the module's ``__all__`` (or, without one, not
starting with an underscore and defined in that module)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

PACKAGES = ("dsi_ref", "theory", "proofs")


def _modules() -> list[str]:
    names: list[str] = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        names.append(package)
        names += [info.name for info in pkgutil.walk_packages(module.__path__, package + ".")
                  if not info.name.endswith("__main__")]
    return names


def _public(module: ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == module.__name__]
    return list(names)


def undocumented(module: ModuleType) -> list[str]:
    """Public functions and classes of ``module`` (and their public methods) with no docstring."""
    missing = [] if (module.__doc__ or "").strip() else [f"{module.__name__} (module)"]
    for name in _public(module):
        obj = getattr(module, name, None)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if obj.__module__ != module.__name__:
            continue  # documented where it is defined
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(f"{module.__name__}.{name}")
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not inspect.isfunction(member):
                    continue
                if not (member.__doc__ or "").strip() and not any(
                        (getattr(getattr(base, attr, None), "__doc__", None) or "").strip()
                        for base in obj.__mro__[1:]):
                    missing.append(f"{module.__name__}.{name}.{attr}")
    return missing


@pytest.mark.parametrize("name", _modules())
def test_every_public_function_and_class_has_a_docstring(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as error:  # an optional extra that is not installed
        pytest.skip(f"{name}: {error}")
    assert undocumented(module) == []


def test_the_docstring_check_notices_a_missing_docstring() -> None:
    module = ModuleType("fake", "A module.")

    def documented() -> None:
        """Yes."""

    def bare() -> None:
        pass

    for fn in (documented, bare):
        fn.__module__ = "fake"
        setattr(module, fn.__name__, fn)
    module.__all__ = ["documented", "bare"]  # type: ignore[attr-defined]
    assert undocumented(module) == ["fake.bare"]
