"""A catalogue of bad inputs (#13, item 3): every public function and every CLI command refuses
them with a named error and loses nothing.

API cases: ``(call, error class, message fragment)``; the error must be the class given, and
that class must be defined in `dsi_ref.base.errors` (a named error, never a bare ``TypeError``,
``AttributeError`` or a silent result). CLI cases: ``dsi_ref.cli.main(argv)`` in process must
exit with status 2, print exactly one line ``dsi-ref: error: ...`` on stderr containing the
fragment, print no traceback, and leave the folder it was pointed at as it was. A few cases of
valid unusual input (numpy integers, Fractions, numpy floats) must be accepted.

Everything here is fast: no case runs a decoder for more than a few tokens, and no CLI case
gets past its argument checks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsi_ref as dr
from dsi_ref import cli
from dsi_ref.audit.statistical.driver import as_sample_outcome as _outcome
from dsi_ref.base import errors
from dsi_ref.base.errors import InvalidAuditError, InvalidDistributionError
from dsi_ref.base.errors import InvalidParameterError as IPE
from dsi_ref.commands.args import check_output
from dsi_ref.sim import required_servers
from dsi_ref.sim.grid import HeatmapSpec, compute_heatmap
from dsi_ref.sim.paper_table import PHI3_MBPP, TableRow, compute_row, read_rows

HALF = (F(1, 2), F(1, 2))
T = dr.TableLM.context_free(HALF, name="t")
D = dr.TableLM.context_free((F(3, 4), F(1, 4)), name="d")
T3 = dr.TableLM.context_free((F(1, 3), F(1, 3), F(1, 3)), name="t3")
T_EOS = dr.TableLM.context_free(HALF, eos=1, name="t-eos")
LAW = {(0,): F(1, 2), (1,): F(1, 2)}
S = dr.Sampler(0)


def _sample(s: int) -> tuple[int, ...]:
    return dr.autoregressive(T, (), 1, dr.Sampler(s)).tokens


def _audit(**kwargs: Any) -> Any:
    return lambda: dr.statistical_audit(_sample, LAW, **kwargs)


def _latency(**kwargs: Any) -> Any:
    return lambda: dr.Latency(**kwargs)


def _expected(**kwargs: Any) -> Any:
    base: dict[str, Any] = {"c": F(1, 10), "a": F(1, 2), "lookahead": 2, "n_tokens": 4}
    algorithm = kwargs.pop("algorithm", "si")
    return lambda: dr.expected_latency(algorithm, **{**base, **kwargs})


def _simulate(**kwargs: Any) -> Any:
    base: dict[str, Any] = {"c": 0.1, "a": 0.5, "lookahead": 2, "n_tokens": 4, "n_repeats": 2,
                            "seed": 0}
    return lambda: dr.simulate_latency("si", **{**base, **kwargs})


def _row(**kwargs: Any) -> Any:
    base: dict[str, Any] = {"name": "r", "target_ttft_ms": 2, "target_tpot_ms": 1,
                            "drafter_ttft_ms": 1, "drafter_tpot_ms": F(1, 10),
                            "acceptance_rate": F(1, 2)}
    return lambda: TableRow(**{**base, **kwargs})


def _const_policy(index: object) -> Callable[[object, object], Any]:
    return lambda options, key: index


# (id, call, error class, fragment of the message)
API_CASES: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    # -- models ----------------------------------------------------------------------------
    ("functionlm-vocab-0", lambda: dr.FunctionLM(0, lambda p: HALF), IPE, "vocab_size"),
    ("functionlm-vocab-neg", lambda: dr.FunctionLM(-2, lambda p: HALF), IPE, "vocab_size"),
    ("functionlm-vocab-float", lambda: dr.FunctionLM(2.0, lambda p: HALF), IPE, "vocab_size"),
    ("functionlm-vocab-bool", lambda: dr.FunctionLM(True, lambda p: HALF), IPE, "vocab_size"),
    ("functionlm-vocab-str", lambda: dr.FunctionLM("2", lambda p: HALF), IPE, "vocab_size"),
    ("functionlm-eos-out", lambda: dr.FunctionLM(2, lambda p: HALF, eos=2), IPE, "eos=2"),
    ("functionlm-eos-neg", lambda: dr.FunctionLM(2, lambda p: HALF, eos=-1), IPE, "eos=-1"),
    ("functionlm-eos-float", lambda: dr.FunctionLM(2, lambda p: HALF, eos=1.0), IPE, "eos=1.0"),
    ("functionlm-eos-bool", lambda: dr.FunctionLM(2, lambda p: HALF, eos=True), IPE, "eos=True"),
    ("functionlm-probs-not-callable", lambda: dr.FunctionLM(2, HALF), IPE, "probs must be"),
    ("functionlm-row-short", lambda: dr.FunctionLM(2, lambda p: (F(1),)).probs(()),
     InvalidDistributionError, "expected 2 probabilities"),
    ("functionlm-row-sum", lambda: dr.FunctionLM(2, lambda p: (F(1), F(1))).probs(()),
     InvalidDistributionError, "sum to 2"),
    ("functionlm-row-neg", lambda: dr.FunctionLM(2, lambda p: (F(2), F(-1))).probs(()),
     InvalidDistributionError, "< 0"),
    ("functionlm-row-nan", lambda: dr.FunctionLM(2, lambda p: (math.nan, 1.0)).probs(()),
     InvalidDistributionError, "nan"),
    ("functionlm-row-inf", lambda: dr.FunctionLM(2, lambda p: (math.inf, 0.0)).probs(()),
     InvalidDistributionError, "inf"),
    ("functionlm-row-str", lambda: dr.FunctionLM(2, lambda p: ("1", "0")).probs(()),
     InvalidDistributionError, "has type str"),
    ("functionlm-row-bool", lambda: dr.FunctionLM(2, lambda p: (True, False)).probs(()),
     InvalidDistributionError, "bool"),
    ("functionlm-row-float-sum", lambda: dr.FunctionLM(2, lambda p: (0.5, 0.6)).probs(()),
     InvalidDistributionError, "not 1"),
    ("tablelm-vocab-0", lambda: dr.TableLM(0, 0, {(): HALF}), IPE, "vocab_size"),
    ("tablelm-context-neg", lambda: dr.TableLM(2, -1, {(): HALF}), IPE, "context"),
    ("tablelm-context-float", lambda: dr.TableLM(2, 1.5, {(): HALF}), IPE, "context"),
    ("tablelm-context-bool", lambda: dr.TableLM(2, True, {(): HALF}), IPE, "context"),
    ("tablelm-table-list", lambda: dr.TableLM(2, 0, [HALF]), IPE, "table must be a mapping"),
    ("tablelm-key-long", lambda: dr.TableLM(2, 0, {(0,): HALF}), IPE, "longer than 0"),
    ("tablelm-key-not-id", lambda: dr.TableLM(2, 1, {(5,): HALF}), IPE, "not an id"),
    ("tablelm-bad-row", lambda: dr.TableLM(2, 0, {(): (F(1), F(1))}),
     InvalidDistributionError, "sum to 2"),
    ("tablelm-bad-default", lambda: dr.TableLM(2, 1, {}, default=(F(1),)),
     InvalidDistributionError, "expected 2"),
    ("tablelm-missing-row", lambda: dr.TableLM(2, 1, {(0,): HALF}).probs((1,)),
     InvalidDistributionError, "no row for context"),
    ("context-free-empty", lambda: dr.TableLM.context_free(()), IPE, "vocab_size"),
    ("context-free-inf", lambda: dr.TableLM.context_free((math.inf, 0.0)),
     InvalidDistributionError, "inf"),
    ("context-free-eos", lambda: dr.TableLM.context_free(HALF, eos=3), IPE, "eos=3"),
    ("random-vocab-0", lambda: dr.TableLM.random(0, 1, seed=0), IPE, "vocab_size"),
    ("random-denominator", lambda: dr.TableLM.random(5, 1, seed=0, denominator=3), IPE,
     "denominator"),
    ("random-zero-prob", lambda: dr.TableLM.random(2, 1, seed=0, zero_prob=1.5), IPE,
     "zero_prob"),
    ("random-seed-neg", lambda: dr.TableLM.random(2, 1, seed=-1), IPE, "seed"),
    ("random-seed-str", lambda: dr.TableLM.random(2, 1, seed="0"), IPE, "seed"),
    ("random-context-neg", lambda: dr.TableLM.random(2, -1, seed=0), IPE, "context"),
    # -- randomness ------------------------------------------------------------------------
    ("sampler-seed-str", lambda: dr.Sampler("0"), IPE, "seed must be an int"),
    ("sampler-seed-float", lambda: dr.Sampler(1.5), IPE, "seed must be an int"),
    ("sampler-seed-bool", lambda: dr.Sampler(True), IPE, "seed must be an int"),
    ("sampler-seed-neg", lambda: dr.Sampler(-1), IPE, "seed must be an int >= 0"),
    ("sampler-seed-none", lambda: dr.Sampler(None), IPE, "seed must be an int"),
    ("sampler-keyed-int", lambda: dr.Sampler(0, keyed=1), IPE, "keyed must be True or False"),
    ("sampler-keyed-str", lambda: dr.Sampler(0, keyed="yes"), IPE, "keyed"),
    ("sampler-scheduler-bogus", lambda: dr.Sampler(0, scheduler="bogus"), IPE,
     "scheduler must be one of"),
    ("sampler-scheduler-int", lambda: dr.Sampler(0, scheduler=1), IPE, "scheduler"),
    ("sampler-scheduler-none", lambda: dr.Sampler(0, scheduler=None), IPE, "scheduler"),
    ("categorical-inf", lambda: S.categorical([math.inf, 1]), IPE, "finite"),
    ("categorical-neg-inf", lambda: S.categorical([-math.inf, 1]), IPE, "finite"),
    ("categorical-nan", lambda: S.categorical([math.nan, 1]), IPE, "finite"),
    ("categorical-overflow", lambda: S.categorical([1e308, 1e308]), IPE, "overflow"),
    ("categorical-overflow-int", lambda: S.categorical([10**400, 1]), IPE, "overflow"),
    ("categorical-negative", lambda: S.categorical([F(1), F(-1), F(1)]), IPE, ">= 0"),
    ("categorical-zero", lambda: S.categorical([0, 0]), IPE, "positive sum"),
    ("categorical-empty", lambda: S.categorical([]), IPE, "positive sum"),
    ("categorical-str", lambda: S.categorical(["a", "b"]), IPE, "numbers"),
    ("categorical-none", lambda: S.categorical([None, 1]), IPE, "numbers"),
    ("categorical-bool", lambda: S.categorical([True, False]), IPE, "finite numbers"),
    ("categorical-tuple-inf", lambda: S.categorical((math.inf, 1.0)), IPE, "finite"),
    ("bernoulli-above", lambda: S.bernoulli(F(3, 2)), IPE, "lie in [0, 1]"),
    ("bernoulli-neg", lambda: S.bernoulli(-0.1), IPE, "lie in [0, 1]"),
    ("bernoulli-nan", lambda: S.bernoulli(math.nan), IPE, "lie in [0, 1]"),
    ("bernoulli-inf", lambda: S.bernoulli(math.inf), IPE, "lie in [0, 1]"),
    ("bernoulli-str", lambda: S.bernoulli("0.5"), IPE, "lie in [0, 1]"),
    ("bernoulli-none", lambda: S.bernoulli(None), IPE, "lie in [0, 1]"),
    ("bernoulli-bool", lambda: S.bernoulli(True), IPE, "lie in [0, 1]"),
    ("choose-empty", lambda: S.choose([]), IPE, "at least one option"),
    ("choose-policy-out", lambda: dr.Sampler(0, scheduler=_const_policy(5)).choose("ab"), IPE,
     "index 5"),
    ("choose-policy-neg", lambda: dr.Sampler(0, scheduler=_const_policy(-1)).choose("ab"), IPE,
     "index -1"),
    ("choose-policy-float", lambda: dr.Sampler(0, scheduler=_const_policy(0.5)).choose("ab"),
     IPE, "index 0.5"),
    ("choose-policy-none", lambda: dr.Sampler(0, scheduler=_const_policy(None)).choose("ab"),
     IPE, "index None"),
    ("keyed-uniform-seed-str", lambda: dr.keyed_uniform("0", ("k",)), IPE, "seed"),
    ("keyed-uniform-seed-float", lambda: dr.keyed_uniform(0.5, ("k",)), IPE, "seed"),
    # -- latency ---------------------------------------------------------------------------
    ("latency-target-inf", _latency(target=math.inf), IPE, "finite"),
    ("latency-target-nan", _latency(target=math.nan), IPE, "finite"),
    ("latency-drafter-inf", _latency(drafter=math.inf), IPE, "finite"),
    ("latency-drafter-zero", _latency(drafter=F(0)), IPE, "> 0"),
    ("latency-drafter-neg", _latency(drafter=-0.5), IPE, "> 0"),
    ("latency-target-str", _latency(target="1"), IPE, "expected a number"),
    ("latency-target-bool", _latency(target=True), IPE, "expected a number"),
    ("latency-target-none", _latency(target=None), IPE, "expected a number"),
    ("latency-first-inf", _latency(target_first=math.inf), IPE, "finite"),
    ("latency-first-str", _latency(target_first="slow"), IPE, "expected a number"),
    ("latency-law-empty", _latency(target={}), IPE, "empty latency distribution"),
    ("latency-law-sum", _latency(target={F(1): F(1, 2)}), IPE, "sum to 1/2"),
    ("latency-law-value-zero", _latency(target={F(0): F(1)}), IPE, "must be > 0"),
    ("latency-law-value-inf", _latency(target={math.inf: F(1)}), IPE, "finite"),
    ("latency-law-value-str", _latency(target={"a": F(1)}), IPE, "latency value 'a'"),
    ("latency-law-prob-nan", _latency(drafter={F(1): math.nan}), IPE, "probability nan"),
    ("latency-law-prob-str", _latency(drafter={F(1): "1"}), IPE, "probability '1'"),
    ("latency-law-prob-zero", _latency(drafter={F(1): 0, F(2): 1}), IPE, "probability 0"),
    ("latency-from-ms-inf", lambda: dr.Latency.from_ms(target_ttft=math.inf, target_tpot=1,
                                                       drafter_ttft=1, drafter_tpot=0.1),
     IPE, "finite"),
    # -- decoders --------------------------------------------------------------------------
    ("ar-rng-numpy", lambda: dr.autoregressive(T, (), 2, np.random.default_rng(0)), IPE,
     "rng must be a dsi_ref.Randomness"),
    ("ar-rng-int", lambda: dr.autoregressive(T, (), 2, 0), IPE, "dsi_ref.Sampler(seed)"),
    ("ar-rng-none", lambda: dr.autoregressive(T, (), 2, None), IPE, "rng must be"),
    ("ar-target-not-model", lambda: dr.autoregressive(HALF, (), 2, S), IPE,
     "target is not a LanguageModel"),
    ("ar-prompt-token-big", lambda: dr.autoregressive(T, (2,), 2, S), IPE, "prompt token 2"),
    ("ar-prompt-token-neg", lambda: dr.autoregressive(T, (-1,), 2, S), IPE, "prompt token -1"),
    ("ar-prompt-token-float", lambda: dr.autoregressive(T, (1.0,), 2, S), IPE,
     "prompt token 1.0"),
    ("ar-prompt-token-bool", lambda: dr.autoregressive(T, (True,), 2, S), IPE,
     "prompt token True"),
    ("ar-prompt-token-str", lambda: dr.autoregressive(T, ("0",), 2, S), IPE, "prompt token '0'"),
    ("ar-prompt-int", lambda: dr.autoregressive(T, 0, 2, S), IPE, "prompt must be a sequence"),
    ("ar-prompt-str", lambda: dr.autoregressive(T, "01", 2, S), IPE, "prompt must be a seq"),
    ("ar-prompt-none", lambda: dr.autoregressive(T, None, 2, S), IPE, "prompt must be a seq"),
    ("ar-n-neg", lambda: dr.autoregressive(T, (), -1, S), IPE, "max_new_tokens"),
    ("ar-n-float", lambda: dr.autoregressive(T, (), 2.0, S), IPE, "max_new_tokens"),
    ("ar-n-bool", lambda: dr.autoregressive(T, (), True, S), IPE, "max_new_tokens"),
    ("ar-n-str", lambda: dr.autoregressive(T, (), "2", S), IPE, "max_new_tokens"),
    ("ar-n-inf", lambda: dr.autoregressive(T, (), math.inf, S), IPE, "max_new_tokens"),
    ("ar-latency-str", lambda: dr.autoregressive(T, (), 2, S, latency="fast"), IPE,
     "latency must be a dsi_ref.Latency"),
    ("ar-latency-zero", lambda: dr.autoregressive(T, (), 2, S, latency=0), IPE,
     "latency must be a dsi_ref.Latency"),
    ("ar-greedy-str", lambda: dr.autoregressive(T, (), 2, S, greedy="yes"), IPE, "greedy"),
    ("si-lookahead-0", lambda: dr.speculative(T, D, (), 2, S, lookahead=0), IPE, "lookahead"),
    ("si-lookahead-float", lambda: dr.speculative(T, D, (), 2, S, lookahead=2.0), IPE,
     "lookahead"),
    ("si-lookahead-bool", lambda: dr.speculative(T, D, (), 2, S, lookahead=True), IPE,
     "lookahead"),
    ("si-lookahead-none", lambda: dr.speculative(T, D, (), 2, S, lookahead=None), IPE,
     "lookahead"),
    ("si-verify-bogus", lambda: dr.speculative(T, D, (), 2, S, verify="bogus"), IPE,
     "verify must be one of"),
    ("si-verify-int", lambda: dr.speculative(T, D, (), 2, S, verify=1), IPE, "verify must be"),
    ("si-verify-none", lambda: dr.speculative(T, D, (), 2, S, verify=None), IPE,
     "verify must be"),
    ("si-latency-dict", lambda: dr.speculative(T, D, (), 2, S, latency={"c": 1}), IPE,
     "latency must be"),
    ("si-vocab-mismatch", lambda: dr.speculative(T, T3, (), 2, S), IPE, "vocabularies differ"),
    ("si-eos-mismatch", lambda: dr.speculative(T, T_EOS, (), 2, S), IPE, "disagree on EOS"),
    ("si-drafter-not-model", lambda: dr.speculative(T, "d", (), 2, S), IPE,
     "drafter is not a LanguageModel"),
    ("si-rng-numpy", lambda: dr.speculative(T, D, (), 2, np.random.default_rng(0)), IPE,
     "rng must be"),
    ("si-prompt-token", lambda: dr.speculative(T, D, (np.int64(7),), 2, S), IPE,
     "prompt token"),
    ("si-config-lookahead", lambda: dr.SpeculativeConfig(0), IPE, "lookahead"),
    ("si-config-verify", lambda: dr.SpeculativeConfig(1, "bogus"), IPE, "verify"),
    ("si-config-latency", lambda: dr.SpeculativeConfig(1, latency=1), IPE, "latency"),
    ("dsi-sp-0", lambda: dr.dsi(T, D, (), 2, S, sp_degree=0), IPE, "sp_degree"),
    ("dsi-sp-float", lambda: dr.dsi(T, D, (), 2, S, sp_degree=2.5), IPE, "sp_degree"),
    ("dsi-sp-bool", lambda: dr.dsi(T, D, (), 2, S, sp_degree=True), IPE, "sp_degree"),
    ("dsi-lookahead-neg", lambda: dr.dsi(T, D, (), 2, S, lookahead=-1), IPE, "lookahead"),
    ("dsi-queue-bogus", lambda: dr.dsi(T, D, (), 2, S, queue="bogus"), IPE,
     "queue must be one of"),
    ("dsi-queue-none", lambda: dr.dsi(T, D, (), 2, S, queue=None), IPE, "queue"),
    ("dsi-queue-list", lambda: dr.dsi(T, D, (), 2, S, queue=["fifo"]), IPE, "queue"),
    ("dsi-drafts-at", lambda: dr.dsi(T, D, (), 2, S, sample_drafts_at="middle"), IPE,
     "sample_drafts_at"),
    ("dsi-record-int", lambda: dr.dsi(T, D, (), 2, S, record=1), IPE, "record"),
    ("dsi-verify-bogus", lambda: dr.dsi(T, D, (), 2, S, verify="bogus"), IPE, "verify"),
    ("dsi-latency-str", lambda: dr.dsi(T, D, (), 2, S, latency="x"), IPE, "latency"),
    ("dsi-rng-numpy", lambda: dr.dsi(T, D, (), 2, np.random.default_rng(0)), IPE,
     "rng must be"),
    ("dsi-rng-class", lambda: dr.dsi(T, D, (), 2, dr.Sampler), IPE, "rng must be"),
    ("dsi-vocab-mismatch", lambda: dr.dsi(T, T3, (), 2, S), IPE, "vocabularies differ"),
    ("dsi-n-neg", lambda: dr.dsi(T, D, (), -3, S), IPE, "max_new_tokens"),
    ("dsi-config-sp", lambda: dr.DSIConfig(2, 0), IPE, "sp_degree"),
    ("dsi-config-queue", lambda: dr.DSIConfig(2, 2, queue="stack"), IPE, "queue"),
    # -- statistical audit -----------------------------------------------------------------
    ("audit-on-underpowered", _audit(on_underpowered="bogus"), InvalidAuditError,
     "on_underpowered must be one of"),
    ("audit-on-underpowered-bool", _audit(on_underpowered=True), InvalidAuditError,
     "on_underpowered"),
    ("audit-alpha-0", _audit(alpha=0), InvalidAuditError, "alpha must lie in (0, 1)"),
    ("audit-alpha-1", _audit(alpha=1), InvalidAuditError, "alpha must lie"),
    ("audit-alpha-nan", _audit(alpha=math.nan), InvalidAuditError, "alpha must lie"),
    ("audit-alpha-str", _audit(alpha="0.01"), InvalidAuditError, "alpha must lie"),
    ("audit-power-0", _audit(power=0), InvalidAuditError, "power must lie"),
    ("audit-power-above", _audit(power=1.5), InvalidAuditError, "power must lie"),
    ("audit-n-0", _audit(n_samples=0), InvalidAuditError, "n_samples"),
    ("audit-n-float", _audit(n_samples=100.0), InvalidAuditError, "n_samples"),
    ("audit-n-bool", _audit(n_samples=True), InvalidAuditError, "n_samples"),
    ("audit-seed-neg", _audit(seed=-1), InvalidAuditError, "seed must be an int >= 0"),
    ("audit-seed-none", _audit(seed=None), InvalidAuditError, "seed"),
    ("audit-seed-str", _audit(seed="0"), InvalidAuditError, "seed"),
    ("audit-min-expected-0", _audit(min_expected=0), InvalidAuditError, "min_expected"),
    ("audit-min-expected-inf", _audit(min_expected=math.inf), InvalidAuditError,
     "min_expected"),
    ("audit-top-neg", _audit(top=-1), InvalidAuditError, "top"),
    ("audit-alternative-float", _audit(alternative=0.1), InvalidAuditError,
     "alternative must be an Alternative"),
    ("audit-progress-str", _audit(progress="tqdm"), InvalidAuditError, "progress"),
    ("audit-sample-fn", lambda: dr.statistical_audit("decoder", LAW), InvalidAuditError,
     "sample_fn"),
    ("audit-law-empty", lambda: dr.statistical_audit(_sample, {}), InvalidAuditError,
     "non-empty mapping"),
    ("audit-law-list", lambda: dr.statistical_audit(_sample, [F(1)]), InvalidAuditError,
     "non-empty mapping"),
    ("audit-law-sum", lambda: dr.statistical_audit(_sample, {(0,): F(1, 2)}),
     InvalidAuditError, "sum to 0.5"),
    ("audit-law-neg", lambda: dr.statistical_audit(_sample, {(0,): 2, (1,): -1}),
     InvalidAuditError, "finite number >= 0"),
    ("audit-law-nan", lambda: dr.statistical_audit(_sample, {(0,): math.nan}),
     InvalidAuditError, "finite number"),
    ("audit-outcome-dict", lambda: dr.statistical_audit(lambda s: {"tokens": (0,)}, LAW,
                                                        n_samples=500,
                                                        on_underpowered="report"),
     InvalidAuditError, "sample_fn returned an unhashable value"),
    ("audit-outcome-set", lambda: dr.statistical_audit(lambda s: [{0}], LAW, n_samples=500,
                                                       on_underpowered="report"),
     InvalidAuditError, "sample_fn returned an unhashable value"),
    ("alternative-tv-0", lambda: dr.Alternative.tv(0), InvalidAuditError, "epsilon"),
    ("alternative-tv-2", lambda: dr.Alternative.tv(2), InvalidAuditError, "epsilon"),
    ("alternative-tv-nan", lambda: dr.Alternative.tv(math.nan), InvalidAuditError, "epsilon"),
    ("alternative-tv-str", lambda: dr.Alternative.tv("0.1"), InvalidAuditError, "epsilon"),
    ("alternative-neither", lambda: dr.Alternative(), InvalidAuditError, "exactly one"),
    ("alternative-law-empty", lambda: dr.Alternative.of_law({}), InvalidAuditError,
     "non-empty mapping"),
    ("alternative-law-list", lambda: dr.Alternative.of_law([1]), InvalidAuditError,
     "mapping"),
    # -- latency simulator -----------------------------------------------------------------
    ("el-algorithm", _expected(algorithm="bogus"), IPE, "algorithm must be one of"),
    ("el-model", _expected(model="bogus"), IPE, "model must be one of"),
    ("el-c-0", _expected(c=0), IPE, "c must be finite and > 0"),
    ("el-c-inf", _expected(c=math.inf), IPE, "c must be finite"),
    ("el-c-str", _expected(c="0.1"), IPE, "c must be a number"),
    ("el-c-bool", _expected(c=True), IPE, "c must be a number"),
    ("el-a-above", _expected(a=F(3, 2)), IPE, "acceptance rate a"),
    ("el-a-nan", _expected(a=math.nan), IPE, "acceptance rate a"),
    ("el-lookahead-0", _expected(lookahead=0), IPE, "lookahead"),
    ("el-lookahead-float", _expected(lookahead=2.5), IPE, "lookahead"),
    ("el-lookahead-missing", lambda: dr.expected_latency("si", c=0.1, a=0.5, n_tokens=2), IPE,
     "needs a lookahead"),
    ("el-lookahead-twice", _expected(k=2), IPE, "give the lookahead once"),
    ("el-n-0", _expected(n_tokens=0), IPE, "n_tokens"),
    ("el-n-float", _expected(n_tokens=2.7), IPE, "n_tokens"),
    ("el-n-bool", _expected(n_tokens=True), IPE, "n_tokens"),
    ("el-sp-0", _expected(algorithm="dsi", model="event", sp_degree=0), IPE, "sp_degree"),
    ("el-sp-float", _expected(algorithm="dsi", model="event", sp_degree=2.7), IPE,
     "sp_degree"),
    ("el-event-no-sp", _expected(algorithm="dsi", model="event"), IPE, "pass"),
    ("el-queue", _expected(algorithm="dsi", model="event", sp_degree=2, queue="stack"), IPE,
     "queue must be one of"),
    ("el-target-first-neg", _expected(target_first=-1), IPE, "target_first"),
    ("el-drafter-first-inf", _expected(drafter_first=math.inf), IPE, "drafter_first"),
    ("el-verify-cost-0", _expected(verify_cost=0), IPE, "verify_cost"),
    ("el-contention-str", _expected(algorithm="dsi", model="event", sp_degree=2,
                                    contention="shared"), IPE, "contention must be"),
    ("el-insufficient", _expected(algorithm="dsi", sp_degree=1),
     dr.InsufficientServersError, "SP"),
    ("sim-n-repeats-0", _simulate(n_repeats=0), IPE, "n_repeats"),
    ("sim-seed-neg", _simulate(seed=-1), IPE, "seed must be an int >= 0"),
    ("sim-seed-float", _simulate(seed=1.5), IPE, "seed"),
    ("sim-seed-str", _simulate(seed="0"), IPE, "seed"),
    ("sim-c-nan", _simulate(c=math.nan), IPE, "c must be finite"),
    ("contention-empty", lambda: dr.Contention(()), IPE, "non-empty tuple"),
    ("contention-first", lambda: dr.Contention((2.0,)), IPE, "must be 1"),
    ("contention-inf", lambda: dr.Contention((1.0, math.inf)), IPE, "finite numbers"),
    ("contention-list", lambda: dr.Contention([1.0]), IPE, "non-empty tuple"),
    ("contention-times-empty", lambda: dr.Contention.from_times([], [1.0]), IPE,
     "non-empty sequence"),
    ("contention-times-zero", lambda: dr.Contention.from_times([0.0, 1.0], [1.0]), IPE,
     "finite and > 0"),
    ("contention-times-str", lambda: dr.Contention.from_times("12", [1.0]), IPE,
     "non-empty sequence"),
    ("required-servers-c-0", lambda: required_servers(0, 2), IPE, "c must be finite and > 0"),
    ("required-servers-k-0", lambda: required_servers(F(1, 2), 0), IPE, "lookahead"),
    ("heatmap-spec-ndim", lambda: HeatmapSpec(ndim=0), IPE, "ndim"),
    ("heatmap-spec-model", lambda: HeatmapSpec(ndim=2, model="bogus"), IPE, "model"),
    ("heatmap-spec-set", lambda: HeatmapSpec(ndim=2, si_lookahead_set="all"), IPE,
     "si_lookahead_set"),
    ("heatmap-jobs-0", lambda: compute_heatmap(HeatmapSpec(ndim=2), jobs=0), IPE, "jobs"),
    ("heatmap-spec-dict", lambda: compute_heatmap({"ndim": 2}), IPE, "HeatmapSpec"),
    ("table-row-sp-float", _row(sp_degree=2.7), IPE, "sp_degree"),
    ("table-row-lookahead-0", _row(lookahead=0), IPE, "lookahead"),
    ("table-row-tpot-0", _row(target_tpot_ms=0), IPE, "target_tpot_ms must be > 0"),
    ("table-row-tpot-str", _row(target_tpot_ms="fast"), IPE, "must be a number"),
    ("table-row-tpot-inf", _row(target_tpot_ms=math.inf), IPE, "must be a number"),
    ("table-row-tpot-div0", _row(target_tpot_ms="1/0"), IPE, "must be a number"),
    ("table-row-a-above", _row(acceptance_rate=F(3, 2)), IPE, "acceptance_rate"),
    ("table-row-name", _row(name=""), IPE, "name"),
    ("compute-row-jobs", lambda: compute_row(PHI3_MBPP, n_tokens=2, lookaheads=[1],
                                             sp_degrees=[2], jobs=0), IPE, "jobs"),
    ("compute-row-empty", lambda: compute_row(PHI3_MBPP, n_tokens=2, lookaheads=[],
                                              sp_degrees=[2]), IPE, "lookaheads must not"),
    ("compute-row-sp-0", lambda: compute_row(PHI3_MBPP, n_tokens=2, lookaheads=[1],
                                             sp_degrees=[0]), IPE, "sp_degrees"),
    # -- laws (the exact engine's own entry checks are another part of #13) ----------------
    ("target-dist-n-neg", lambda: dr.target_distribution(T, (), -1), IPE, "max_new_tokens"),
    ("target-dist-not-model", lambda: dr.target_distribution("t", (), 2), IPE,
     "target is not a LanguageModel"),
    ("target-dist-prompt", lambda: dr.target_distribution(T, (True,), 2), IPE, "prompt token"),
    ("check-lossless-n", lambda: dr.check_lossless(lambda r: (), T, (), 1.5), IPE,
     "max_new_tokens"),
    ("assert-lossless-model", lambda: dr.assert_lossless(lambda r: (), "T", (), 1), IPE,
     "target is not a LanguageModel"),
    # -- the exact engine's own entry checks -----------------------------------------------
    ("exact-program-int", lambda: dr.exact_distribution(5), InvalidAuditError,
     "must be a callable"),
    ("check-lossless-program-int", lambda: dr.check_lossless(5, T, (), 1), InvalidAuditError,
     "must be a callable"),
    ("exact-keyed-int", lambda: dr.exact_distribution(lambda r: r.bernoulli(F(1, 2)), keyed=1),
     InvalidAuditError, "keyed must be True or False"),
    ("exact-merge-str", lambda: dr.exact_distribution(lambda r: 0, merge="no"),
     InvalidAuditError, "merge must be True or False"),
    ("exact-progress-int", lambda: dr.exact_distribution(lambda r: 0, progress=1),
     InvalidAuditError, "progress must be True or False"),
    ("exact-max-paths-0", lambda: dr.exact_distribution(lambda r: 0, max_paths=0),
     InvalidAuditError, "max_paths"),
    ("exact-max-choices-float", lambda: dr.exact_distribution(lambda r: 0, max_choices=2.5),
     InvalidAuditError, "max_choices"),
    ("exact-witness-bogus", lambda: dr.exact_distribution(lambda r: 0, witness="all"),
     InvalidAuditError, "witness must be one of"),
    ("exact-scheduler-bogus", lambda: dr.exact_distribution(lambda r: 0, scheduler="random"),
     InvalidAuditError, "scheduler must be one of"),
    ("exact-outcome-dict", lambda: dr.exact_distribution(lambda r: {"a": r.bernoulli(F(1, 2))}),
     InvalidAuditError, "unhashable value"),
    ("exact-outcome-set-in-list", lambda: dr.exact_distribution(lambda r: [{1}]),
     InvalidAuditError, "unhashable value"),
    ("exact-categorical-inf", lambda: dr.exact_distribution(lambda r: r.categorical([math.inf, 1])),
     IPE, "finite numbers >= 0"),
    ("exact-categorical-nan", lambda: dr.exact_distribution(lambda r: r.categorical([math.nan, 1])),
     IPE, "finite numbers >= 0"),
    ("exact-categorical-str", lambda: dr.exact_distribution(lambda r: r.categorical(["1", 1])),
     IPE, "must be numbers"),
    ("exact-categorical-bool", lambda: dr.exact_distribution(lambda r: r.categorical([True, 1])),
     IPE, "finite numbers >= 0"),
    ("exact-categorical-overflow",
     lambda: dr.exact_distribution(lambda r: r.categorical([1e308, 1e308])), IPE, "overflow"),
    ("exact-bernoulli-str", lambda: dr.exact_distribution(lambda r: r.bernoulli("x")), IPE,
     "lie in [0, 1]"),
    ("exact-bernoulli-nan", lambda: dr.exact_distribution(lambda r: r.bernoulli(math.nan)), IPE,
     "lie in [0, 1]"),
    ("exact-bernoulli-bool", lambda: dr.exact_distribution(lambda r: r.bernoulli(True)), IPE,
     "lie in [0, 1]"),
    ("exact-choose-empty", lambda: dr.exact_distribution(lambda r: r.choose([])), IPE,
     "at least one option"),
    ("exact-policy-index", lambda: dr.exact_distribution(lambda r: r.choose("ab"),
                                                         scheduler=_const_policy(2)),
     IPE, "index 2"),
    ("exact-expectation-str", lambda: dr.exact_expectation(lambda r: "x"), InvalidAuditError,
     "returns numbers"),
    ("exact-expectation-tuple", lambda: dr.exact_expectation(lambda r: (1,)),
     InvalidAuditError, "returns numbers"),
    ("total-variation-list", lambda: dr.total_variation([1], {}), InvalidAuditError,
     "must be a law"),
    ("total-variation-q-none", lambda: dr.total_variation({}, None), InvalidAuditError,
     "q must be a law"),
    # -- output checks ---------------------------------------------------------------------
    ("check-output-empty", lambda: check_output(""), IPE, "must not be empty"),
    # -- issue 24: a sampler that returns None (was a silent "lossy"), the string helpers ----
    ("statistical-audit-returns-none", lambda: dr.statistical_audit(
        lambda s: None, LAW, 100, on_underpowered="report"), InvalidAuditError,
     "sample_fn returned None for seed"),
    ("sample-fn-returns-none", lambda: dr.sample_fn(lambda rng: None)(0), InvalidAuditError,
     "the program returned None for seed 0"),
    ("sample-fn-not-callable", lambda: dr.sample_fn(None), InvalidAuditError,
     "program must be a function"),
    ("conditional-law-impossible", lambda: dr.conditional_law({(0,): F(1)}, (1,), 2), IPE,
     "no block of positive probability continues (1,)"),
    ("check-lossless-strings-tolerance", lambda: dr.check_lossless_strings(
        lambda rng: (0,), T, dr.Tokenizer(("a", "b")), (), 1, float_tolerance=-1), IPE,
     "float_tolerance"),
]


@pytest.mark.parametrize(("call", "error", "fragment"),
                         [pytest.param(c, e, f, id=i) for i, c, e, f in API_CASES])
def test_api_refuses_bad_input_with_a_named_error(call: Callable[[], object],
                                                  error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=re.escape(fragment)) as info:
        call()
    assert type(info.value).__module__ == errors.__name__, \
        f"{type(info.value).__name__} is not one of dsi_ref.base.errors' named errors"


def test_catalogue_ids_are_unique() -> None:
    ids = [case[0] for case in API_CASES]
    assert len(ids) == len(set(ids))


# -- files for the rows readers and the CLI ------------------------------------------------
GOOD_ROW = ("name = \"r\"\ntarget_ttft_ms = 2\ntarget_tpot_ms = 1\ndrafter_ttft_ms = 1\n"
            "drafter_tpot_ms = 0.1\nacceptance_rate = 0.5\n")
CSV_HEADER = "name,target_ttft_ms,target_tpot_ms,drafter_ttft_ms,drafter_tpot_ms,acceptance_rate"
ROWS_FILES: dict[str, tuple[str, str]] = {
    # name: (file content, fragment of the error)
    "sp_float.toml": (f"[[row]]\n{GOOD_ROW}sp_degree = 2.7\n", "sp_degree must be an int"),
    "sp_float_int.toml": (f"[[row]]\n{GOOD_ROW}sp_degree = 2.0\n", "sp_degree must be an int"),
    "sp_bool.toml": (f"[[row]]\n{GOOD_ROW}sp_degree = true\n", "sp_degree must be an int"),
    "lookahead_str.toml": (f"[[row]]\n{GOOD_ROW}lookahead = \"five\"\n",
                           "lookahead must be an int"),
    "empty.toml": ("", "expected one or more [[row]] tables"),
    "no_rows.toml": ("title = \"x\"\n", "expected one or more [[row]] tables"),
    "row_not_table.toml": ("row = [1, 2]\n", "expected one or more [[row]] tables"),
    "syntax.toml": ("[[row]\nname = \n", "not a valid TOML file"),
    "missing.toml": ("[[row]]\nname = \"r\"\n", "missing fields"),
    "unknown.toml": (f"[[row]]\n{GOOD_ROW}colour = \"red\"\n", "unknown fields ['colour']"),
    "a_above.toml": (f"[[row]]\n{GOOD_ROW}".replace("0.5", "1.5"), "acceptance_rate"),
    "tpot_zero.toml": (f"[[row]]\n{GOOD_ROW}".replace("target_tpot_ms = 1",
                                                      "target_tpot_ms = 0"), "must be > 0"),
    "empty.csv": ("", "no rows"),
    "header_only.csv": (CSV_HEADER + "\n", "no rows"),
    "sp_float.csv": (CSV_HEADER + ",sp_degree\nr,2,1,1,0.1,0.5,2.7\n",
                     "sp_degree must be an int"),
    "too_many.csv": (CSV_HEADER + "\nr,2,1,1,0.1,0.5,9\n", "more values than the header"),
    "missing.csv": ("name,target_ttft_ms\nr,2\n", "missing fields"),
    "bad_number.csv": (CSV_HEADER + "\nr,2,fast,1,0.1,0.5\n", "must be a number"),
    "binary.csv": ("\udcff", "not a valid CSV file"),
    "rows.txt": (GOOD_ROW, "must be a .toml or .csv file"),
}


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("name", sorted(ROWS_FILES))
def test_read_rows_refuses_bad_files(tmp_path: Path, name: str) -> None:
    content, fragment = ROWS_FILES[name]
    _write(tmp_path / name, content)
    with pytest.raises(IPE, match=re.escape(fragment)):
        read_rows(tmp_path / name)


# -- the CLI -------------------------------------------------------------------------------
# Placeholders: {tmp} is a fresh folder, {file} an existing file in it (its content must
# survive), {rows:<name>} a rows file of ROWS_FILES written there.
CLI_CASES: list[tuple[str, list[str], str]] = [
    ("no-command", [], "required: COMMAND"),
    ("unknown-command", ["bogus"], "invalid choice: 'bogus'"),
    ("audit-unknown-flag", ["audit", "--bogus"], "unrecognized arguments: --bogus"),
    ("audit-unknown-section", ["audit", "--section", "bogus"], "unknown section(s): bogus"),
    ("audit-json-no-folder", ["audit", "--section", "decoders", "--json", "{tmp}/no/x.json"],
     "does not exist"),
    ("audit-json-folder", ["audit", "--section", "decoders", "--json", "{tmp}"], "is a folder"),
    ("audit-json-under-file", ["audit", "--section", "decoders", "--json", "{file}/x.json"],
     "does not exist"),
    ("audit-json-empty", ["audit", "--section", "decoders", "--json", ""], ""),
    ("heatmap-ndim-0", ["heatmap", "--ndim", "0"], "--ndim: expected an int >= 1"),
    ("heatmap-ndim-x", ["heatmap", "--ndim", "x"], "--ndim: expected an int >= 1"),
    ("heatmap-ndim-float", ["heatmap", "--ndim", "2.5"], "--ndim"),
    ("heatmap-n-0", ["heatmap", "--n-tokens", "0"], "--n-tokens"),
    ("heatmap-sp-0", ["heatmap", "--sp-degree", "0"], "--sp-degree"),
    ("heatmap-sp-neg", ["heatmap", "--sp-degree", "2", "-1"], "--sp-degree"),
    ("heatmap-jobs-0", ["heatmap", "--jobs", "0"], "--jobs"),
    ("heatmap-model", ["heatmap", "--model", "bogus"], "--model: invalid choice"),
    ("heatmap-set", ["heatmap", "--si-lookahead-set", "all"], "--si-lookahead-set"),
    ("heatmap-two-sets", ["heatmap", "--fair", "--paper-quirks"], "not allowed with"),
    ("heatmap-out-file", ["heatmap", "--ndim", "2", "--no-plot", "--no-progress", "--out",
                          "{file}"], "is not a folder"),
    ("heatmap-out-under-file", ["heatmap", "--ndim", "2", "--no-plot", "--no-progress",
                                "--out", "{file}/sub"], "is a file"),
    ("table-n-0", ["table", "--n-tokens", "0"], "--n-tokens"),
    ("table-n-neg", ["table", "--n-tokens", "-3"], "--n-tokens"),
    ("table-lookaheads-0", ["table", "--lookaheads", "0"], "--lookaheads: expected ints >= 1"),
    ("table-lookaheads-empty-range", ["table", "--lookaheads", "5-1"], "--lookaheads"),
    ("table-lookaheads-letters", ["table", "--lookaheads", "a-b"], "--lookaheads"),
    ("table-lookaheads-hole", ["table", "--lookaheads", "1,,2"], "--lookaheads"),
    ("table-sp-0", ["table", "--sp-degrees", "0-2"], "--sp-degrees"),
    ("table-sp-float", ["table", "--sp-degrees", "2.5"], "--sp-degrees"),
    ("table-jobs-0", ["table", "--jobs", "0"], "--jobs"),
    ("table-rows-missing", ["table", "--no-plot", "--rows", "{tmp}/none.toml", "--out",
                            "{tmp}/out"], "No such file"),
    ("table-rows-folder", ["table", "--no-plot", "--rows", "{tmp}", "--out", "{tmp}/out"],
     "must be a .toml or .csv file"),
    ("table-rows-folder-toml", ["table", "--no-plot", "--rows", "{tmp}/d.toml", "--out",
                                "{tmp}/out"], "Is a directory"),
    ("table-out-file", ["table", "--no-plot", "--n-tokens", "2", "--out", "{file}"],
     "is not a folder"),
    *[(f"table-rows-{name}", ["table", "--no-plot", "--no-progress", "--n-tokens", "2",
                              "--lookaheads", "1", "--sp-degrees", "2", "--rows",
                              f"{{rows:{name}}}", "--out", "{tmp}/out"], fragment)
      for name, (_, fragment) in sorted(ROWS_FILES.items())],
    ("theorems-unknown", ["theorems", "--theorem", "bogus"], "unknown theorem(s): bogus"),
    ("theorems-flag", ["theorems", "--bogus"], "unrecognized arguments"),
    ("timeline-tokens-0", ["timeline", "--tokens", "0"], "--tokens"),
    ("timeline-tokens-x", ["timeline", "--tokens", "x"], "--tokens"),
    ("timeline-seed-neg", ["timeline", "--seed", "-1"], "--seed: expected an int >= 0"),
    ("timeline-lookahead-0", ["timeline", "--lookahead", "0"], "--lookahead"),
    ("timeline-sp-0", ["timeline", "--sp-degree", "0"], "--sp-degree"),
    ("timeline-cost-0", ["timeline", "--drafter-cost", "0"], "a cost must be > 0"),
    ("timeline-cost-x", ["timeline", "--drafter-cost", "x"], "expected a number"),
    ("timeline-cost-div0", ["timeline", "--drafter-cost", "1/0"], "expected a number"),
    ("timeline-cost-inf", ["timeline", "--target-cost", "inf"], "expected a number"),
    ("timeline-first-neg", ["timeline", "--target-first", "-1"], "a cost must be > 0"),
    ("timeline-verify", ["timeline", "--verify", "bogus"], "--verify: invalid choice"),
    ("timeline-queue", ["timeline", "--queue", "stack"], "--queue: invalid choice"),
    ("timeline-model", ["timeline", "--model", "bogus"], "--model: invalid choice"),
    ("timeline-out-no-folder", ["timeline", "--tokens", "2", "--out", "{tmp}/no/t.png"],
     "does not exist"),
    ("timeline-out-folder", ["timeline", "--tokens", "2", "--out", "{tmp}"], "is a folder"),
    # issue 24: 100,000 tokens ran for minutes in silence; a .txt ended in matplotlib's traceback
    ("timeline-tokens-huge", ["timeline", "--tokens", "100000"],
     "--tokens: expected an int <= 1000 (the limit of a timeline), got '100000'"),
    ("timeline-out-txt", ["timeline", "--tokens", "2", "--out", "{tmp}/x.txt"],
     "a figure is written as .png, .pdf, .svg; got '.txt'"),
    ("timeline-out-no-suffix", ["timeline", "--tokens", "2", "--out", "{tmp}/x"],
     "got no extension"),
    ("bench-json-no-folder", ["bench", "--json", "{tmp}/no/b.json"], "does not exist"),
    ("bench-json-folder", ["bench", "--json", "{tmp}"], "is a folder"),
    ("bench-table-row-no-folder", ["bench", "--table-row", "{tmp}/no/r.csv"], "does not exist"),
    ("bench-lookahead-0", ["bench", "--lookahead", "0"], "--lookahead"),
    ("bench-lookahead-empty", ["bench", "--lookahead", ","], "--lookahead"),
    ("bench-sp-x", ["bench", "--sp-degree", "x"], "--sp-degree"),
    ("bench-new-tokens-0", ["bench", "--new-tokens", "0"], "--new-tokens"),
    ("bench-prompts-0", ["bench", "--prompts", "0"], "--prompts"),
    ("bench-prompt-len-neg", ["bench", "--prompt-len", "-1"], "--prompt-len"),
    ("bench-segments-0", ["bench", "--segments", "0"], "--segments"),
    # a negative budget of replacements started a whole bench on the thread backend
    ("bench-ray-replacements-neg", ["bench", "--ray-replacements", "-1"],
     "--ray-replacements: expected an int >= 0"),
    ("bench-tree-0", ["bench", "--tree", "0,2"], "--tree: expected integers >= 1"),
    ("bench-contention-neg", ["bench", "--contention-forwards", "-1"],
     "--contention-forwards"),
    ("bench-seed-neg", ["bench", "--seed", "-1"], "--seed"),
    ("bench-device", ["bench", "--device", "tpu"], "--device: invalid choice"),
    ("bench-dtype", ["bench", "--dtype", "int8"], "--dtype: invalid choice"),
    ("bench-verify", ["bench", "--verify", "bogus"], "--verify: invalid choice"),
    ("bench-server-devices", ["bench", "--server-devices", ","], "--server-devices"),
]


def _argv(template: list[str], tmp: Path) -> list[str]:
    argv = []
    for arg in template:
        if arg.startswith("{rows:"):
            name = arg[len("{rows:"):-1]
            _write(tmp / name, ROWS_FILES[name][0])
            arg = str(tmp / name)
        argv.append(arg.replace("{tmp}", str(tmp)).replace("{file}", str(tmp / "keep.txt")))
    return argv


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize(("template", "fragment"),
                         [pytest.param(a, f, id=i) for i, a, f in CLI_CASES])
def test_cli_reports_a_users_error_in_one_line_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        template: list[str], fragment: str) -> None:
    monkeypatch.chdir(tmp_path)          # nothing written in the repository either
    (tmp_path / "keep.txt").write_text("precious\n")
    (tmp_path / "d.toml").mkdir()
    argv = _argv(template, tmp_path)
    before = _snapshot(tmp_path)
    try:
        code = cli.main(argv)
    except SystemExit as exit_:          # argparse's usage errors
        code = exit_.code
    captured = capsys.readouterr()
    assert code == 2, (code, captured.out, captured.err)
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dsi-ref: error: "), captured.err
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert _snapshot(tmp_path) == before
    assert not (tmp_path / "out").exists()


def test_catalogue_size() -> None:
    """The issue asks for at least 150 bad inputs, API and CLI together."""
    assert len(API_CASES) + len(ROWS_FILES) + len(CLI_CASES) >= 150


def test_a_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only users' errors are turned into one line: an unexpected exception propagates."""
    def boom(args: object) -> int:
        raise ZeroDivisionError("a bug")
    parser = cli.build_parser()
    args = parser.parse_args(["theorems"])
    args.func = boom
    monkeypatch.setattr(cli, "build_parser", lambda: _Fixed(args))
    with pytest.raises(ZeroDivisionError):
        cli.main(["theorems"])


