"""``python -m dsi_ref.claims [--write] [--check]``: print the registry's tables, rewrite the
docs' generated blocks (``--write``), or list stale blocks and stray verdicts (``--check``,
exit 1 if any)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .render import TABLES, render_table, rewrite, stale_blocks, stray_verdicts

DOCS = Path(__file__).resolve().parents[2] / "docs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dsi_ref.claims", description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the docs' blocks")
    parser.add_argument("--check", action="store_true", help="list stale blocks and strays")
    args = parser.parse_args(argv)
    if args.write:
        for page in sorted(DOCS.glob("*.md")):
            text = page.read_text()
            new = rewrite(text)
            if new != text:
                page.write_text(new)
                print(f"rewrote {page.name}")
    if args.check:
        problems = stale_blocks(DOCS) + stray_verdicts(DOCS)
        print("\n".join(problems) or "every docs verdict is a registry row")
        return 1 if problems else 0
    if not args.write:
        for name in TABLES:
            print(f"## {name}\n\n{render_table(name)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
