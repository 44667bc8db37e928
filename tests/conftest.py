"""Test-suite settings: hypothesis profiles chosen by HYPOTHESIS_PROFILE (dev / ci / nightly).

``ci`` (the default under CI=true) is derandomised so that a CI run is reproducible; ``dev``
explores new examples each run; ``nightly`` is for long runs
(``HYPOTHESIS_PROFILE=nightly pytest -m ''``).

The default run is spread over one pytest-xdist worker per core (addopts in pyproject.toml). Each
worker then runs torch on one thread: with torch's default of one thread per core, two workers on
two cores oversubscribe them, and the torch tests took ~15-25% more CPU time in a measurement.
"""

from __future__ import annotations

import os
import sys

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
