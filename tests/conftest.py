"""Test-suite settings: hypothesis profiles chosen by HYPOTHESIS_PROFILE (dev / ci / nightly).

``ci`` (the default under CI=true) is derandomised so that a CI run is reproducible; ``dev``
explores new examples each run; ``nightly`` is for long runs
(``HYPOTHESIS_PROFILE=nightly pytest -m ''``).

Every run is refused when its tests' false-alarm declarations break the budget
(`false_alarm_budget.budget_problems`, docs/statistical-policy.md).

The default run is spread over one pytest-xdist worker per core (addopts in pyproject.toml). Each
worker then runs torch on one thread: with torch's default of one thread per core, two workers on
two cores oversubscribe them, and the torch tests took ~15-25% more CPU time in a measurement.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from false_alarm_budget import budget_problems  # tests/ is on sys.path (prepend import mode)
from hypothesis import HealthCheck, settings

if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # read by torch when it is first imported
    if "torch" in sys.modules:  # imported already (by a plugin): set it directly
        sys.modules["torch"].set_num_threads(1)

settings.register_profile("dev", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE",
                                     "ci" if os.environ.get("CI") else "dev"))


@pytest.hookimpl(trylast=True)  # after -m / -k have deselected: the run's own items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse the run when its false-alarm declarations break the budget
    (tests/false_alarm_budget.py, docs/statistical-policy.md)."""
    problems = budget_problems(items)
    if problems:
        raise pytest.UsageError("false-alarm budget (tests/false_alarm_budget.py):\n  "
                                + "\n  ".join(problems))


@pytest.fixture(scope="module")
def pair() -> Any:
    """The tiny torch (target, drafter) pair of `dsi_ref.backends.torch.model.build_pair`, built
    once per test module (a module may define its own, e.g. with an EOS)."""
    from dsi_ref.backends.torch.model import build_pair

    return build_pair()


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    """A local Ray in this process with 2 CPUs for the module's tests, shut down after them when
    this fixture started it (a module may define its own, e.g. to ship its functions by
    value)."""
    import ray

    from dsi_ref.backends.ray import connect

    started = connect(num_cpus=2)
    yield
    if started:
        ray.shutdown()