class _Fixed:
    def __init__(self, args: object) -> None:
        self.args = args

    def parse_args(self, argv: object) -> object:
        return self.args


# -- valid unusual input is accepted -------------------------------------------------------
def test_numpy_integers_are_ints_everywhere() -> None:
    run = dr.dsi(T, D, (np.int64(1), np.int32(0)), np.int64(3), dr.Sampler(np.int64(0)),
                 lookahead=np.int64(2), sp_degree=np.int16(2))
    assert len(run.tokens) == 3
    assert run.tokens == dr.dsi(T, D, (1, 0), 3, dr.Sampler(0), lookahead=2, sp_degree=2).tokens
    si = dr.speculative(T, D, np.array([1, 0]), np.int64(2), dr.Sampler(0),
                        lookahead=np.int64(1))
    assert all(type(t) is int for t in si.tokens)
    assert dr.autoregressive(T, [np.uint8(1)], np.int64(2), dr.Sampler(0)).tokens == \
        dr.autoregressive(T, [1], 2, dr.Sampler(0)).tokens
    model = dr.FunctionLM(np.int64(2), lambda p: HALF, eos=np.int64(1))
    assert model.vocab_size == 2
    assert dr.expected_latency("si", c=F(1, 10), a=F(1, 2), lookahead=np.int64(2),
                               n_tokens=np.int64(4)) == \
        dr.expected_latency("si", c=F(1, 10), a=F(1, 2), lookahead=2, n_tokens=4)
    assert dr.keyed_uniform(np.int64(3), ("k",)) == dr.keyed_uniform(3, ("k",))


