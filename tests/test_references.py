"""No reference leaves the repository: every file, link and module that a page or a docstring
names exists here (docs/design.md, "Quality bar").

Checked, over README.md, docs/, the packages, the tests, the benchmarks and the CI script:

* **markdown links** ``[text](target)`` of README.md and docs/**/*.md resolve to a file or folder,
  relative to the page (web addresses, ``mailto:`` and in-page anchors are skipped);
* **path mentions**: a repository path written in prose, a docstring or a comment (a page under
  ``docs/``, a test, a module of ``dsi_ref/``, ``theory/``, ``proofs/``, a benchmark, ``.ci/run``,
  or a glob such as ``tests/test_bridge_*.py``; also a module of the core written from inside
  ``dsi_ref/``, such as ``sim/paper.py``) names something that exists;
* **dotted references** in backticks (a module of ``dsi_ref``, ``theory`` or ``proofs``, or an
  attribute of one, such as ``dsi_ref.decoders.dsi.DSIRun``) resolve, found statically (no
  import: the torch backend resolves without torch);
* nothing cites the design notes kept outside the repository, by their names or by their folder.

Self-tests at the end feed each checker a made-up broken reference, so none passes vacuously.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Folders whose text files are scanned, and single files at the root.
SCANNED_DIRS = ("dsi_ref", "theory", "proofs", "tests", "benchmarks", "docs", ".ci")
ROOT_FILES = ("README.md", "run.py", "pyproject.toml", "mkdocs.yml")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".yml", ".yaml", ".cfg", ".txt"}
SKIPPED_PARTS = {"__pycache__", ".venv", ".git", "site", "build", ".mypy_cache", ".ruff_cache",
                 ".pytest_cache", ".hypothesis"}
#: Top-level folders of the repository that a path mention may start with.
PATH_ROOTS = ("docs", "tests", "benchmarks", "dsi_ref", "theory", "proofs", r"\.ci")
#: Rooms of the core, written without their ``dsi_ref/`` prefix in some docstrings.
CORE_ROOMS = ("base", "decoders", "audit", "sim", "backends", "commands")
PACKAGES = ("dsi_ref", "theory", "proofs")

# The names of the out-of-repository notes, assembled so that this file does not mention them.
_FORBIDDEN_NAMES = tuple(stem.upper() + ".md" for stem in ("design", "paper", "style"))
FORBIDDEN = re.compile("|".join([*(re.escape(n) for n in _FORBIDDEN_NAMES),
                                 re.escape("..") + "/" + "shared"]))

MD_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(PATH_ROOTS) + r")/[\w.*/-]*[\w*])")
ROOM_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(CORE_ROOMS) + r")/[\w*]+\.py)\b")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)([^`\n]+?)\1")
#: The line after which this file plants broken references on purpose (not scanned).
SELF_TESTS = "# -- self-" + "tests"
DOTTED = re.compile(r"(?<![\w.])((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+)")


@dataclass(frozen=True)
class Problem:
    """One broken reference: where it is written and what is wrong with it."""

    file: str
    line: int
    reference: str
    why: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reference!r}: {self.why}"


def scanned_files(root: Path = ROOT) -> list[Path]:
    """The text files whose references are checked."""
    files = [root / name for name in ROOT_FILES if (root / name).is_file()]
    for folder in SCANNED_DIRS:
        for path in sorted((root / folder).rglob("*")):
            rel = path.relative_to(root).parts
            if not path.is_file() or SKIPPED_PARTS.intersection(rel):
                continue
            if path.suffix in TEXT_SUFFIXES or path.relative_to(root).as_posix() == ".ci/run":
                files.append(path)
    return files


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _exists(root: Path, relative: str) -> bool:
    """Whether ``relative`` (a path, a glob with ``*``, or a file named without its suffix, such
    as a page's address ``docs/getting-started``) names something under ``root``."""
    relative = relative.rstrip("/")
    if "*" in relative:
        return any(root.glob(relative))
    path = root / relative
    return path.exists() or (not path.suffix and any(path.parent.glob(path.name + ".*")))


# -- links and paths ---------------------------------------------------------------------------


def link_problems(text: str, page: Path, root: Path = ROOT) -> Iterator[Problem]:
    """Markdown links of ``page`` whose target does not exist (relative to the page)."""
    name = page.relative_to(root).as_posix()
    for match in MD_LINK.finditer(FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)):
        target = match.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a web address, mailto:, or an anchor in this page
        path = target.split("#", 1)[0]
        resolved = (page.parent / path).resolve()
        if not resolved.is_relative_to(root.resolve()):
            yield Problem(name, _line(text, match.start()), target, "leaves the repository")
        elif not resolved.exists():
            yield Problem(name, _line(text, match.start()), target, "no such file")


def path_problems(text: str, file: Path, root: Path = ROOT) -> Iterator[Problem]:
    """Repository paths mentioned in ``text`` that name nothing in the repository."""
    name = file.relative_to(root).as_posix()
    for match in PATH.finditer(text):
        if not _exists(root, match.group(1)):
            yield Problem(name, _line(text, match.start()), match.group(1), "no such path")
    for match in ROOM_PATH.finditer(text):
        if not _exists(root / "dsi_ref", match.group(1)):
            yield Problem(name, _line(text, match.start()), match.group(1),
                          "no such module under dsi_ref/")


