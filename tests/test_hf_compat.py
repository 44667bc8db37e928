"""dsi_ref.backends.hf.compat: the KV cache's name in the installed transformers release.

Run on both sides of the rename: the default run uses the locked release (5.24: ``cache``) and
``python3 run.py test --oldest`` the floor in pyproject (5.23: ``past_key_values``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from packaging.version import Version  # noqa: E402
from transformers import DynamicCache  # noqa: E402

from dsi_ref.backends.hf.adapter import AssistedSampler, to_hf  # noqa: E402
from dsi_ref.backends.hf.compat import (  # noqa: E402
    CACHE_NAME,
    cache_argument,
    causal_lm_output,
    forward_with_cache,
    output_cache,
)
from dsi_ref.base.models import TableLM  # noqa: E402

pytestmark = pytest.mark.torch
RENAMED_IN = Version("5.24")   # transformers' release notes: past_key_values -> cache


def test_the_name_read_off_the_release_matches_its_version() -> None:
    # two independent readings: the output class's fields, and the release number
    renamed = Version(transformers.__version__).release >= RENAMED_IN.release
    assert ("cache" if renamed else "past_key_values") == CACHE_NAME


def test_outputs_carry_the_cache_under_the_installed_name() -> None:
    cache = DynamicCache()
    out = causal_lm_output(torch.zeros(1, 1, 3), cache)
    assert output_cache(out) is cache
    assert out[CACHE_NAME] is cache


def test_both_names_are_accepted_and_not_both_at_once() -> None:
    cache = DynamicCache()
    assert cache_argument(cache, None) is cache
    assert cache_argument(None, cache) is cache
    assert cache_argument(None, None) is None
    with pytest.raises(ValueError, match="not both"):
        cache_argument(cache, DynamicCache())


def test_the_toy_model_answers_under_either_name_with_the_same_logits() -> None:
    model = to_hf(TableLM.random(3, 1, seed=0, zero_prob=0), torch.float64)
    ids = torch.tensor([[3, 1, 2, 0]])
    full = model(input_ids=ids).logits
    for name in ("cache", "past_key_values"):
        cache = DynamicCache()
        first = model(input_ids=ids[:, :2], **{name: cache})
        rest = model(input_ids=ids[:, 2:], **{name: cache})
        assert output_cache(rest) is cache
        assert torch.equal(torch.cat([first.logits, rest.logits], dim=1), full)
    # forward_with_cache threads it under the installed name
    cache = DynamicCache()
    out = forward_with_cache(model, ids, cache)
    assert output_cache(out) is cache and cache.get_seq_length() == 4


@contextlib.contextmanager
def _cache_deprecations(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    """The `past_key_values` deprecations transformers logs inside the block (filled on exit).

    Its warn-once cache is cleared first, so that an earlier warning cannot hide one, and its
    verbosity is WARNING inside the block (other modules in the same process, such as the
    engine-findings generator, turn transformers' logging down to errors)."""
    found: list[str] = []
    verbosity = transformers.logging.get_verbosity()
    transformers.utils.logging.warning_once.cache_clear()
    transformers.logging.set_verbosity_warning()
    transformers.logging.enable_propagation()
    try:
        with caplog.at_level(logging.WARNING):
            yield found
    finally:
        transformers.logging.disable_propagation()
        transformers.logging.set_verbosity(verbosity)
    found += [r.getMessage() for r in caplog.records
              if "deprecated" in r.getMessage() and "past_key_values" in r.getMessage()]


def test_generate_raises_no_deprecation_of_the_cache_name(
        caplog: pytest.LogCaptureFixture) -> None:
    # 5.24 logs "`past_key_values`/`cache_params` are deprecated" (a logger warning, not a
    # Python warning, so filterwarnings = error would not see it): none may be logged
    target = to_hf(TableLM.random(3, 1, seed=1))
    drafter = to_hf(TableLM.random(3, 1, seed=2))
    with _cache_deprecations(caplog) as found:
        AssistedSampler(target, drafter, prompt=(0,), max_new_tokens=3)(0)
    assert not found, found


def test_the_deprecation_check_sees_the_old_name(caplog: pytest.LogCaptureFixture) -> None:
    # the check above can fail: on a release that renamed the cache, reading the old field
    # logs the deprecation it looks for
    if CACHE_NAME != "cache":
        pytest.skip(f"transformers {transformers.__version__} has no deprecated name")
    with _cache_deprecations(caplog) as found:
        _ = causal_lm_output(torch.zeros(1, 1, 3), DynamicCache()).past_key_values
    assert found
