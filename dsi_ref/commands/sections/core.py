"""Sections of the ``dsi-ref audit`` report: each runs a family of checks and returns a table.

A section is registered in `SECTIONS` as a `SectionSpec`; later work adds sections (DSI, the zoo
of wrong decoders, the theorems) without touching the CLI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

from tqdm import tqdm

from ...audit.exact import exact_distribution
from ...audit.laws import LosslessReport, check_lossless, compare_laws, target_distribution
from ...audit.registry import DECODERS
from ...audit.schedulers import (
    SCHEDULER_CLASSES,
    ClassVerdict,
    SchedulerClass,
    check_scheduler_class,
    default_random_latency,
    minimal_witness,
    witness_summary,
)
from ...audit.suite import ModelPair, default_suite
from ...audit.zoo import EQUIVALENT_MUTANTS, MUTANTS, hunt
from ...base.latency import Latency
from ...base.models import LanguageModel, TableLM
from ...base.result import Run
from ...claims.registry import InstanceWitness, dsi_claim, dsi_claims
from ...decoders.dsi import QUEUE_POLICIES, QueuePolicy, dsi
from ...decoders.speculative import speculative
from ...decoders.tree import (
    TREE_VERIFY_RULES,
    TreeRule,
    TreeVerifyRule,
    as_tree_rule,
    tree_speculative,
)
from ...decoders.verification import VERIFY_RULES, Rule, VerifyRule

__all__ = ["SECTIONS", "Section", "SectionSpec", "progress_bar", "render_section"]

T = TypeVar("T")


@dataclass
class Section:
    """The result of one section: a table, a verdict and the time it took."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    ok: bool = True
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {"name": self.name, "title": self.title, "ok": self.ok, "seconds": self.seconds,
                "notes": self.notes, "rows": [dict(zip(self.columns, r, strict=True))
                                              for r in self.rows]}


@dataclass(frozen=True)
class SectionSpec:
    """A named section and the function that computes it.

    ``opt_in`` sections (long statistical runs) are left out of a plain ``dsi-ref audit`` and run
    when named (``--section NAME``, or their own flag such as ``--hf``).
    """

    name: str
    run: Callable[..., Section]
    opt_in: bool = False


def progress_bar(items: Iterable[T], *, total: int, desc: str, enabled: bool) -> Iterator[T]:
    """A tqdm progress bar on stderr (or the bare iterable when disabled)."""
    if not enabled:
        yield from items
        return
    yield from tqdm(items, total=total, desc=desc, leave=False, unit="check")


def render_section(section: Section) -> str:
    """A plain-text table with a title line and notes."""
    cells = [tuple(str(c) for c in section.columns)] + [tuple(_fmt(c) for c in r)
                                                         for r in section.rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(section.columns))]
    line = "  ".join("-" * w for w in widths)
    out = [f"\n== {section.title} ({'PASS' if section.ok else 'FAIL'}, "
           f"{section.seconds:.1f} s) =="]
    out.append("  ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)))
    out.append(line)
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells[1:]]
    out += [f"note: {n}" for n in section.notes]
    return "\n".join(out)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.3e}"
    return str(value)