def forbidden_problems(text: str, file: Path, root: Path = ROOT) -> Iterator[Problem]:
    """Citations of the notes that live outside the repository."""
    name = file.relative_to(root).as_posix()
    for match in FORBIDDEN.finditer(text):
        yield Problem(name, _line(text, match.start()), match.group(),
                      "cites a file outside the repository (use docs/design.md or docs/paper.md)")


# -- dotted references, resolved statically ----------------------------------------------------


@dataclass
class _Module:
    """What a module defines at top level, read from its source."""

    is_package: bool
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)            # functions, assignments
    imported: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # as -> (mod, name)
    star: list[str] = field(default_factory=list)           # modules star-imported


def _module_path(dotted: str, root: Path) -> Path | None:
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _read_module(dotted: str, root: Path) -> _Module | None:
    path = _module_path(dotted, root)
    if path is None:
        return None
    is_package = path.name == "__init__.py"
    module = _Module(is_package)
    package = dotted if is_package else dotted.rpartition(".")[0]

    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        anchor = package.split(".")
        anchor = anchor[:len(anchor) - (node.level - 1)]
        return ".".join([*anchor, node.module] if node.module else anchor)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                module.classes[node.name] = node
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                module.names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    module.names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    module.imported[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0], None)
            elif isinstance(node, ast.ImportFrom):
                source = absolute(node)
                for alias in node.names:
                    if alias.name == "*":
                        module.star.append(source)
                    else:
                        module.imported[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return module


def _class_has(cls: ast.ClassDef, attr: str) -> bool:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and \
                node.name == attr:
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
                return True
    # an attribute set in a method (``self.x = ...``), or inherited: accepted only when the class
    # assigns it somewhere or has a base that may define it
    stored = any(isinstance(sub, ast.Attribute) and sub.attr == attr and
                 isinstance(sub.ctx, ast.Store) for sub in ast.walk(cls))
    return stored or bool(cls.bases)


def _resolves(module_name: str, attrs: list[str], root: Path, depth: int = 0) -> bool:
    """Whether ``module_name.attrs…`` names a module or an attribute found in the source."""
    if not attrs:
        return True
    if depth > 20:
        return True  # an import cycle: give up, do not guess
    module = _read_module(module_name, root)
    if module is None:
        return False
    head, rest = attrs[0], attrs[1:]
    if module.is_package and _module_path(f"{module_name}.{head}", root) is not None:
        return _resolves(f"{module_name}.{head}", rest, root, depth + 1)
    if head in module.classes:
        return not rest or (len(rest) == 1 and _class_has(module.classes[head], rest[0]))
    if head in module.names:
        return True  # a function or a value: its attributes are not checked
    if head in module.imported:
        source, name = module.imported[head]
        if source.split(".")[0] not in PACKAGES:
            return True  # a third-party name
        return _resolves(source, [name, *rest] if name else rest, root, depth + 1)
    return any(_resolves(source, attrs, root, depth + 1) for source in module.star
               if source.split(".")[0] in PACKAGES)


def dotted_problems(text: str, file: Path, root: Path = ROOT) -> Iterator[Problem]:
    """Dotted names in backticks (under ``dsi_ref``, ``theory`` or ``proofs``) that resolve to
    neither a module nor an attribute of one."""
    name = file.relative_to(root).as_posix()
    if file.suffix == ".md":
        text = FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    for span in CODE_SPAN.finditer(text):
        for match in DOTTED.finditer(span.group(2)):
            dotted = match.group(1)
            top, *attrs = dotted.split(".")
            if not _resolves(top, attrs, root):
                yield Problem(name, _line(text, span.start()), dotted,
                              "neither a module nor an attribute of one")


def problems(root: Path = ROOT) -> list[Problem]:
    """Every broken reference of the repository at ``root``."""
    found: list[Problem] = []
    for file in scanned_files(root):
        text = file.read_text(encoding="utf-8", errors="replace")
        if file.resolve() == Path(__file__).resolve():
            text = text.split(SELF_TESTS, 1)[0]  # the self-tests plant broken references
        found += forbidden_problems(text, file, root)
        if file.suffix == ".md":
            found += link_problems(text, file, root)
        found += path_problems(text, file, root)
        if file.suffix in {".md", ".py"}:
            found += dotted_problems(text, file, root)
    # a link is also a path mention: report each broken reference once per line
    unique: dict[tuple[str, int, str], Problem] = {}
    for problem in found:
        unique.setdefault((problem.file, problem.line, problem.reference), problem)
    return list(unique.values())


# -- the checks --------------------------------------------------------------------------------


def test_every_reference_names_something_in_the_repository() -> None:
    files = scanned_files()
    assert len(files) > 100, f"the scan found suspiciously few files ({len(files)})"
    broken = problems()
    assert not broken, "broken references:\n" + "\n".join(map(str, broken))


def test_the_design_and_paper_notes_are_in_the_repository() -> None:
    for page in ("docs/design.md", "docs/paper.md"):
        assert (ROOT / page).is_file(), f"{page} is cited everywhere and must exist"


def public_names(root: Path = ROOT) -> list[str]:
    """``dsi_ref.__all__``, read from the source."""
    tree = ast.parse((root / "dsi_ref" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [str(v) for v in ast.literal_eval(node.value)]
    raise AssertionError("dsi_ref/__init__.py has no __all__")


def test_the_design_states_the_contract_of_every_public_name() -> None:
    names = public_names()
    assert len(names) > 30, names
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    missing = [name for name in names if f"`{name}`" not in design]
    assert not missing, f"docs/design.md's public API section does not name {missing}"


# -- self-tests: each checker flags a made-up broken reference ---------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A tiny repository: one page, one package module, one test."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "real.md").write_text("# real\n")
    (tmp_path / "dsi_ref" / "sim").mkdir(parents=True)
    (tmp_path / "dsi_ref" / "__init__.py").write_text(
        '"""pkg."""\nfrom .sim.paper import exact as exported\n')
    (tmp_path / "dsi_ref" / "sim" / "__init__.py").write_text('"""sim."""\n')
    (tmp_path / "dsi_ref" / "sim" / "paper.py").write_text(
        '"""paper."""\n\ndef exact():\n    """e."""\n\n\nclass Model:\n    """m."""\n\n'
        '    def run(self):\n        """r."""\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_real.py").write_text('"""t."""\n')
    return tmp_path


def _write(repo: Path, relative: str, text: str) -> Path:
    path = repo / relative
    path.write_text(text)
    return path


def test_links_to_missing_pages_are_flagged_and_good_links_are_not(repo: Path) -> None:
    missing = "gone" + ".md"
    page = _write(repo, "docs/page.md",
                  f"[ok](real.md) [ok](../tests/test_real.py#L1) [web](https://example.org/x.md)"
                  f" [anchor](#top)\n[bad]({missing})\n")
    found = list(link_problems(page.read_text(), page, repo))
    assert [(p.reference, p.line) for p in found] == [(missing, 2)]


def test_a_link_that_climbs_out_of_the_repository_is_flagged(repo: Path) -> None:
    page = _write(repo, "docs/page.md", "[out](../../elsewhere/notes" + ".md)\n")
    assert [p.why for p in link_problems(page.read_text(), page, repo)] == [
        "leaves the repository"]


def test_paths_to_missing_files_are_flagged_in_prose_and_docstrings(repo: Path) -> None:
    bad_test = "tests/" + "test_nothing_here.py"
    bad_room = "sim/" + "nothing_here.py"
    bad_doc = "docs/" + "nowhere.md"
    source = _write(repo, "dsi_ref/sim/mod.py",
                    f'"""See docs/real.md, tests/test_*.py and sim/paper.py.\n\n'
                    f'Stale: {bad_test}, {bad_room}.\n"""\n# and {bad_doc}\n')
    found = {p.reference for p in path_problems(source.read_text(), source, repo)}
    assert found == {bad_test, bad_room, bad_doc}
    glob = "tests/" + "test_nomatch_*.py"
    assert [p.reference for p in path_problems(glob, source, repo)] == [glob]
    # a page named by its address (no suffix) is found; a made-up one is not
    assert not list(path_problems("docs/real", source, repo))
    assert [p.reference for p in path_problems("docs/unreal", source, repo)] == ["docs/unreal"]


def test_dotted_references_must_resolve_to_a_module_or_an_attribute(repo: Path) -> None:
    good = ("`dsi_ref.sim.paper`, ``dsi_ref.sim.paper.exact``, `dsi_ref.sim.paper.Model.run`, "
            "`dsi_ref.exported`")
    bad = ["dsi_ref.sim." + "nothing", "dsi_ref.sim.paper." + "missing",
           "dsi_ref.sim.paper.Model." + "walk", "dsi_ref." + "unexported"]
    page = _write(repo, "docs/page.md",
                  good + "\n" + " ".join(f"`{b}`" for b in bad) + "\n```\n`dsi_ref.x`\n```\n")
    assert [p.reference for p in dotted_problems(page.read_text(), page, repo)] == bad


def test_citations_of_the_outside_notes_are_flagged(repo: Path) -> None:
    for cited in (*_FORBIDDEN_NAMES, ".." + "/shared/notes"):
        page = _write(repo, "docs/page.md", f"as {cited} says\n")
        assert [p.reference for p in forbidden_problems(page.read_text(), page, repo)], cited
    page = _write(repo, "docs/page.md", "see docs/design.md and docs/paper.md\n")
    assert not list(forbidden_problems(page.read_text(), page, repo))


def test_the_whole_scan_reports_a_planted_broken_reference(repo: Path) -> None:
    _write(repo, "README.md", "[design](docs/real.md)\n")
    assert problems(repo) == []
    _write(repo, "README.md", "[design](docs/" + "missing.md)\n")
    assert [p.file for p in problems(repo)] == ["README.md"]