def test_fractions_and_numpy_floats_are_numbers() -> None:
    latency = dr.Latency(drafter=np.float64(0.25), target=F(1), target_first=np.float32(2.0),
                         drafter_first={F(1, 4): F(1, 2), F(1, 2): F(1, 2)})
    assert dr.autoregressive(T, (), 2, dr.Sampler(0), latency=latency).time == 3.0
    assert dr.Sampler(0).categorical([F(1, 3), np.float64(0.0), F(2, 3)]) in (0, 2)
    assert dr.Sampler(0).bernoulli(np.float64(1.0)) is True
    assert dr.expected_latency("nonsi", c=np.float64(0.1), a=F(1, 2), n_tokens=3) == 3


def test_tensor_like_outcomes_are_converted_in_the_statistical_audit() -> None:
    """A numpy array (or a torch tensor: anything with ``tolist``) counts as its tuple, so
    arrays and tuples of the same tokens land in the same cell."""
    # not a decision on the sample: only that every array landed in a cell of the law
    report = dr.statistical_audit(lambda s: np.array(_sample(s)), LAW, n_samples=50,
                                  on_underpowered="report")
    assert report.n_samples == 50 and report.impossible == ()
    assert _outcome(np.array([[1, 0]])) == ((1, 0),)
    assert _outcome([np.int64(1), [np.int64(0)]]) == (1, (0,))
    assert all(type(t) is int for t in _outcome(np.array([3, 4])))


