"""The top floor: CLI sub-commands that compose the core with `theory`, `proofs` and the backends.

Each module here exposes ``install(subparsers)`` (registered in `dsi_ref.cli.COMMANDS`). Audit
sections that need more than the core (the theorems, the Hugging Face audit) are listed in
`TOP_SECTIONS` and appended to the core's `dsi_ref.report.SECTIONS` by ``dsi-ref audit``.
Only `dsi_ref.cli` and this package may import `theory`, `proofs` or (lazily, inside a function)
`dsi_ref.backends`; a test enforces it.
"""

from __future__ import annotations

from ..report import SectionSpec
from .hf_audit import SECTION as HF_SECTION
from .theorems import SECTION as THEOREMS_SECTION

__all__ = ["TOP_SECTIONS"]

#: Audit sections defined on the top floor, run after the core's sections.
TOP_SECTIONS: list[SectionSpec] = [THEOREMS_SECTION, HF_SECTION]
