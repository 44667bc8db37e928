"""Hypothesis strategies for models, prompts, lookaheads and latencies (public alias).

The strategies live in `dsi_ref.audit.strategies`; this module re-exports them under the name
users import (``from dsi_ref.strategies import table_models``) and the pytest plugin serves.
"""

from .audit.strategies import *  # noqa: F403
from .audit.strategies import __all__  # noqa: F401