def test_array_and_list_outcomes_are_converted_in_the_exact_audit() -> None:
    """The exact audit reads a program's outcome as the statistical audit reads a sample: a
    list or an array (a tensor: anything numpy/torch with ``tolist``) as its tuple of Python
    numbers, so the laws of all three forms are the same dict."""
    as_tuple = dr.exact_distribution(lambda r: dr.autoregressive(T, (), 2, r).tokens)
    assert dr.exact_distribution(lambda r: np.array(dr.autoregressive(T, (), 2, r).tokens)) \
        == as_tuple
    assert dr.exact_distribution(lambda r: list(dr.autoregressive(T, (), 2, r).tokens)) \
        == as_tuple
    law = dr.exact_distribution(lambda r: np.array([r.categorical(HALF)]))
    assert all(type(t) is int for outcome in law for t in outcome)
    # a Run counts as its tokens, as in the statistical audit and check_lossless
    assert dr.exact_distribution(lambda r: dr.autoregressive(T, (), 2, r)) == as_tuple


def test_a_valid_rows_file_and_output_paths_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "ok.toml").write_text(f"[[row]]\n{GOOD_ROW}sp_degree = 3\nlookahead = 2\n")
    (tmp_path / "ok.csv").write_text(CSV_HEADER + ",sp_degree\nr,2,1,1,0.1,0.5, 3 \n")
    assert read_rows(tmp_path / "ok.toml")[0].sp_degree == 3
    assert read_rows(tmp_path / "ok.csv")[0].sp_degree == 3
    assert check_output(tmp_path / "new.json") == tmp_path / "new.json"
    assert check_output(tmp_path / "a" / "b", directory=True) == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists() and not (tmp_path / "new.json").exists()
