"""Test-suite settings: hypothesis profiles chosen by HYPOTHESIS_PROFILE (dev / ci / nightly).

``ci`` (the default under CI=true) is derandomised so that a CI run is reproducible; ``dev``
explores new examples each run; ``nightly`` is for long runs
(``HYPOTHESIS_PROFILE=nightly pytest -m ''``).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE",
                                     "ci" if os.environ.get("CI") else "dev"))
