"""``dsi-ref audit``, the main job: run the audit sections and print one table each.

The core's sections are defined in `dsi_ref.commands.sections.core`; the sections that need more
than the core (the theorems, the Hugging Face audit) are appended from `TOP_SECTIONS`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from ..base.errors import InvalidParameterError
from .args import Subparsers, check_output
from .sections.core import SECTIONS, Section, SectionSpec, render_section
from .sections.cross_vocab import SECTION as CROSS_VOCAB_SECTION
from .sections.hf import SECTION as HF_SECTION
from .sections.hf_generators import SECTION as ENGINES_SECTION
from .sections.llama import SECTION as LLAMA_SECTION
from .sections.openvino import SECTION as OPENVINO_SECTION
from .sections.processors import SECTION as PROCESSORS_SECTION
from .sections.theorems import SECTION as THEOREMS_SECTION
from .sections.vllm import SECTION as VLLM_SECTION

__all__ = ["TOP_SECTIONS", "audit_sections", "install", "select_sections"]

#: Audit sections defined on the top floor, run after the core's sections.
TOP_SECTIONS: list[SectionSpec] = [PROCESSORS_SECTION, CROSS_VOCAB_SECTION, THEOREMS_SECTION,
                                   HF_SECTION, ENGINES_SECTION, VLLM_SECTION, LLAMA_SECTION,
                                   OPENVINO_SECTION]


def audit_sections() -> list[SectionSpec]:
    """Every section of ``dsi-ref audit``: the core's, then the top floor's."""
    return [*SECTIONS, *TOP_SECTIONS]


def select_sections(names: Sequence[str] = (), *, hf: bool = False,
                    vllm: bool = False, llama: bool = False,
                    openvino: bool = False) -> list[SectionSpec]:
    """The sections an audit runs: those named, else every section that is not opt-in; ``hf``
    adds the Hugging Face section, ``vllm`` the vLLM section, ``llama`` the llama.cpp section,
    ``openvino`` the OpenVINO GenAI section.
    Raises `KeyError` naming unknown sections."""
    sections = audit_sections()
    wanted = set(names) or {s.name for s in sections if not s.opt_in}
    if hf:
        wanted.add("hf")
    if vllm:
        wanted.add("vllm")
    if llama:
        wanted.add("llama")
    if openvino:
        wanted.add("openvino")
    unknown = wanted - {s.name for s in sections}
    if unknown:
        raise KeyError(f"unknown section(s): {', '.join(sorted(unknown))}; "
                       f"known: {', '.join(s.name for s in sections)}")
    return [s for s in sections if s.name in wanted]


def _audit(args: argparse.Namespace) -> int:
    try:
        selected = select_sections(args.section or (), hf=args.hf, vllm=args.vllm,
                                   llama=args.llama, openvino=args.openvino)
    except KeyError as error:
        raise InvalidParameterError(error.args[0]) from None
    if args.json is not None:
        check_output(args.json)
    results: list[Section] = []
    for make in selected:
        section = make.run(quick=args.quick, progress=not args.no_progress)
        results.append(section)
        print(render_section(section), flush=True)
    failed = [s.title for s in results if not s.ok]
    total = sum(s.seconds for s in results)
    print(f"\n{'FAIL' if failed else 'PASS'}: {len(results) - len(failed)}/{len(results)} "
          f"sections passed in {total:.1f} s" + (f" (failed: {', '.join(failed)})" if failed
                                                  else ""))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([s.as_dict() for s in results], fh, indent=2, default=str)
    return 1 if failed else 0


def install(sub: Subparsers) -> None:
    """Add ``dsi-ref audit`` to the sub-command parsers."""
    p = sub.add_parser("audit", help="the main job: exact losslessness audits and the theorems",
                       description="Run the exact audit of every registered decoder on the "
                       "default suite of toy models, DSI under every schedule and against each "
                       "scheduler class, block verification (SI, and DSI with maximal blocks "
                       "against each scheduler class) and every tree rule with their expected "
                       "accepted drafts, the zoo of wrong decoders (each must be caught) and the "
                       "latency theorems, and print one table per section (--hf adds the "
                       "statistical audit of Hugging Face assisted generation). Exit status 1 "
                       "if anything fails.")
    p.add_argument("--section", action="append", metavar="NAME",
                   help="run only this section (repeatable): "
                   + ", ".join(s.name for s in audit_sections()))
    p.add_argument("--quick", action="store_true", help="smaller budgets (a smoke test)")
    p.add_argument("--hf", action="store_true", help="add the statistical audits of Hugging Face "
                   "assisted generation and the torch adapter (about a minute; needs the [torch] "
                   "extra)")
    p.add_argument("--vllm", action="store_true", help="add the vLLM matrix (needs vLLM: "
                   "`python3 run.py audit --vllm` builds its environment and runs it)")
    p.add_argument("--llama", action="store_true", help="add the llama.cpp matrix (needs "
                   "llama-cpp-python and the C++ examples: `python3 run.py audit --llama` builds "
                   "their environment and runs it; skipped with the reason without them)")
    p.add_argument("--openvino", action="store_true", help="add the OpenVINO GenAI matrix (needs "
                   "openvino-genai and optimum-intel: `python3 run.py audit --openvino` builds "
                   "their environment and runs it)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_audit)
