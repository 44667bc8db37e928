"""The registry of claims: every losslessness claim and every latency claim the docs make.

A claim is a row. A losslessness claim names the decoder, the verification rule, its options,
the scheduler class it quantifies over and the model family; a lossy claim carries its minimal
witness, which `ClaimWitness.check` recomputes exactly. The docs' verdict tables are rendered from
these rows (`dsi_ref.claims.render`), the audit's ``schedulers`` and ``block-dsi`` sections check
them both ways, the attack search (`dsi_ref.claims.attack`) tries to refute every lossless row on
instances nobody picked, and a test fails when a docs page states a verdict that is not a row.

Latency claims are the theorems of ``proofs`` (z3 over ``theory``'s closed forms, verdict
PROVED or REFUTED with a counterexample) and the exact simulator values the docs quote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypedDict, Unpack

from proofs.theorems import THEOREMS

from ..audit.registry import DECODERS, STRING_LEVEL_DECODERS
from ..audit.schedulers import SCHEDULER_CLASSES, SchedulerClass
from ..base.models import TableLM
from .instances import Finding, Instance, TieRule, check_instance

__all__ = ["CLAIMS", "DSI_FAMILY", "DSI_RULES", "LATENCY_CLAIMS", "ClaimWitness",
           "DSIRule", "InstanceOptions", "InstanceWitness", "LatencyClaim", "LosslessnessClaim",
           "ProgramWitness", "Verdict", "dsi_claim", "dsi_claims", "instance_of"]

Verdict = Literal["lossless", "lossy"]

#: The model family every DSI claim quantifies over (what the attack search draws from).
DSI_FAMILY = ("every pair of n-gram models over a shared vocabulary, with or without an EOS "
              "token, with zero probabilities and ties; drafter and target latency laws with "
              "finite support; every lookahead, sp_degree and budget")


class ClaimWitness:
    """What makes a lossy claim lossy: a description and an exact re-check."""

    description: str

    def check(self) -> Finding:
        """Recompute the witness exactly (lossy: ``not finding.lossless``)."""
        raise NotImplementedError


@dataclass(frozen=True)
class InstanceWitness(ClaimWitness):
    """A DSI instance on which some scheduler of ``scheduler_class`` is lossy."""

    instance: Instance
    scheduler_class: SchedulerClass
    note: str = ""
    #: a short name for the instance where its rows are too long to print (else the instance).
    summary: str = ""

    @property
    def description(self) -> str:  # type: ignore[override]
        return (self.summary or str(self.instance)) + (f" ({self.note})" if self.note else "")

    def check(self) -> Finding:
        return check_instance(self.scheduler_class, self.instance)


@dataclass(frozen=True)
class ProgramWitness(ClaimWitness):
    """A lossy claim about a sequential decoder: the exact TV of a named computation."""

    description: str
    tv: Callable[[], Fraction]

    def check(self) -> Finding:
        tv = self.tv()
        return Finding(tv == 0, tv, "" if tv == 0 else f"TV {tv}")


@dataclass(frozen=True)
class DSIRule:
    """A verification rule of DSI as the docs' tables name it: ``verify`` and its block rule."""

    label: str
    verify: str
    block_windows: Literal["fixed", "maximal"] = "fixed"


#: DSI's rules, in the order of the docs' tables.
DSI_RULES: tuple[DSIRule, ...] = (
    DSIRule("rejection", "rejection"), DSIRule("exact_match", "exact_match"),
    DSIRule("greedy", "greedy"), DSIRule("block", "block", "fixed"),
    DSIRule("block, maximal windows", "block", "maximal"))


@dataclass(frozen=True)
class LosslessnessClaim:
    """One losslessness claim.

    Attributes:
        decoder: the decoder (``"dsi"``, ``"speculative"``, ...).
        rule: its verification rule (DSI: a `DSIRule` label).
        options: other options that define the claim (``block_windows``, the variant).
        scheduler_class: the adversary it quantifies over (``None``: a sequential decoder, no
            scheduler).
        family: the model family it quantifies over.
        verdict: ``"lossless"`` (for every instance of the family) or ``"lossy"``.
        witness: the minimal witness of a lossy claim.
        checked_by: where it is checked.
    """

    decoder: str
    rule: str
    options: tuple[tuple[str, str], ...]
    scheduler_class: SchedulerClass | None
    family: str
    verdict: Verdict
    witness: ClaimWitness | None = None
    checked_by: str = ""

    def __post_init__(self) -> None:
        if (self.verdict == "lossy") != (self.witness is not None):
            raise ValueError(f"claim {self.key}: a lossy claim carries a witness, a lossless "
                             "one none")

    @property
    def key(self) -> tuple[str, str, SchedulerClass | None]:
        return (self.decoder, self.rule, self.scheduler_class)


