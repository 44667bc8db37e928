"""pytest plugin (entry point ``dsi_ref``): test your own decoder the way dsi-ref tests its own.

Fixtures:

* ``assert_lossless`` — `dsi_ref.assert_lossless`: exact law of ``program(rng)`` == target law,
  ``AssertionError`` with the worst sequence otherwise;
* ``check_lossless`` — the same comparison returning a `dsi_ref.LosslessReport`;
* ``dsi_strategies`` — the module `dsi_ref.strategies` (hypothesis strategies for models, prompts,
  lookaheads, latencies);
* ``default_suite`` — the toy model pairs that ``dsi-ref audit`` checks every decoder on.

Example (in a user's test file; no import of the plugin needed)::

    def test_my_decoder_is_lossless(assert_lossless, default_suite):
        for pair in default_suite:
            assert_lossless(lambda rng: my_decoder(pair.target, pair.drafter, rng),
                            target=pair.target, prompt=pair.prompt,
                            max_new_tokens=pair.max_new_tokens)
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest

__all__ = ["assert_lossless", "check_lossless", "default_suite", "dsi_strategies"]


@pytest.fixture
def assert_lossless() -> Any:
    """`dsi_ref.assert_lossless`."""
    from .audit.laws import assert_lossless as fn

    return fn


@pytest.fixture
def check_lossless() -> Any:
    """`dsi_ref.check_lossless`."""
    from .audit.laws import check_lossless as fn

    return fn


@pytest.fixture
def dsi_strategies() -> ModuleType:
    """The hypothesis strategies of `dsi_ref.strategies`."""
    return importlib.import_module("dsi_ref.strategies")


@pytest.fixture
def default_suite() -> list[Any]:
    """The model pairs of ``dsi-ref audit`` (`dsi_ref.audit.suite.default_suite`)."""
    from .audit.suite import default_suite as suite

    return suite()