def decoders_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Exact audit of every registered decoder × variant × suite model × lookahead."""
    section = Section("decoders", "Exact losslessness of every registered decoder",
                      ("decoder", "rule", "model", "params", "outcomes", "TV", "verdict", "s"))
    lookaheads = (2,) if quick else (1, 2, 3)
    jobs = []
    for spec in DECODERS.values():
        for variant in spec.variants:
            for pair in default_suite():
                for params in _param_grid(spec.params, lookaheads):
                    jobs.append((spec, variant, pair, params))
    start = time.perf_counter()
    for spec, variant, pair, params in progress_bar(jobs, total=len(jobs), desc="decoders",
                                                   enabled=progress):
        t0 = time.perf_counter()
        program = spec.program(pair.target, pair.drafter, pair.prompt, pair.max_new_tokens,
                               variant, **params)
        report = check_lossless(program, pair.target, pair.prompt, pair.max_new_tokens,
                                greedy=variant.greedy)
        section.ok &= report.equal
        section.rows.append((spec.name, variant.label, pair.name,
                             " ".join(f"{k}={v}" for k, v in params.items()) or "-",
                             report.outcomes, str(report.tv_distance),
                             "lossless" if report.equal else "LOSSY",
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    return section


def _param_grid(names: tuple[str, ...], lookaheads: tuple[int, ...]) -> list[dict[str, int]]:
    if "lookahead" in names:
        return [{"lookahead": k} for k in lookaheads]
    return [{}]


#: DSI audit grid: a drafter at half the target's cost, so that drafts and tasks complete at the
#: same instants (ties for the scheduler) and verification tasks queue when servers are few.
DSI_AUDIT_LATENCY = Latency(drafter=Fraction(1, 2))
DSI_AUDIT_PAIRS = ("zeros", "bigram", "eos")
DSI_AUDIT_TOKENS = 3


def _dsi_program(pair: ModelPair, max_new_tokens: int, **kwargs: Any
                 ) -> Callable[[Any], tuple[int, ...]]:
    def program(rng: Any) -> tuple[int, ...]:
        return dsi(pair.target, pair.drafter, pair.prompt, max_new_tokens, rng, **kwargs).tokens
    return program


def dsi_section(*, quick: bool = False, progress: bool = True) -> Section:
    """DSI quantified over every schedule: lookaheads × server counts 1..4 × queue policies ×
    verification rules, on context-dependent and EOS models (exact laws)."""
    section = Section("dsi", "DSI: exact losslessness for every schedule (all tie orders and "
                      "queue choices)",
                      ("lookahead", "sp_degree", "queue", "models", "rules", "outcomes", "TV",
                       "verdict", "s"))
    lookaheads = (2,) if quick else (1, 2, 3)
    servers = (1, 2) if quick else (1, 2, 3, 4)
    pairs = [p for p in default_suite() if p.name in DSI_AUDIT_PAIRS]
    jobs = [(k, sp, queue) for k in lookaheads for sp in servers for queue in QUEUE_POLICIES]
    start = time.perf_counter()
    for k, sp, queue in progress_bar(jobs, total=len(jobs), desc="dsi", enabled=progress):
        t0 = time.perf_counter()
        outcomes, worst_tv, equal = 0, Fraction(0), True
        for pair in pairs:
            for rule in VERIFY_RULES:
                program = _dsi_program(pair, DSI_AUDIT_TOKENS, lookahead=k, sp_degree=sp,
                                       latency=DSI_AUDIT_LATENCY, verify=rule, queue=queue,
                                       record=False)
                report = check_lossless(program, pair.target, pair.prompt, DSI_AUDIT_TOKENS,
                                        greedy=rule == "greedy")
                outcomes += report.outcomes
                worst_tv = max(worst_tv, report.tv_distance)
                equal &= report.equal
        section.ok &= equal
        section.rows.append((k, sp, queue, "+".join(DSI_AUDIT_PAIRS), "+".join(VERIFY_RULES),
                             outcomes, str(worst_tv), "lossless" if equal else "LOSSY",
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append(f"N = {DSI_AUDIT_TOKENS}, drafter cost c = {DSI_AUDIT_LATENCY.drafter}, "
                         "target cost 1; every tie order and (queue=any) every queue choice is "
                         "explored, and each must give the same law (schedule robustness); "
                         "lean runs (record=False: same law, more merging)")
    return section


def _first_line(verdict: ClassVerdict) -> str:
    """The headline (TV and outcomes) of a class verdict's worst report."""
    return str(min(verdict.reports, key=lambda r: r.equal)).splitlines()[0]


#: Scheduler-class audit: drafter as slow as the target, so that a draft and the frontier task
#: finish together and the scheduler decides which is delivered first.
SCHEDULERS_AUDIT_LATENCY = Latency(drafter=Fraction(1))
SCHEDULERS_AUDIT_PAIRS = ("bigram", "zeros")