def _rows(model: TableLM) -> tuple[tuple[tuple[int, ...], tuple[Fraction, ...]], ...]:
    return tuple(sorted((tuple(k), tuple(Fraction(p) for p in row))
                        for k, row in model.table.items()))


class InstanceOptions(TypedDict, total=False):
    """The options of `instance_of`: `Instance`'s fields of the same names."""

    verify: str
    block_windows: Literal["fixed", "maximal"]
    queue: Literal["fifo", "lifo", "any"]
    tie_rule: TieRule


def instance_of(target: TableLM, drafter: TableLM, max_new_tokens: int, lookahead: int,
                sp_degree: int, drafter_cost: Fraction | dict[Fraction, Fraction],
                target_cost: Fraction | dict[Fraction, Fraction] = Fraction(1),
                **options: Unpack[InstanceOptions]
                ) -> Instance:
    """An `Instance` from two `TableLM` of the same shape (options: verify, block_windows,
    queue, tie_rule)."""
    def law(cost: Fraction | dict[Fraction, Fraction]) -> tuple[tuple[Fraction, Fraction], ...]:
        return tuple(sorted(cost.items())) if isinstance(cost, dict) else ((cost, Fraction(1)),)

    return Instance(target.vocab_size, target.context, target.eos, _rows(target),
                    _rows(drafter), max_new_tokens, lookahead, sp_degree, law(drafter_cost),
                    law(target_cost), **options)


_F = Fraction
_ZEROS = (TableLM.context_free((_F(1, 2), _F(1, 2), _F(0))),
          TableLM.context_free((_F(0), _F(1, 3), _F(2, 3))))


def _content_aware(rule: DSIRule) -> InstanceWitness:
    return InstanceWitness(instance_of(*_ZEROS, 1, 2, 2, _F(1), verify=rule.verify,
                                       block_windows=rule.block_windows, queue="any"),
                           "content-aware", "the audit's zeros pair: a bonus token or the draft, "
                           "chosen by seeing the draft in flight")


_MAXIMAL_ADAPTIVE = InstanceWitness(
    instance_of(TableLM.random(3, 2, seed=0), TableLM.random(3, 2, seed=40), 3, 3, 3,
                _F(1, 3), verify="block", block_windows="maximal"),
    "adaptive", "the block length chosen after seeing the drafts",
    "target TableLM.random(3, 2, seed=0), drafter seed=40, N=3, lookahead=3, sp_degree=3, "
    "drafter cost 1/3, target cost 1, verify='block', block_windows='maximal', ties: every "
    "resolution")
_MAXIMAL_RANDOM = InstanceWitness(
    instance_of(TableLM.context_free((_F(1, 2), _F(1, 2)), eos=1),
                TableLM.context_free((_F(2, 3), _F(1, 3)), eos=1), 3, 3, 2, _F(1, 3),
                {_F(1): _F(1, 2), _F(2): _F(1, 2)}, verify="block", block_windows="maximal",
                tie_rule="first"),
    "random", "found and shrunk by the attack search; an EOS draft ends the drafting early, so "
    "content moves the random timing, and the timing moves the block boundaries")
#: The instance that first refuted the row (issue 23): V = 3, N = 3, SP = 3, target cost 1 or 3.
MAXIMAL_RANDOM_FIRST_FOUND = instance_of(
    TableLM.context_free((_F(1, 3), _F(4, 9), _F(2, 9)), eos=2),
    TableLM.context_free((_F(4, 11), _F(4, 11), _F(3, 11)), eos=2), 3, 3, 3, _F(1),
    {_F(1): _F(1, 2), _F(3): _F(1, 2)}, verify="block", block_windows="maximal",
    tie_rule="last")

#: Per DSI rule, the classes it is lossy under, with the minimal witness.
_DSI_LOSSY: dict[str, dict[SchedulerClass, InstanceWitness]] = {
    "rejection": {"content-aware": _content_aware(DSI_RULES[0])},
    "exact_match": {},
    "greedy": {},
    "block": {"content-aware": _content_aware(DSI_RULES[3])},
    "block, maximal windows": {"random": _MAXIMAL_RANDOM, "adaptive": _MAXIMAL_ADAPTIVE,
                               "content-aware": _content_aware(DSI_RULES[4])},
}


def _dsi_rows() -> list[LosslessnessClaim]:
    out = []
    for rule in DSI_RULES:
        for cls in SCHEDULER_CLASSES:
            witness = _DSI_LOSSY[rule.label].get(cls)
            out.append(LosslessnessClaim(
                "dsi", rule.label, (("block_windows", rule.block_windows),)
                if rule.verify == "block" else (), cls, DSI_FAMILY,
                "lossy" if witness else "lossless", witness,
                "the audit's schedulers and block-dsi sections; tests/test_claims.py (the "
                "attack search)"))
    return out


