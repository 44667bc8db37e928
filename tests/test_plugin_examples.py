"""The pytest plugin in a user's suite: its docstring example runs, its fixtures work under
``@given``, its markers pass ``--strict-markers``, and a failure names the pair, the models and
the first diverging prefix with both probabilities.

Every user suite runs in process (`pytest.Pytester.runpytest_inprocess`): the inner run still
loads the plugin through its ``pytest11`` entry point, without a second interpreter.
"""

from __future__ import annotations

import re

import pytest

from dsi_ref import pytest_plugin

pytest_plugins = ["pytester"]


def docstring_example() -> str:
    """The code of the plugin docstring's ``Example ...::`` block, dedented."""
    doc = pytest_plugin.__doc__ or ""
    match = re.search(r"^Example[^\n]*::\n\n((?:    [^\n]*\n|\n)+)", doc, re.M)
    assert match is not None, "the plugin docstring has no 'Example ...::' block"
    return "\n".join(line[4:] for line in match.group(1).splitlines()) + "\n"


def run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_user=source)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--strict-markers", *args)


def test_the_plugin_docstring_example_passes_in_a_user_suite(pytester: pytest.Pytester) -> None:
    source = docstring_example()
    assert "@given(model_pairs(" in source and "max_new_tokens=" in source
    run(pytester, source).assert_outcomes(passed=2)


def test_the_docstring_example_fails_when_its_decoder_is_wrong(pytester: pytest.Pytester
                                                               ) -> None:
    """The example is a real check: swap in a decoder that samples the drafter and both tests
    fail."""
    source = docstring_example().replace(
        "return dr.speculative(target, drafter, prompt, max_new_tokens, rng, lookahead=2)",
        "return dr.autoregressive(drafter, prompt, max_new_tokens, rng)")
    source = source.replace("dr.speculative(target, drafter, (), 2, rng, lookahead)",
                            "dr.autoregressive(drafter, (), 2, rng)")
    run(pytester, source).assert_outcomes(failed=2)


def test_strategies_work_under_given_at_module_level_and_through_the_fixture(
        pytester: pytest.Pytester) -> None:
    """``@given`` with a module-level import, and ``data.draw`` from the session-scoped
    ``dsi_strategies`` fixture: hypothesis refuses neither (it fails a test that feeds a
    function-scoped fixture to ``@given``)."""
    source = '''
from hypothesis import given, settings, strategies as st
from dsi_ref.strategies import model_pairs

@settings(max_examples=5, deadline=None)
@given(model_pairs(max_vocab=3))
def test_module_level(default_suite, pair):
    target, drafter = pair
    assert target.vocab_size == drafter.vocab_size and default_suite

@settings(max_examples=5, deadline=None)
@given(st.data())
def test_fixture_draw(dsi_strategies, check_lossless, data):
    target, drafter = data.draw(dsi_strategies.model_pairs(max_vocab=3))
    assert target.vocab_size == drafter.vocab_size
'''
    run(pytester, source).assert_outcomes(passed=2)


def test_the_documented_markers_are_registered_for_strict_markers(pytester: pytest.Pytester
                                                                  ) -> None:
    source = '''
import pytest

@pytest.mark.statistical(alpha=1e-8)
def test_a():
    pass

@pytest.mark.montecarlo(alpha=1e-9)
def test_b():
    pass
'''
    result = run(pytester, source)
    result.assert_outcomes(passed=2)
    listing = run(pytester, "", "--markers")
    listing.stdout.fnmatch_lines(["@pytest.mark.statistical(alpha):*",
                                  "@pytest.mark.montecarlo(alpha):*"])


def test_an_unregistered_marker_is_still_refused(pytester: pytest.Pytester) -> None:
    """The control: ``--strict-markers`` is on in these user suites."""
    result = run(pytester, "import pytest\n\n@pytest.mark.statisticall\ndef test_a():\n"
                           "    pass\n")
    result.assert_outcomes(errors=1)


WRONG_DECODER = '''
import dsi_ref as dr

def test_wrong_decoder(assert_lossless, default_suite):
    pair = next(p for p in default_suite if p.name == "bigram")
    # the bug: sample the drafter instead of the target
    assert_lossless(lambda rng: dr.autoregressive(pair.drafter, pair.prompt, 2, rng),
                    target=pair.target, prompt=pair.prompt, max_new_tokens=2, pair=pair)

def test_wrong_decoder_with_a_name(assert_lossless, default_suite):
    pair = next(p for p in default_suite if p.name == "bigram")
    assert_lossless(lambda rng: dr.autoregressive(pair.drafter, pair.prompt, 2, rng),
                    target=pair.target, prompt=pair.prompt, max_new_tokens=2, pair="my pair")
'''


def test_a_failure_names_the_pair_the_models_and_the_first_diverging_prefix(
        pytester: pytest.Pytester) -> None:
    from fractions import Fraction as F

    from dsi_ref.audit.suite import default_suite

    pair = next(p for p in default_suite() if p.name == "bigram")
    # the first diverging prefix is the first token: its law is q(.|()) instead of p(.|())
    p0, q0 = pair.target.probs(()), pair.drafter.probs(())
    first = min(tok for tok in range(3) if p0[tok] != q0[tok])
    result = run(pytester, WRONG_DECODER)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        f"*pair 'bigram', target={pair.target!r}, drafter={pair.drafter!r}: LOSSY:*",
        f"*first diverging prefix ({first},): decoder P(starts with it) = {F(q0[first])} *"
        f"target P = {F(p0[first])} *",
        "*worst sequence*",
        f"*pair 'my pair', target={pair.target!r}: LOSSY:*",
    ])