def schedulers_section(*, quick: bool = False, progress: bool = True) -> Section:
    """DSI's verdict per scheduler class × verification rule (minimal witness where lossy),
    checked against the claims registry (`dsi_ref.claims.dsi_claims`) both ways."""
    section = Section("schedulers", "DSI against scheduler classes (adversaries): verdict per "
                      "class and verification rule",
                      ("class", "rule", "claimed", "verdict", "minimal witness", "s"))
    budget = 2 if quick else 3
    pairs = [p for p in default_suite() if p.name in SCHEDULERS_AUDIT_PAIRS]
    jobs = [(c, r) for c in SCHEDULER_CLASSES for r in VERIFY_RULES]
    start = time.perf_counter()
    for scheduler_class, rule in progress_bar(jobs, total=len(jobs), desc="schedulers",
                                              enabled=progress):
        t0 = time.perf_counter()
        latency = (default_random_latency(SCHEDULERS_AUDIT_LATENCY)
                   if scheduler_class == "random" else SCHEDULERS_AUDIT_LATENCY)
        lossless, witness = True, "-"
        for pair in pairs:
            verdict = minimal_witness(scheduler_class, pair.target, pair.drafter, pair.prompt,
                                      budget, lookahead=2, sp_degree=2, latency=latency,
                                      verify=rule, queue="any")
            if not verdict.lossless:
                lossless = False
                witness = (f"{pair.name} N={verdict.max_new_tokens}: "
                           + (witness_summary(verdict.witness) if verdict.witness
                              else _first_line(verdict)))
                break
        claimed = scheduler_class in dsi_claims(rule)
        section.ok &= claimed == lossless
        section.rows.append((scheduler_class, rule, "lossless" if claimed else "lossy",
                             "lossless" if lossless else "LOSSY", witness,
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append(f"models {' and '.join(SCHEDULERS_AUDIT_PAIRS)}, N <= {budget}, "
                         "lookahead 2, sp_degree 2, queue=any, drafter cost 1 (target 1, or "
                         "1 or 2 with probability 1/2 for the random class); the section fails "
                         "when a verdict differs from the claim, either way")
    return section


# -- block and tree verification (issue #14) ------------------------------------------------------


def _law_and_accepted(program: Callable[[Any], Run]) -> tuple[dict[Any, Fraction], Fraction]:
    """One exact enumeration of ``program``'s runs: the law of the tokens and the exact
    expected number of accepted drafts (``run.stats["accepted"]``)."""
    joint = exact_distribution(lambda rng: (lambda run: (run.tokens, run.stats["accepted"]))(
        program(rng)))
    law: dict[Any, Fraction] = {}
    accepted = Fraction(0)
    for (tokens, count), p in joint.items():
        law[tokens] = law.get(tokens, Fraction(0)) + p
        accepted += count * p
    return law, accepted


def _si_program(pair: ModelPair, max_new_tokens: int, lookahead: int,
                verify: VerifyRule | Rule) -> Callable[[Any], Run]:
    def program(rng: Any) -> Run:
        return speculative(pair.target, pair.drafter, pair.prompt, max_new_tokens, rng,
                           lookahead, verify=verify)
    return program


def _tree_program(pair: ModelPair, max_new_tokens: int, tree: tuple[int, ...],
                  verify: TreeVerifyRule | TreeRule) -> Callable[[Any], Run]:
    def program(rng: Any) -> Run:
        return tree_speculative(pair.target, pair.drafter, pair.prompt, max_new_tokens, rng,
                                tree=tree, verify=verify)
    return program


def _exact(x: Fraction) -> str:
    return f"{x} ({float(x):.4f})"


def block_section(*, quick: bool = False, progress: bool = True,
                  rule: VerifyRule | Rule = "block") -> Section:
    """SI with block verification on every pair of the default suite: the exact verdict, and the
    exact expected number of accepted drafts beside token-level rejection sampling's (same
    drafter, lookahead and budget)."""
    section = Section("block", "Block verification (Sun et al.) in SI: exact verdict and expected "
                      "accepted drafts against token-level",
                      ("model", "lookahead", "outcomes", "TV", "verdict", "E[accepted] block",
                       "E[accepted] token-level", "block - token", "s"))
    lookaheads = (2,) if quick else (1, 2, 3)
    jobs = [(pair, k) for pair in default_suite() for k in lookaheads]
    start = time.perf_counter()
    for pair, k in progress_bar(jobs, total=len(jobs), desc="block", enabled=progress):
        t0 = time.perf_counter()

        n = pair.max_new_tokens
        law, block = _law_and_accepted(_si_program(pair, n, k, rule))
        token = _law_and_accepted(_si_program(pair, n, k, "rejection"))[1]
        report = compare_laws(law, target_distribution(pair.target, pair.prompt,
                                                       pair.max_new_tokens))
        section.ok &= report.equal
        section.rows.append((pair.name, k, report.outcomes, str(report.tv_distance),
                             "lossless" if report.equal else "LOSSY", _exact(block),
                             _exact(token), f"{float(block - token):+.4f}",
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append("N = 4 (each pair's budget); E[accepted] is the exact expected number of "
                         "drafted tokens committed in the run; the section fails when a verdict "
                         "is lossy (DSI with block decisions: sections block-dsi and schedulers)")
    return section


#: The classes DSI with block verification and ``block_windows="maximal"`` is lossless under:
#: the claims registry's rows (docs/dsi-semantics.md, "Block decisions"); ``"fixed"`` windows
#: are rule ``"block"``, checked by the ``schedulers`` section.
MAXIMAL_BLOCK_CLAIMS: frozenset[SchedulerClass] = dsi_claims("block, maximal windows")


@dataclass(frozen=True)
class DSIInstance:
    """A DSI instance of the ``block-dsi`` section: models, budget and DSI's parameters."""

    name: str
    target: LanguageModel
    drafter: LanguageModel
    max_new_tokens: int
    lookahead: int
    sp_degree: int
    latency: Latency
    queue: QueuePolicy
    #: the latency law of the random class (``None``: `default_random_latency` of ``latency``).
    random_latency: Latency | None = None


def block_dsi_instances(quick: bool = False) -> list[DSIInstance]:
    """The ``schedulers`` section's grid (bigram and zeros, lookahead 2, SP 2, drafter cost 1,
    queue=any), the instance of docs/dsi-semantics.md's adaptive witness at N = 3
    (``TableLM.random`` seeds 0 and 40, V = 3, lookahead 3, SP 3, drafter cost 1/3), and the
    registry's witness of the random class (a context-free pair with EOS, random target cost)."""
    suite = {p.name: p for p in default_suite()}
    out = [DSIInstance(name, suite[name].target, suite[name].drafter, 2 if quick else 3, 2, 2,
                       SCHEDULERS_AUDIT_LATENCY, "any") for name in SCHEDULERS_AUDIT_PAIRS]
    out.append(DSIInstance("random(3,2) seeds 0/40", TableLM.random(3, 2, seed=0),
                           TableLM.random(3, 2, seed=40), 3, 3, 3,
                           Latency(drafter=Fraction(1, 3)), "fifo"))
    witness = dsi_claim("block, maximal windows", "random").witness
    assert isinstance(witness, InstanceWitness)
    inst = witness.instance
    target, drafter = inst.models()
    out.append(DSIInstance("eos witness of the registry", target, drafter, inst.max_new_tokens,
                           inst.lookahead, inst.sp_degree, Latency(drafter=inst.latency().drafter),
                           inst.queue, inst.latency()))
    return out


def block_dsi_section(*, quick: bool = False, progress: bool = True,
                      claims: frozenset[SchedulerClass] = MAXIMAL_BLOCK_CLAIMS,
                      classes: tuple[SchedulerClass, ...] = SCHEDULER_CLASSES) -> Section:
    """DSI with block decisions on maximal runs (``block_windows="maximal"``): the verdict per
    scheduler class of ``classes`` (minimal witness where lossy), checked against ``claims``
    (the classes claimed lossless) both ways."""
    section = Section("block-dsi", "DSI with block verification, maximal blocks: verdict per "
                      "scheduler class", ("class", "claimed", "verdict", "instances",
                                          "minimal witness", "s"))
    instances = block_dsi_instances(quick)
    start = time.perf_counter()
    for scheduler_class in progress_bar(classes, total=len(classes), desc="block-dsi",
                                        enabled=progress):
        t0 = time.perf_counter()
        lossless, witness = True, "-"
        for inst in instances:
            latency = (inst.random_latency or default_random_latency(inst.latency)
                       if scheduler_class == "random" else inst.latency)
            kwargs: dict[str, Any] = {
                "lookahead": inst.lookahead, "sp_degree": inst.sp_degree, "latency": latency,
                "verify": "block", "block_windows": "maximal", "queue": inst.queue}
            # the full budget first; the smaller budgets only to shorten a witness
            verdict = check_scheduler_class(scheduler_class, inst.target, inst.drafter, (),
                                            inst.max_new_tokens, **kwargs)
            if not verdict.lossless:
                verdict = minimal_witness(scheduler_class, inst.target, inst.drafter, (),
                                          inst.max_new_tokens, **kwargs)
                lossless = False
                witness = (f"{inst.name} N={verdict.max_new_tokens}: "
                           + (witness_summary(verdict.witness) if verdict.witness
                              else _first_line(verdict)))
                break
        claimed = scheduler_class in claims
        section.ok &= claimed == lossless
        section.rows.append((scheduler_class, "lossless" if claimed else "lossy",
                             "lossless" if lossless else "LOSSY",
                             ", ".join(i.name for i in instances), witness,
                             round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append("block_windows='maximal' decides the longest run of drafts with p "
                         "supplied; an adaptive scheduler picks that length after seeing the "
                         "drafts (docs/dsi-semantics.md). The default 'fixed' windows are "
                         "checked per class by the schedulers section (rule 'block'). The "
                         "section fails when a verdict differs from the claim, either way")
    return section


#: The trees of the ``tree`` section (the quick run keeps the first two).
TREE_AUDIT_TREES: tuple[tuple[int, ...], ...] = ((2,), (2, 1), (2, 2))
TREE_AUDIT_TOKENS = 3
#: The pair whose expected accepted drafts the ``tree`` section reports.
TREE_AUDIT_EXPECTATION_PAIR = "bigram"


def tree_section(*, quick: bool = False, progress: bool = True,
                 rules: tuple[TreeVerifyRule | TreeRule, ...] = TREE_VERIFY_RULES) -> Section:
    """Every tree rule on the trees (2,), (2, 1), (2, 2), on every pair of the default suite:
    the exact verdict (the target's greedy sequence for the greedy rule) and the exact expected
    number of accepted drafts on the bigram pair."""
    section = Section("tree", "Multi-draft and tree verification: exact verdict and expected "
                      "accepted drafts per rule and tree",
                      ("tree", "rule", "models", "outcomes", "worst TV", "verdict",
                       f"E[accepted] ({TREE_AUDIT_EXPECTATION_PAIR})", "s"))
    trees = TREE_AUDIT_TREES[:2] if quick else TREE_AUDIT_TREES
    pairs = default_suite()
    jobs = [(tree, rule) for tree in trees for rule in rules]
    n = TREE_AUDIT_TOKENS
    start = time.perf_counter()
    for tree, rule in progress_bar(jobs, total=len(jobs), desc="tree", enabled=progress):
        t0 = time.perf_counter()
        greedy = as_tree_rule(rule).greedy
        outcomes, worst, equal, expected = 0, Fraction(0), True, Fraction(0)
        for pair in pairs:
            law, accepted = _law_and_accepted(_tree_program(pair, n, tree, rule))
            report: LosslessReport = compare_laws(
                law, target_distribution(pair.target, pair.prompt, n, greedy=greedy))
            outcomes += report.outcomes
            worst = max(worst, report.tv_distance)
            equal &= report.equal
            if pair.name == TREE_AUDIT_EXPECTATION_PAIR:
                expected = accepted
        section.ok &= equal
        section.rows.append((tree, rule if isinstance(rule, str) else rule.name, len(pairs),
                             outcomes, str(worst), "lossless" if equal else "LOSSY",
                             _exact(expected), round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    bigram = next(p for p in pairs if p.name == TREE_AUDIT_EXPECTATION_PAIR)
    si_expected = {k: _law_and_accepted(_si_program(bigram, n, k, "rejection"))[1]
                   for k in (1, 2)}
    section.notes.append(f"N = {n} on the {len(pairs)} pairs of the default suite; for reference, "
                         f"SI with token-level rejection on {TREE_AUDIT_EXPECTATION_PAIR}: "
                         + ", ".join(f"lookahead {k}: E[accepted] = {_exact(e)}"
                                     for k, e in si_expected.items())
                         + "; the section fails when a verdict is lossy")
    return section


def zoo_section(*, quick: bool = False, progress: bool = True) -> Section:
    """Every mutant of the zoo must be killed by the exact audit; the witness of each."""
    section = Section("zoo", "The zoo of wrong decoders: each must fail the exact audit",
                      ("mutant", "base", "killed", "witness", "s"))
    start = time.perf_counter()
    killed = 0
    for mutant in progress_bar(MUTANTS.values(), total=len(MUTANTS), desc="zoo",
                               enabled=progress):
        t0 = time.perf_counter()
        kill = hunt(mutant)
        killed += kill is not None
        section.ok &= kill is not None
        section.rows.append((mutant.name, mutant.base, "yes" if kill else "NO (passes!)",
                             str(kill) if kill else mutant.pattern,
                             round(time.perf_counter() - t0, 2)))
    for mutant in EQUIVALENT_MUTANTS.values():  # look like bugs, are lossless: must pass
        t0 = time.perf_counter()
        kill = hunt(mutant)
        section.ok &= kill is None
        section.rows.append((mutant.name, f"{mutant.base} (equivalent)",
                             f"FLAGGED: {kill}" if kill else "no (lossless, as it must be)",
                             mutant.pattern, round(time.perf_counter() - t0, 2)))
    section.seconds = time.perf_counter() - start
    section.notes.append(f"killed {killed}/{len(MUTANTS)} mutants; the {len(EQUIVALENT_MUTANTS)} "
                         "equivalent mutants (lossless variations, dsi_ref.audit.zoo) pass, as "
                         "they must")
    return section


#: The sections of ``dsi-ref audit``, in order.
SECTIONS: list[SectionSpec] = [
    SectionSpec("decoders", decoders_section),
    SectionSpec("dsi", dsi_section),
    SectionSpec("schedulers", schedulers_section),
    SectionSpec("block", block_section),
    SectionSpec("block-dsi", block_dsi_section),
    SectionSpec("tree", tree_section),
    SectionSpec("zoo", zoo_section),
]