def _typical_tv() -> Fraction:
    from ..audit.suite import default_suite
    from ..audit.typical import typical_acceptance_tv

    bigram = next(pair for pair in default_suite() if pair.name == "bigram")
    return typical_acceptance_tv(bigram.target, bigram.drafter, (), 4, 2, [0.09])[0][1]


def _sequential_rows() -> list[LosslessnessClaim]:
    out = [LosslessnessClaim(name, variant.label, tuple(sorted(
        (k, str(v)) for k, v in variant.kwargs.items() if k not in ("verify", "record"))),
        None, "every model pair the registry properties draw (tests/test_lossless_registry.py)",
        "lossless", None, "tests/test_lossless_registry.py")
        for name, spec in DECODERS.items() if name != "dsi" for variant in spec.variants]
    out += [LosslessnessClaim(name, "string-level", (), None, "cross-vocabulary pairs",
                              "lossless", None, where)
            for name, where in STRING_LEVEL_DECODERS.items()]
    out.append(LosslessnessClaim(
        "speculative", "typical", (("epsilon", "0.09"),), None, "every model pair", "lossy",
        ProgramWitness("the audit's bigram pair, N = 4, lookahead 2 (docs/verifiers.md)",
                       _typical_tv), "tests/test_typical_acceptance.py"))
    return out


#: Every losslessness claim, DSI's first (rule × scheduler class), then the sequential decoders.
CLAIMS: tuple[LosslessnessClaim, ...] = (*_dsi_rows(), *_sequential_rows())


def dsi_claim(rule: str, scheduler_class: SchedulerClass) -> LosslessnessClaim:
    """The registry row of DSI with ``rule`` (a `DSIRule` label) under ``scheduler_class``."""
    for claim in CLAIMS:
        if claim.key == ("dsi", rule, scheduler_class):
            return claim
    raise KeyError(f"no DSI claim for rule {rule!r} and class {scheduler_class!r}")


def dsi_claims(rule: str) -> frozenset[SchedulerClass]:
    """The classes DSI with ``rule`` is claimed lossless under."""
    return frozenset(cls for cls in SCHEDULER_CLASSES
                     if dsi_claim(rule, cls).verdict == "lossless")


@dataclass(frozen=True)
class LatencyClaim:
    """One latency claim: a theorem of ``proofs`` or an exact value of the simulator.

    Attributes:
        name: its name (a theorem's name in ``proofs.theorems.THEOREMS``).
        statement: the sentence the docs state.
        verdict: ``"PROVED"``/``"REFUTED"`` (a theorem's expected verdict) or ``"exact"``.
        value: for an exact value, the `Fraction` the docs quote.
    """

    name: str
    statement: str
    verdict: str
    value: Fraction | None = None
    compute: Callable[[], Fraction] | None = None


def _block_vs_token(rule: Literal["block", "rejection"], c: Fraction
                    ) -> Callable[[], Fraction]:
    """The event model's exact expected latency of DSI on p = (1/2, 1/2), q = (3/4, 1/4),
    N = 5, k = 2, SP = 2: block verification deciding whole windows, or token-level."""
    def compute() -> Fraction:
        from ..audit.acceptance import window_acceptance_law
        from ..sim import AcceptanceLaw, expected_latency

        target = TableLM.context_free((_F(1, 2), _F(1, 2)))
        drafter = TableLM.context_free((_F(3, 4), _F(1, 4)))
        law = AcceptanceLaw.from_mapping(window_acceptance_law(target, drafter, 2, rule), 2)
        value = expected_latency("dsi", c=c, acceptance=law, lookahead=2, n_tokens=5,
                                 model="event", sp_degree=2,
                                 decisions="window" if rule == "block" else "position")
        assert isinstance(value, Fraction)
        return value
    return compute


#: Every latency claim: the theorems, then the simulator values docs/dsi-semantics.md quotes
#: (block DSI with fixed windows against token-level DSI and non-SI; p = (1/2, 1/2),
#: q = (3/4, 1/4), N = 5, k = 2, SP = 2, event model).
LATENCY_CLAIMS: tuple[LatencyClaim, ...] = (
    *(LatencyClaim(t.name, t.wording, t.expected.value) for t in THEOREMS),
    LatencyClaim("block_dsi_fixed_c_1_3", "block DSI (fixed windows) at c = 1/3", "exact",
                 Fraction(2893, 768), _block_vs_token("block", _F(1, 3))),
    LatencyClaim("token_dsi_c_1_3", "token-level (rejection) DSI at c = 1/3", "exact",
                 Fraction(871, 256), _block_vs_token("rejection", _F(1, 3))),
    LatencyClaim("block_dsi_fixed_c_1", "block DSI (fixed windows) at c = 1, slower than "
                 "non-SI's 5", "exact", Fraction(1735, 256), _block_vs_token("block", _F(1))),
)
