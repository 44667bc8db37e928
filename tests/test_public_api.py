"""The public API is a contract: every name users import keeps working across refactors.

`PUBLIC_NAMES` is ``dsi_ref.__all__`` as it stood before the layout was grouped by role
(base/, decoders/, audit/, ...); names may be added, never removed. The public modules that
users import by path, the pytest entry point and the console script are pinned the same way.
"""

from __future__ import annotations

import importlib
import inspect
from fractions import Fraction
from importlib.metadata import entry_points

import pytest

import dsi_ref as dr

#: ``dsi_ref.__all__`` before the renovation: each must stay importable from ``dsi_ref``.
PUBLIC_NAMES = (
    "VERIFY_RULES", "Alternative", "Contention", "DSIConfig", "Decision", "Event", "FunctionLM",
    "InsufficientServersError", "InvalidDistributionError", "InvalidParameterError",
    "LanguageModel", "Latency", "LosslessReport", "NumericalError", "PathLimitError",
    "Randomness", "Run", "Sampler", "ScheduleDependenceError", "SpeculativeConfig",
    "StatisticalReport", "TableLM", "UnderpoweredError", "Witness", "__version__",
    "assert_lossless", "autoregressive", "check_lossless", "dsi", "exact_distribution",
    "exact_expectation", "expected_latency", "keyed_uniform", "simulate_latency", "speculative",
    "statistical_audit", "target_distribution", "total_variation",
    "NondeterministicProgramError",  # issue 13: randomness drawn outside rng
    "merge_point",  # issue 13, item 5: the hint of a free-form decoder
    "SIRun", "DSIRun",  # issue 13, item 5: decoders on the step API merge by themselves
    "tree_speculative", "TREE_VERIFY_RULES",  # issue 14, item 3: multi-draft and tree speculation
    "processed",  # issue 15, item 1: sampling processors as a model (the processed law)
    "Tokenizer", "cross_vocab_speculative", "CROSS_VOCAB_ALGORITHMS",  # issue 15, item 4
    "string_level_drafter", "check_lossless_strings", "target_string_distribution",
    "StringReport",  # issue 15, item 4: the exact audit over output strings
    "recomputed", "incremental", "RepetitionPenalty", "PresencePenalty",  # issue 15, item 2
    "FrequencyPenalty", "GrammarConstraint", "TokenDFA", "ConstraintDeadEndError",
    "assert_lossless_strings",  # issue 24, item 2: one checking API for ids and strings
    "block_law", "shared_tokens", "conditional_law",  # issue 24, item 3: string-level helpers
    "sample_fn",  # issue 24, item 4: a program(rng) as the statistical audit's sample function
    "InvalidAuditError",  # issue 24, item 4: what sample_fn and the statistical audit raise
)

#: Modules users import by their dotted path (documented as public).
PUBLIC_MODULES = ("dsi_ref.strategies", "dsi_ref.pytest_plugin", "dsi_ref.cli", "dsi_ref.sim")


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_every_public_name_is_still_exported(name: str) -> None:
    assert name in dr.__all__, f"{name} left dsi_ref.__all__"
    assert getattr(dr, name) is not None


def test_all_lists_only_names_that_exist() -> None:
    missing = [name for name in dr.__all__ if not hasattr(dr, name)]
    assert not missing, missing


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_public_modules_import_by_their_documented_path(module: str) -> None:
    assert importlib.import_module(module).__name__ == module


def test_strategies_alias_serves_the_same_strategies_as_the_audit_package() -> None:
    alias = importlib.import_module("dsi_ref.strategies")
    real = importlib.import_module("dsi_ref.audit.strategies")
    assert alias.__all__ == real.__all__ and alias.__all__
    for name in alias.__all__:
        assert getattr(alias, name) is getattr(real, name), name


def test_each_error_class_is_defined_once_in_the_errors_module() -> None:
    errors = importlib.import_module("dsi_ref.base.errors")
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert inspect.isclass(cls) and issubclass(cls, Exception)
        assert cls.__module__ == "dsi_ref.base.errors", name
        if hasattr(dr, name):
            assert getattr(dr, name) is cls, f"dsi_ref.{name} is a different class"


def test_pytest_entry_point_and_console_script_are_declared() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("dsi_ref") == "dsi_ref.pytest_plugin"
    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts.get("dsi-ref") == "dsi_ref.cli:main"


def test_the_step_api_is_the_library_s_own_run_classes() -> None:
    from dsi_ref.decoders.dsi import DSIRun
    from dsi_ref.decoders.speculative import SIRun
    assert dr.SIRun is SIRun and dr.DSIRun is DSIRun


def test_the_readme_example_still_runs_on_the_public_names() -> None:
    t = dr.FunctionLM(vocab_size=2, probs=lambda prefix: (Fraction(3, 5), Fraction(2, 5)))
    d = dr.FunctionLM(vocab_size=2, probs=lambda prefix: (Fraction(4, 5), Fraction(1, 5)))
    law = dr.exact_distribution(
        lambda rng: dr.dsi(t, d, (), 3, rng, lookahead=2, sp_degree=2).tokens)
    assert law == dr.target_distribution(t, prompt=(), max_new_tokens=3)
