"""pytest plugin (entry point ``dsi_ref``): test your own decoder the way dsi-ref tests its own.

Fixtures (all session-scoped, so hypothesis accepts them in a ``@given`` test):

* ``assert_lossless`` — `dsi_ref.assert_lossless`: exact law of ``program(rng)`` == target law,
  ``AssertionError`` otherwise, naming the pair (``pair=``) and the models, the first diverging
  prefix with its probability under both laws, and the worst sequence;
* ``check_lossless`` — the same comparison returning a `dsi_ref.LosslessReport`;
* ``assert_lossless_strings``, ``check_lossless_strings`` — `dsi_ref.assert_lossless_strings`
  and `dsi_ref.check_lossless_strings`: the same over output strings (a tokenizer decodes the
  ids), for a decoder whose drafter speaks another vocabulary;
* ``dsi_strategies`` — the module `dsi_ref.strategies` (hypothesis strategies for models, prompts,
  lookaheads, latencies), for ``data.draw(...)`` inside a test. A strategy in ``@given(...)`` is
  built when the module is imported, before any fixture exists: import it there
  (``from dsi_ref.strategies import model_pairs``);
* ``default_suite`` — the toy model pairs that ``dsi-ref audit`` checks every decoder on (a tuple
  of `dsi_ref.audit.suite.ModelPair`: ``name``, ``target``, ``drafter``, ``prompt``,
  ``max_new_tokens``).

Markers it registers (so that ``--strict-markers`` suites accept them):

* ``statistical(alpha=...)`` — a seeded statistical test, with its false-alarm rate;
* ``montecarlo(alpha=...)`` — a seeded Monte Carlo comparison (e.g. a mean within ``z`` standard
  errors of an exact value), with its false-alarm rate.

Example (in a user's test file; no import of the plugin needed)::

    import dsi_ref as dr
    from hypothesis import given, settings
    from dsi_ref.strategies import lookaheads, model_pairs

    def my_decoder(target, drafter, prompt, max_new_tokens, rng):
        return dr.speculative(target, drafter, prompt, max_new_tokens, rng, lookahead=2)

    def test_my_decoder_is_lossless(assert_lossless, default_suite):
        for pair in default_suite:
            assert_lossless(lambda rng: my_decoder(pair.target, pair.drafter, pair.prompt,
                                                   pair.max_new_tokens, rng),
                            target=pair.target, prompt=pair.prompt,
                            max_new_tokens=pair.max_new_tokens, pair=pair)

    @settings(max_examples=10, deadline=None)
    @given(model_pairs(max_vocab=3), lookaheads(3))
    def test_my_decoder_on_generated_models(assert_lossless, pair, lookahead):
        target, drafter = pair
        assert_lossless(lambda rng: dr.speculative(target, drafter, (), 2, rng, lookahead),
                        target=target, prompt=(), max_new_tokens=2)

(`tests/test_plugin_examples.py` runs this example in a user's suite.)
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest

__all__ = ["MARKERS", "assert_lossless", "assert_lossless_strings", "check_lossless",
           "check_lossless_strings", "default_suite", "dsi_strategies", "pytest_configure"]

#: The markers the plugin registers, as ``"name(args): description"`` lines of pytest's ``markers``
#: ini option. The docs tell users to write them; ``--strict-markers`` refuses unregistered ones.
MARKERS = (
    "statistical(alpha): seeded statistical test; alpha is its false-alarm rate (the "
    "probability, over seeds, that a correct implementation fails it)",
    "montecarlo(alpha): seeded Monte Carlo comparison (e.g. a mean within z standard errors of "
    "an exact value); alpha is its false-alarm rate",
)


def pytest_configure(config: pytest.Config) -> None:
    """Register the plugin's markers (`MARKERS`)."""
    for line in MARKERS:
        config.addinivalue_line("markers", line)


@pytest.fixture(scope="session")
def assert_lossless() -> Any:
    """`dsi_ref.assert_lossless`."""
    from .audit.laws import assert_lossless as fn

    return fn


@pytest.fixture(scope="session")
def check_lossless() -> Any:
    """`dsi_ref.check_lossless`."""
    from .audit.laws import check_lossless as fn

    return fn


@pytest.fixture(scope="session")
def assert_lossless_strings() -> Any:
    """`dsi_ref.assert_lossless_strings`."""
    from .audit.strings import assert_lossless_strings as fn

    return fn


@pytest.fixture(scope="session")
def check_lossless_strings() -> Any:
    """`dsi_ref.check_lossless_strings`."""
    from .audit.strings import check_lossless_strings as fn

    return fn


@pytest.fixture(scope="session")
def dsi_strategies() -> ModuleType:
    """The hypothesis strategies of `dsi_ref.strategies` (``data.draw(...)`` in a test; for
    ``@given(...)`` import them at module level)."""
    return importlib.import_module("dsi_ref.strategies")


@pytest.fixture(scope="session")
def default_suite() -> tuple[Any, ...]:
    """The model pairs of ``dsi-ref audit`` (`dsi_ref.audit.suite.default_suite`), as a tuple."""
    from .audit.suite import default_suite as suite

    return tuple(suite())
