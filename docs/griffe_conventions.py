"""Griffe extension of the docs site (mkdocs.yml, mkdocstrings ``extensions:``): two conventions
of the project's docstrings that the Google-style parser does not know, rewritten on the fly for
the API reference (the source is not changed).

* **Grouped arguments.** ``target_first, drafter_first: cost of the first forward.`` in an
  ``Args:`` section documents two parameters at once; it becomes one entry per name with the
  same description, so griffe still checks every name against the signature.
* **Doctests in the prose.** A ``>>>`` session outside an ``Examples:`` section would be read as
  Markdown (its output ``[1, 3/2]`` as a reference link); it is fenced as a ``pycon`` block.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

_SECTION = re.compile(r"^(?P<indent>\s*)(?P<title>[A-Z][A-Za-z ]*):\s*$")
_GROUPED = re.compile(r"^(?P<indent>\s+)(?P<names>\w+(?:,\s*\w+)+):(?P<rest>\s.*)?$")
_ARG_SECTIONS = {"Args", "Arguments", "Parameters", "Attributes", "Other Parameters"}


def split_grouped_arguments(text: str) -> str:
    """One ``name: description`` entry per name where an argument section groups several."""
    out: list[str] = []
    section: str | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _SECTION.match(line)
        if heading and not heading["indent"]:
            section = heading["title"]
        grouped = _GROUPED.match(line) if section in _ARG_SECTIONS else None
        if grouped is None:
            out.append(line)
            i += 1
            continue
        indent = grouped["indent"]
        body = [grouped["rest"] or ""]  # the entry's first line, then its continuation lines
        i += 1
        while i < len(lines) and lines[i].strip() and _deeper(lines[i], indent):
            body.append("\n" + lines[i])
            i += 1
        for name in re.split(r",\s*", grouped["names"]):
            out.append(f"{indent}{name}:{''.join(body)}")
    return "\n".join(out)


def _deeper(line: str, indent: str) -> bool:
    return len(line) - len(line.lstrip()) > len(indent)


def fence_doctests(text: str) -> str:
    """Fence every ``>>>`` session (prompt, continuation and output lines) as ``pycon``."""
    if "```" in text or re.search(r"^\s*Examples?:\s*$", text, re.M):
        return text  # already fenced, or the parser's own Examples section handles it
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        if out and out[-1].strip():
            out.append("")  # a fence opens a block of its own
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DocstringConventions(Extension):
    """Applies `split_grouped_arguments` and `fence_doctests` to every loaded docstring."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        """Rewrite the docstring of ``obj`` (called once per loaded object)."""
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(split_grouped_arguments(obj.docstring.value))
