"""The import rules of docs/design.md, enforced by walking every module's imports (AST, no
execution).

* ``theory`` imports sympy (and the standard library) only; ``proofs`` adds ``theory`` and z3;
  neither imports ``dsi_ref``.
* Inside the core ``dsi_ref``, the rooms are floors and imports only go down:
  ``base`` < ``decoders`` < ``audit``; ``sim`` stands on ``base`` alone (the acceptance-level
  simulator shares no code with the token-level decoders, so the bridge tests compare two
  independent computations).
* The core never imports ``theory``/``proofs`` (two independent computations of the same
  quantities); only the top floor (``dsi_ref.cli``, ``dsi_ref.commands``) composes them.
* Only ``dsi_ref.backends`` imports torch / transformers / ray / vllm / llama_cpp; nothing imports
  ``dsi_ref.backends`` except the top floor, and only lazily (inside a function), so the core
  works without torch.
* No import circle, and no private name (``_x``) imported from another module, anywhere.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dsi_ref", "theory", "proofs")
STDLIB = set(sys.stdlib_module_names) | {"__future__"}
#: Third-party packages the core may import at module level (pyproject runtime dependencies and
#: pytest for the plugin).
CORE_THIRD_PARTY = {"numpy", "scipy", "hypothesis", "tqdm", "pytest"}
#: Packages the core may import only inside a function (optional extras).
CORE_LAZY = {"matplotlib"}
TORCH_LIKE = {"torch", "transformers", "accelerate", "safetensors", "ray", "llama_cpp", "gguf",
              "vllm", "openvino", "openvino_genai", "openvino_tokenizers", "optimum"}
#: The floors of the core: a room may import its own floor and the floors listed for it.
FLOORS: dict[str, set[str]] = {
    "base": set(),
    "decoders": {"base"},
    "audit": {"base", "decoders"},
    "sim": {"base"},
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted and absolute
    lazy: bool   # inside a function body
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool) -> list[Import]:
    """Every import in ``source`` (of ``module``), resolved to absolute dotted names."""
    tree = ast.parse(source)
    out: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                out.extend(Import(module, a.name, lazy, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = module.split(".")
                    if not is_package:
                        anchor = anchor[:-1]
                    anchor = anchor[:len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base] if child.module else [f"{base}.{a.name}" for a in child.names]
                if child.module:  # `from pkg import sub` may import a submodule
                    targets += [f"{base}.{a.name}" for a in child.names]
                out.extend(Import(module, t, lazy, child.lineno) for t in targets)
            visit(child, inner)

    visit(tree, False)
    return out


def violations(imp: Import) -> list[str]:
    """The rules of docs/design.md that ``imp`` breaks (empty when it is allowed)."""
    src, dst, top = imp.module, imp.target, imp.target.split(".")[0]
    where = f"{src}:{imp.line} imports {dst}"
    if top in STDLIB or dst == src or dst.startswith(src + "."):
        return []
    out: list[str] = []
    layer = src.split(".")[0]
    top_floor = src == "dsi_ref.cli" or src.startswith(("dsi_ref.commands", "dsi_ref.claims"))
    backend = src.startswith("dsi_ref.backends")
    if layer == "theory" and top not in {"theory", "sympy"}:
        out.append(f"{where}: theory/ may import sympy only")
    if layer == "proofs" and top not in {"proofs", "theory", "sympy", "z3"}:
        out.append(f"{where}: proofs/ may import theory, sympy and z3 only")
    if top in TORCH_LIKE and not backend:
        out.append(f"{where}: only dsi_ref.backends may import {top}")
    if dst.startswith("dsi_ref.backends") and not backend and not (top_floor and imp.lazy):
        out.append(f"{where}: only the top floor may import dsi_ref.backends, inside a function")
    room = src.split(".")[1] if layer == "dsi_ref" and src.count(".") >= 1 else ""
    if room in FLOORS and dst.startswith("dsi_ref.") and dst != "dsi_ref":
        other = dst.split(".")[1]
        if other != room and other not in FLOORS[room]:
            allowed = ", ".join(sorted(FLOORS[room])) or "nothing else"
            out.append(f"{where}: dsi_ref.{room} may import {allowed} (floors go down only)")
    if layer == "dsi_ref" and not backend and not top_floor:
        if top in {"theory", "proofs"}:
            out.append(f"{where}: the core never imports theory/ or proofs/")
        elif top != "dsi_ref" and top not in CORE_THIRD_PARTY | TORCH_LIKE and not (
                top in CORE_LAZY and imp.lazy):
            out.append(f"{where}: the core may import only {sorted(CORE_THIRD_PARTY)} "
                       f"(and {sorted(CORE_LAZY)} inside a function)")
    return out


def all_imports() -> list[Import]:
    found: list[Import] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found += imports_of(path.read_text(), _module_name(path), path.name == "__init__.py")
    return found


def test_every_import_respects_the_layering_rules() -> None:
    imports = all_imports()
    assert len(imports) > 50, "the walker found suspiciously few imports"
    broken = [v for imp in imports for v in violations(imp)]
    assert not broken, "layering violations:\n" + "\n".join(broken)


@pytest.mark.parametrize(("module", "source", "rule"), [
    ("theory.latency", "import numpy", "sympy only"),
    ("theory.latency", "from dsi_ref import dsi", "sympy only"),
    ("proofs.solver", "import dsi_ref.audit.exact", "theory, sympy and z3"),
    ("dsi_ref.audit.laws", "from theory import si", "never imports theory"),
    ("dsi_ref.audit.laws", "from ...proofs import x", "never imports theory"),
    ("dsi_ref.base.models", "import pandas", "the core may import only"),
    ("dsi_ref.decoders.speculative", "import torch", "only dsi_ref.backends may import torch"),
    ("dsi_ref.audit.laws", "from ..backends import hf", "only the top floor"),
    ("dsi_ref.base.models", "from ..decoders import dsi", "floors go down only"),
    ("dsi_ref.decoders.dsi", "from ..audit import exact", "floors go down only"),
    ("dsi_ref.sim.event", "from ..decoders import dsi", "floors go down only"),
    ("dsi_ref.audit.zoo", "from ..sim import params", "floors go down only"),
    ("dsi_ref.cli", "from .backends import hf", "inside a function"),
    ("dsi_ref.audit.registry", "import matplotlib.pyplot as plt", "inside a function"),
])
def test_layering_checker_flags_each_forbidden_import(module: str, source: str,
                                                      rule: str) -> None:
    found = [v for imp in imports_of(source, module, False) for v in violations(imp)]
    assert any(rule in v for v in found), found


@pytest.mark.parametrize(("module", "source"), [
    ("dsi_ref.cli", "def f():\n    from .backends import hf"),
    ("dsi_ref.commands.theorems", "from proofs import theorems"),
    ("dsi_ref.backends.torch.model", "import torch"),
    ("dsi_ref.commands.plots", "def f():\n    import matplotlib.pyplot as plt"),
    ("proofs.solver", "import z3\nfrom theory import si"),
    ("dsi_ref.audit.zoo", "from ..decoders.dsi import DSIRun\nfrom ..base.models import TableLM"),
    ("dsi_ref.decoders.dsi", "from ..base.latency import Latency"),
    ("dsi_ref.sim.event", "from ..base.errors import InvalidParameterError"),
    ("dsi_ref.backends.engine.engine",
     "from ...decoders.dsi import DSIRun\nfrom ...sim import params"),
])
def test_layering_checker_allows_each_permitted_import(module: str, source: str) -> None:
    assert [v for imp in imports_of(source, module, False) for v in violations(imp)] == []


# -- import circles and private names (issue 33, point 5) ------------------------------------------
#: Where import circles and private names imported across modules are forbidden: everywhere
#: (issue 33 found 5 circles and 40 private names imported across modules). Every import counts:
#: at module level, inside a function, under ``TYPE_CHECKING``. Importing a module runs its
#: package's ``__init__`` first; that implicit import is no edge, so an ``__init__`` may re-export
#: its modules' names.
STRICT = PACKAGES


def module_graph(imports: list[Import], modules: set[str]) -> dict[str, set[str]]:
    """Module -> the modules it imports (an imported name counts as its module)."""
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for imp in imports:
        target = imp.target if imp.target in modules else imp.target.rpartition(".")[0]
        if target in modules and target != imp.module:
            graph.setdefault(imp.module, set()).add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of two modules or
    more (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def private_imports(imports: list[Import], modules: set[str]) -> list[str]:
    """``module imports source._name`` for each private name imported from another module."""
    out = []
    for imp in imports:
        source, _, name = imp.target.rpartition(".")
        if (source in modules and source != imp.module and imp.target not in modules
                and name.startswith("_") and not name.startswith("__")):
            out.append(f"{imp.module}:{imp.line} imports {source}.{name}")
    return out


def _modules() -> set[str]:
    return {_module_name(path) for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


def test_no_import_circle() -> None:
    graph = module_graph(all_imports(), _modules())
    found = [c for c in circles(graph) if any(m.startswith(STRICT) for m in c)]
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_private_name_is_imported_across_modules() -> None:
    found = [p for p in private_imports(all_imports(), _modules())
             if p.startswith(STRICT) or any(f" imports {s}" in p for s in STRICT)]
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_the_circle_and_private_name_checks_find_what_they_look_for() -> None:
    modules = {"pkg.a", "pkg.b", "pkg.c", "pkg.d"}
    imports = [*imports_of("from .b import x", "pkg.a", False),
               *imports_of("def f():\n    from .c import y", "pkg.b", False),   # lazy counts
               *imports_of("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from .a import z", "pkg.c", False),
               *imports_of("from .a import _hidden, shown", "pkg.d", False)]
    assert circles(module_graph(imports, modules)) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert private_imports(imports, modules) == ["pkg.d:1 imports pkg.a._hidden"]
    assert circles(module_graph(imports[:2], modules)) == []
