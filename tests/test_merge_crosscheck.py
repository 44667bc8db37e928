"""Merging is an optimisation, never a change of law (#13, item 5): on every registered decoder
and every variant of `dsi_ref.audit.registry.DECODERS`, the exact law computed with the
decoders' ``merge_point`` hints equals the plain path enumeration's, as exact `Fraction`s, for
the tokens and for the pair (tokens, virtual time) under a latency model. The default run uses
small instances; the ``slow`` sweep covers larger vocabularies, lookaheads and servers.

A wrong hint (a state that leaves out something the rest of the run depends on) is caught here:
the test at the end shows the cross-check failing on a decoder whose state forgets a variable.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction as F
from typing import Any

import pytest

import dsi_ref as dr
from dsi_ref.audit.registry import DECODERS, DecoderSpec, Variant

LATENCY = dr.Latency(drafter=F(1, 10), target=F(1))

CONFIGS = [pytest.param(spec, variant, id=f"{name}-{variant.label}")
           for name, spec in DECODERS.items() for variant in spec.variants]


def _program(spec: DecoderSpec, variant: Variant, target: dr.TableLM, drafter: dr.TableLM,
             n_tokens: int, timed: bool, **params: Any) -> Callable[[Any], Any]:
    """``rng -> tokens`` (or ``(tokens, time)`` when ``timed``) for one configuration."""
    if not timed:
        return spec.program(target, drafter, (), n_tokens, variant, **params)
    kwargs = {**variant.kwargs, **{k: v for k, v in params.items() if k in spec.params},
              "latency": LATENCY}

    def run(rng: Any) -> tuple[tuple[int, ...], F]:
        out = (spec.fn(target, drafter, (), n_tokens, rng, **kwargs) if spec.uses_drafter
               else spec.fn(target, (), n_tokens, rng, **kwargs))
        return out.tokens, F(out.time)

    return run


def _crosscheck(spec: DecoderSpec, variant: Variant, vocab: int, n_tokens: int, seed: int,
                timed: bool, **params: Any) -> int:
    target = dr.TableLM.random(vocab, 1, seed=seed, name="target")
    drafter = dr.TableLM.random(vocab, 1, seed=seed + 1, name="drafter")
    program = _program(spec, variant, target, drafter, n_tokens, timed, **params)
    merged = dr.exact_distribution(program, merge=True)
    assert merged == dr.exact_distribution(program, merge=False)
    assert sum(merged.values()) == 1
    return len(merged)


@pytest.mark.parametrize("timed", [False, True], ids=["tokens", "tokens+time"])
@pytest.mark.parametrize(("spec", "variant"), CONFIGS)
def test_merge_equals_no_merge_on_every_registered_configuration(
        spec: DecoderSpec, variant: Variant, timed: bool) -> None:
    outcomes = _crosscheck(spec, variant, vocab=2, n_tokens=3, seed=4, timed=timed,
                           lookahead=2, sp_degree=2)
    assert outcomes >= (1 if variant.greedy else 2)  # a real law, not a single point


@pytest.mark.slow
@pytest.mark.parametrize(("vocab", "n_tokens", "lookahead", "sp_degree"),
                         [(3, 3, 2, 2), (2, 4, 3, 3), (3, 3, 1, 3), (2, 4, 2, 2)])
@pytest.mark.parametrize(("spec", "variant"), CONFIGS)
def test_merge_equals_no_merge_larger_sweep(spec: DecoderSpec, variant: Variant, vocab: int,
                                            n_tokens: int, lookahead: int,
                                            sp_degree: int) -> None:
    for seed in (5, 9):
        for timed in (False, True):
            _crosscheck(spec, variant, vocab=vocab, n_tokens=n_tokens, seed=seed, timed=timed,
                        lookahead=lookahead, sp_degree=sp_degree)


def test_every_public_decoder_is_covered() -> None:
    """The cross-check covers what the registry lists, and the registry lists the three
    algorithms (test_lossless_registry checks it lists every public decoder)."""
    assert {"autoregressive", "speculative", "dsi"} <= set(DECODERS)
    assert len(CONFIGS) == sum(len(spec.variants) for spec in DECODERS.values())


def test_the_crosscheck_catches_a_wrong_hint() -> None:
    """A hint whose state forgets a variable the rest of the run depends on merges paths whose
    continuations differ: the merged law is wrong, and comparing with ``merge=False`` shows it."""
    def forgetful(rng: Any) -> tuple[int, ...]:
        first = rng.categorical([F(1), F(3)])
        dr.merge_point(rng, "after the first draw")  # `first` left out of the state: wrong
        second = rng.categorical([F(1), F(1)]) if first else 0
        return (first, second)

    merged = dr.exact_distribution(forgetful)
    plain = dr.exact_distribution(forgetful, merge=False)
    assert plain == {(0, 0): F(1, 4), (1, 0): F(3, 8), (1, 1): F(3, 8)}
    assert merged != plain


def test_progress_is_shown_on_stderr_only_when_asked(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``progress=True`` reports runs, paths and merged states on stderr (refreshed every
    `PROGRESS_EVERY` runs, made small here); the default prints nothing, and the law is the same."""
    import dsi_ref.audit.exact.law as law

    monkeypatch.setattr(law, "PROGRESS_EVERY", 4)

    def program(rng: Any) -> int:
        return sum(rng.bernoulli(F(1, 3)) for _ in range(5))

    quiet = dr.exact_distribution(program)
    assert capsys.readouterr().err == ""
    shown = dr.exact_distribution(program, progress=True)
    captured = capsys.readouterr()
    assert shown == quiet and captured.out == ""
    assert "exact_distribution" in captured.err and "paths=" in captured.err
