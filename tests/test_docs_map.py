"""The maps of the code in the docs are complete: every name of ``dsi_ref.__all__`` is in the
public-API table of docs/design.md, and every package of
dsi_ref is in the README's package map and in design.md's folder table."""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path

import dsi_ref

ROOT = Path(__file__).resolve().parent.parent
DESIGN = (ROOT / "docs" / "design.md").read_text()
README = (ROOT / "README.md").read_text()


def _public_api_table() -> str:
    start = DESIGN.index("## The public API")
    table = DESIGN[start:DESIGN.index("```", start)]
    return "\n".join(line for line in table.splitlines() if line.startswith("| "))


def test_every_public_name_is_in_designs_api_table() -> None:
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", _public_api_table()))
    missing = sorted(set(dsi_ref.__all__) - named)
    assert not missing, f"docs/design.md's public-API table lacks {missing}"


def _packages() -> list[str]:
    return sorted(info.name for info in pkgutil.iter_modules(dsi_ref.__path__) if info.ispkg)


def test_every_package_is_in_the_readme_map_and_designs_folder_table() -> None:
    for package in _packages():
        row = f"| `dsi_ref/{package}/` |"
        assert row in README, f"README's package map has no row {row}"
        assert row in DESIGN, f"docs/design.md's folder table has no row {row}"
