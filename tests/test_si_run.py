"""`SIRun`, SI written once: a subclass that overrides one step or one seam changes only that.

The torch engine overrides the seams (models, clock) and the zoo's mutants override one step
each; these tests pin what each override may change. (The engine's own equivalence with
`speculative` is in tests/test_backend_exec_equivalence.py.)
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

import dsi_ref as dr
from dsi_ref.audit.suite import default_suite
from dsi_ref.base.models import LanguageModel
from dsi_ref.base.result import Run, decision_kinds
from dsi_ref.decoders.speculative import ModelName, Rows, SIRun, SpeculativeConfig

PAIRS = default_suite()
LATENCY = dr.Latency(drafter=F(1, 5))


def _run(cls: type[SIRun], pair_index: int, seed: int, lookahead: int, verify: str = "rejection",
         n: int = 6, drafter: bool = True) -> Run:
    pair = PAIRS[pair_index]
    config = SpeculativeConfig(lookahead, verify, LATENCY)  # type: ignore[arg-type]
    return cls(pair.target, pair.drafter if drafter else None, pair.prompt, n, dr.Sampler(seed),
               config).run()


def _reference(pair_index: int, seed: int, lookahead: int, verify: str = "rejection",
               n: int = 6) -> Run:
    pair = PAIRS[pair_index]
    return dr.speculative(pair.target, pair.drafter, pair.prompt, n, dr.Sampler(seed), lookahead,
                          verify, latency=LATENCY)  # type: ignore[arg-type]


CASES = [(p, seed, k, verify) for p in range(len(PAIRS)) for seed in range(3) for k in (1, 3)
         for verify in dr.VERIFY_RULES]


@pytest.mark.parametrize(("pair_index", "seed", "lookahead", "verify"), CASES[::5])
def test_speculative_is_a_plain_si_run(pair_index: int, seed: int, lookahead: int,
                                       verify: str) -> None:
    assert _run(SIRun, pair_index, seed, lookahead, verify) == \
        _reference(pair_index, seed, lookahead, verify)


class _OneDraft(SIRun):
    def window(self) -> int:
        return min(1, super().window())


@pytest.mark.parametrize("seed", range(4))
def test_the_window_step_alone_decides_how_many_tokens_are_drafted(seed: int) -> None:
    """Overriding `window` with ``min(1, ·)`` is SI with ``k = 1``, to the trace."""
    differs = False
    for pair_index in range(len(PAIRS)):
        one = _run(_OneDraft, pair_index, seed, lookahead=3)
        assert one == _reference(pair_index, seed, lookahead=1)
        differs |= one != _reference(pair_index, seed, lookahead=3)
    assert differs


class _Untimed(SIRun):
    def forward(self, model: ModelName, kind: str, positions: tuple[int, ...],
                context: tuple[int, ...], count: int) -> Rows:
        return self.model_rows(model, context, count)   # no clock, no trace entry


@pytest.mark.parametrize(("pair_index", "seed", "lookahead", "verify"), CASES[::3])
def test_the_clock_seam_changes_times_and_forward_events_not_decisions(
        pair_index: int, seed: int, lookahead: int, verify: str) -> None:
    untimed = _run(_Untimed, pair_index, seed, lookahead, verify)
    reference = _reference(pair_index, seed, lookahead, verify)
    assert (untimed.tokens, untimed.stats) == (reference.tokens, reference.stats)
    assert decision_kinds(untimed) == decision_kinds(reference)
    assert untimed.time == 0 < reference.time
    assert {e.kind for e in untimed.trace} == {"commit"}


class _Counted(SIRun):
    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.calls: list[tuple[ModelName, int, int]] = []   # (model, len(context), count)

    def model_rows(self, model: ModelName, context: tuple[int, ...], count: int) -> Rows:
        self.calls.append((model, len(context), count))
        return super().model_rows(model, context, count)


@pytest.mark.parametrize("lookahead", [1, 2, 3])
def test_every_model_call_goes_through_the_model_seam_one_target_forward_per_iteration(
        lookahead: int) -> None:
    pair = PAIRS[1]
    for seed in range(4):
        run = _Counted(pair.target, pair.drafter, pair.prompt, 7, dr.Sampler(seed),
                       SpeculativeConfig(lookahead, latency=LATENCY))
        result = run.run()
        assert result == _reference(1, seed, lookahead, n=7)
        target_calls = [c for c in run.calls if c[0] == "target"]
        assert len(target_calls) == result.stats["target_forwards"] == result.stats["iterations"]
        assert sum(c[0] == "drafter" for c in run.calls) == result.stats["drafter_forwards"]
        # SI scores prefix + drafts in one forward: p at len(drafts) + 1 positions
        assert sum(count - 1 for _, _, count in target_calls) == result.stats["drafts"]
        assert all(count == 1 for model, _, count in run.calls if model == "drafter")


class _ArgmaxBonus(SIRun):
    def bonus(self) -> None:
        row = self.target_rows[len(self.drafts)]
        self.commit(tuple(F(i == max(range(len(row)), key=row.__getitem__))
                          for i in range(len(row))))


# alpha: P(a seed's run differs from the reference) = 2746643/2985984 = 0.92, exactly (the exact
# engine runs both on one keyed rng, as Sampler(seed) couples them), so no change in 30 seeds
# has probability 0.080^30 = 1.3e-33
@pytest.mark.montecarlo(alpha=2e-33)
def test_a_bonus_override_changes_only_the_bonus_tokens() -> None:
    """Every position decided against a draft sees the same inputs as the reference: only the
    bonus positions (and what follows them) may differ, and each bonus is argmax p."""
    changed = 0
    for seed in range(30):
        run = _run(_ArgmaxBonus, 1, seed, lookahead=2)
        reference = _reference(1, seed, lookahead=2)
        kinds, ref_kinds = decision_kinds(run), decision_kinds(reference)
        first_bonus = ref_kinds.index("bonus") if "bonus" in ref_kinds else len(ref_kinds)
        assert run.tokens[:first_bonus] == reference.tokens[:first_bonus]
        assert kinds[:first_bonus + 1] == ref_kinds[:first_bonus + 1]
        changed += run.tokens != reference.tokens
    assert changed > 0   # the override does change the bonus draws


@pytest.mark.parametrize("greedy", [False, True])
def test_non_si_is_si_without_a_drafter(greedy: bool) -> None:
    """`autoregressive` is an `SIRun` with no drafter: one target forward and one bonus token per
    iteration, the non-SI counters only."""
    target: LanguageModel = PAIRS[1].target
    for seed in range(4):
        run = dr.autoregressive(target, (), 5, dr.Sampler(seed), greedy=greedy, latency=LATENCY)
        assert run.stats == {"target_forwards": 5, "bonus": 5}
        assert [e.kind for e in run.trace] == ["forward", "commit"] * 5
        assert set(decision_kinds(run)) == {"bonus"}
