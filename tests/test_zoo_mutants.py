"""The zoo of wrong decoders (`dsi_ref.audit.zoo`): every mutant must be killed by the exact audit.

A mutant that passes means either the audit lost power or the mutant is not a bug; both must fail
the suite. The hunt is also run on the correct decoders, which it must not kill (otherwise the
kills would prove nothing).
"""

from __future__ import annotations

from fractions import Fraction
from functools import partial

import pytest

from dsi_ref.audit.zoo import EQUIVALENT_MUTANTS, MUTANTS, Mutant, hunt
from dsi_ref.audit.zoo_mutants.orchestration import _si_variant
from dsi_ref.decoders.dsi import dsi
from dsi_ref.decoders.speculative import SIRun, speculative


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_every_mutant_is_killed_by_the_exact_audit(name: str) -> None:
    kill = hunt(MUTANTS[name])
    assert kill is not None, f"mutant {name!r} ({MUTANTS[name].pattern}) passes the exact audit"
    if kill.witness is None:  # a wrong law: the worst sequence has two different probabilities
        assert kill.tv_distance is not None and kill.tv_distance > 0
        assert kill.mutant_probability != kill.target_probability
    else:  # a schedule-dependent law: two scheduler options give different laws
        worst, left, right = kill.witness.discrepancy
        assert left != right, worst


def test_the_zoo_has_at_least_twelve_mutants_each_with_a_bug_pattern() -> None:
    assert len(MUTANTS) >= 12
    for name, mutant in MUTANTS.items():
        assert mutant.name == name
        assert mutant.pattern and mutant.base in ("speculative", "dsi", "tree_speculative")
    assert sum(m.base == "dsi" for m in MUTANTS.values()) >= 4  # orchestration bugs of DSI
    assert sum(m.base == "tree_speculative" for m in MUTANTS.values()) >= 3  # issue #14, item 5


@pytest.mark.parametrize("verify", ["rejection", "exact_match"])
def test_hunt_does_not_kill_the_correct_decoders(verify: str) -> None:
    for base, decoder in (("speculative", speculative), ("dsi", dsi)):
        correct = Mutant(f"correct-{base}", "none", partial(decoder, verify=verify), base)
        assert hunt(correct) is None


def test_the_dsi_commits_preempted_mutant_is_caught_as_schedule_dependent() -> None:
    kill = hunt(MUTANTS["dsi-commits-preempted"])
    assert kill is not None and kill.witness is not None
    # pinned: after the path the witness gives, one scheduler option commits (2, 1, 2) with
    # probability 8/9 and the other never does
    assert (kill.model, kill.witness.discrepancy) == ("bigram", ((2, 1, 2), Fraction(8, 9),
                                                                 Fraction(0)))
    assert "schedule-dependent" in str(kill)


@pytest.mark.parametrize("name", sorted(EQUIVALENT_MUTANTS))
def test_equivalent_mutants_are_not_flagged_because_they_are_lossless(name: str) -> None:
    """A variation that only looks like a bug (zoo's Note: why they are lossless) must pass:
    an audit that flags it would raise false alarms."""
    assert hunt(EQUIVALENT_MUTANTS[name]) is None


def test_the_si_variant_without_an_override_is_lossless() -> None:
    """The structural SI mutants are `SIRun` subclasses run by `_si_variant`; with no step
    overridden it is correct (EOS included), so each kill is due to the mutant's own step."""
    assert hunt(Mutant("skeleton", "none", _si_variant(SIRun), "speculative")) is None
