"""The command outputs the docs show verbatim are the commands' outputs (issue 34, point 6):
each block of `benchmarks/docs_outputs.py` is run again and compared with the page, timings
masked. The audit output of docs/dsi-walkthrough.md had lost a rule (block verification) that
the audit has checked since: a stale block now fails here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_outputs",
                                                  ROOT / "benchmarks" / "docs_outputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


@pytest.mark.parametrize("name", sorted(GENERATOR.OUTPUTS))
def test_each_verbatim_output_is_the_commands(name: str) -> None:
    output = GENERATOR.OUTPUTS[name]
    shown = GENERATOR.blocks((ROOT / "docs" / output.page).read_text())
    assert name in shown, f"{output.page} has no block {name}"
    fresh = output.run()
    assert GENERATOR.comparable(shown[name]) == GENERATOR.comparable(fresh), (
        f"{output.page}: block {name} is stale (python benchmarks/docs_outputs.py --write); "
        f"the command prints:\n{fresh}")


def test_every_output_block_of_the_docs_has_a_generator() -> None:
    named = {name for page in (ROOT / "docs").glob("*.md")
             for name in GENERATOR.blocks(page.read_text())}
    assert named == set(GENERATOR.OUTPUTS)


def test_timings_are_masked_and_nothing_else() -> None:
    assert GENERATOR.comparable("(PASS, 3.8 s) in 12 s; 0.5 s") == "(PASS, … s) in … s; … s"
    assert GENERATOR.comparable("N = 3, 1/4 s? no: 34 sections") == (
        "N = 3, 1/4 s? no: 34 sections")


def test_a_stale_block_is_rewritten() -> None:
    page = ("<!-- output:x begin (generated) -->\n```text\n$ old\n```\n"
            "<!-- output:x end -->\n")
    assert GENERATOR.blocks(page) == {"x": "$ old"}
    assert GENERATOR.blocks(GENERATOR.rewrite(page, {"x": "$ new\nout"})) == {"x": "$ new\nout"}
