"""Claims as data: every verdict the docs state is a row here, checked and attacked.

* `dsi_ref.claims.registry`: the rows (`CLAIMS`, `LATENCY_CLAIMS`);
* `dsi_ref.claims.instances`: the concrete instances a claim is checked on, and witnesses;
* `dsi_ref.claims.attack`: the search for instances that refute a lossless row;
* `dsi_ref.claims.render`: the docs' verdict tables, and the scan for verdicts that are not rows.

This package is on the top floor (it composes the audit, the simulator and ``proofs``), like the
CLI.
"""

from .instances import TIE_RULES, Finding, Instance, check_instance
from .registry import (
    CLAIMS,
    DSI_RULES,
    LATENCY_CLAIMS,
    LatencyClaim,
    LosslessnessClaim,
    dsi_claim,
    dsi_claims,
    instance_of,
)

__all__ = ["CLAIMS", "DSI_RULES", "LATENCY_CLAIMS", "TIE_RULES", "Finding", "Instance",
           "LatencyClaim", "LosslessnessClaim", "check_instance", "dsi_claim", "dsi_claims",
           "instance_of"]
