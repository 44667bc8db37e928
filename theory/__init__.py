"""The analytic model: closed forms for non-SI, SI and DSI latency (sympy only).

Notation (docs/paper.md, `theory.symbols`): acceptance rate ``a``, drafter cost ``c`` (target
forward = 1), lookahead ``k``, servers ``SP``, tokens ``N``. `theory.si_latency` holds non-SI and
SI, `theory.dsi_latency` the paper model of DSI (the official simulator, with and without its
per-segment min) and the event model (docs/dsi-semantics.md) where closed forms exist;
`theory.block_acceptance` the accepted length of one window under block verification and
token-level rejection sampling (context-free pairs). This package never imports ``dsi_ref``:
tests compare the two (tests/test_bridge_theory_*.py, tests/test_theory_block.py).
"""

from .block_acceptance import (
    block_accepted_pmf,
    block_expected_accepted,
    block_survival,
    prefix_coupling_bound,
    row_symbols,
    token_acceptance_rate,
    token_expected_accepted,
    token_survival,
)
from .dsi_latency import (
    dsi_event_commit_offset,
    dsi_event_commit_offsets,
    dsi_event_expected_latency,
    dsi_event_latency_per_token,
    dsi_paper_latency_per_token,
    dsi_paper_latency_per_token_nomin,
    dsi_paper_thresholds,
    dsi_si_speedup_at_best_lookaheads,
    event_max_overlap,
    event_verification_servers,
    sp_requirement,
    sp_witness_schedule,
)
from .si_latency import (
    geometric_sum,
    nonsi_latency,
    si_accepted_pmf,
    si_best_lookahead,
    si_delta,
    si_expected_latency,
    si_expected_tokens,
    si_latency_per_token,
    si_lookahead_bound,
    si_lookahead_step,
    si_speedup,
)
from .symbols import DOMAIN, SP, N, TheoryDomainError, a, as_expr, c, check_domain, k

__all__ = [
    "DOMAIN",
    "SP",
    "N",
    "TheoryDomainError",
    "a",
    "as_expr",
    "block_accepted_pmf",
    "block_expected_accepted",
    "block_survival",
    "c",
    "check_domain",
    "dsi_event_commit_offset",
    "dsi_event_commit_offsets",
    "dsi_event_expected_latency",
    "dsi_event_latency_per_token",
    "dsi_paper_latency_per_token",
    "dsi_paper_latency_per_token_nomin",
    "dsi_paper_thresholds",
    "dsi_si_speedup_at_best_lookaheads",
    "event_max_overlap",
    "event_verification_servers",
    "geometric_sum",
    "k",
    "nonsi_latency",
    "prefix_coupling_bound",
    "row_symbols",
    "si_accepted_pmf",
    "si_best_lookahead",
    "si_delta",
    "si_expected_latency",
    "si_expected_tokens",
    "si_latency_per_token",
    "si_lookahead_bound",
    "si_lookahead_step",
    "si_speedup",
    "sp_requirement",
    "sp_witness_schedule",
    "token_acceptance_rate",
    "token_expected_accepted",
    "token_survival",
]
