"""SI's two draw orders have one law (issue 44, point 2).

Under a checker that resumes (`exact_distribution` with merging on), `SIRun` draws each draft
only when it is decided (`SIState.lazy`); a sampler, and the checker with merging off, run the
eager order users run: all drafts, then one target forward. The lazy order is kept for its
speed, so its soundness is checked here: on a generated family of pairs (zeros, ties, EOS
targets, every token rule, lookahead 1-3, N 1-4) the exact law of the whole run (tokens, time,
counters) is the same in both orders. The eager order's own lines are reached by this check:
a mutant of `SIRun.draft` (the eager drafter loop) is caught by it, though every exact check
that runs the lazy order alone passes it.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction as F
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.exact import exact_distribution
from dsi_ref.decoders.speculative import SIRun

RULES = ("rejection", "exact_match", "greedy")


def _program(target: dr.TableLM, drafter: dr.TableLM, n: int, k: int, rule: str
             ) -> Callable[[Any], Any]:
    def program(rng: Any) -> Any:
        run = dr.speculative(target, drafter, (), n, rng, k, verify=rule)  # type: ignore[arg-type]
        return tuple(run.tokens), run.time, tuple(sorted(run.stats.items()))
    return program


def _orders(program: Callable[[Any], Any]) -> tuple[dict[Any, F], dict[Any, F]]:
    """The exact law in the lazy order (merging, resuming) and in the eager one."""
    return exact_distribution(program), exact_distribution(program, merge=False)


@st.composite
def instances(draw: st.DrawFn) -> tuple[dr.TableLM, dr.TableLM, int, int, str]:
    vocab = draw(st.integers(2, 3))
    eos = draw(st.sampled_from([None, vocab - 1]))
    zeros = draw(st.sampled_from([0.0, 0.3]))
    target = dr.TableLM.random(vocab, 1, seed=draw(st.integers(0, 10**6)), eos=eos,
                               zero_prob=zeros, denominator=draw(st.sampled_from([4, 6, 12])))
    drafter = dr.TableLM.random(vocab, 1, seed=draw(st.integers(0, 10**6)), eos=eos,
                                zero_prob=zeros, denominator=draw(st.sampled_from([3, 4, 6])))
    return (target, drafter, draw(st.integers(1, 4)), draw(st.integers(1, 3)),
            draw(st.sampled_from(RULES)))


@settings(max_examples=80, deadline=None)
@given(instances())
def test_the_lazy_and_the_eager_order_have_the_same_exact_law(
        instance: tuple[dr.TableLM, dr.TableLM, int, int, str]) -> None:
    target, drafter, n, k, rule = instance
    lazy, eager = _orders(_program(target, drafter, n, k, rule))
    assert lazy == eager


def test_a_mutant_of_the_eager_drafter_loop_is_caught_by_the_order_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant drafts each position from the target's row instead of the drafter's: only
    the eager loop (`SIRun.draft`) has it, so the lazy order's exact law is unchanged (and
    lossless), and only the comparison of the two orders sees it."""
    target = dr.TableLM.context_free((F(1, 2), F(1, 3), F(1, 6)), name="t")
    drafter = dr.TableLM.context_free((F(1, 6), F(1, 3), F(1, 2)), name="d")
    program = _program(target, drafter, 3, 2, "rejection")
    lazy, eager = _orders(program)
    assert lazy == eager

    original = SIRun.draft

    def mutant(self: SIRun) -> None:
        if self.lazy:
            return original(self)
        for j in range(len(self.drafts), self.window()):
            if j:
                self.point(("draft", j))
            row = self.forward("target", "draft", (self.start + j,), self.context, 1)[0]
            self.add_draft(row)     # BUG: q is the target's row (drafted from p, verified as q)
        self.stats["drafts"] += len(self.drafts)
        self.stats["drafter_forwards"] += len(self.drafts)

    monkeypatch.setattr(SIRun, "draft", mutant)
    lazy_mutant, eager_mutant = _orders(program)
    assert lazy_mutant == lazy          # the lazy order never runs the mutated lines
    assert eager_mutant != eager        # the eager order does, and the check sees it
