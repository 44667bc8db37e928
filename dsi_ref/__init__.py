"""dsi-ref: a reference formal model of non-SI, SI and DSI, with exact and statistical audits.

Every decoder draws through a `Randomness`; run it with `Sampler` to sample, or hand it to
`exact_distribution` to get its exact output law (schedules quantified over).
"""

from .audit.exact import Witness, exact_distribution, exact_expectation, total_variation
from .audit.laws import LosslessReport, assert_lossless, check_lossless, target_distribution
from .audit.sampling import sample_fn
from .audit.statistical import Alternative, StatisticalReport, statistical_audit
from .audit.strings import (
    StringReport,
    assert_lossless_strings,
    check_lossless_strings,
    conditional_law,
    target_string_distribution,
)
from .base.errors import (
    ConstraintDeadEndError,
    InsufficientServersError,
    InvalidAuditError,
    InvalidDistributionError,
    InvalidParameterError,
    NondeterministicProgramError,
    NumericalError,
    PathLimitError,
    ScheduleDependenceError,
    UnderpoweredError,
)
from .base.latency import Latency
from .base.models import FunctionLM, LanguageModel, TableLM
from .base.processors import processed
from .base.randomness import Randomness, Sampler, inverse_cdf, keyed_uniform, merge_point
from .base.result import Event, Run
from .base.stateful import (
    FrequencyPenalty,
    GrammarConstraint,
    PresencePenalty,
    RepetitionPenalty,
    TokenDFA,
    incremental,
    recomputed,
)
from .base.tokenizers import Tokenizer
from .decoders.autoregressive import autoregressive
from .decoders.dsi import DSIConfig, DSIRun, dsi
from .decoders.speculative import SIRun, SpeculativeConfig, speculative
from .decoders.tree import TREE_VERIFY_RULES, tree_speculative
from .decoders.verification import VERIFY_RULES, Decision
from .decoders.vocab import (
    CROSS_VOCAB_ALGORITHMS,
    block_law,
    cross_vocab_speculative,
    shared_tokens,
    string_level_drafter,
)
from .sim import Contention, expected_latency, simulate_latency

__version__ = "0.1.0"

__all__ = [
    "CROSS_VOCAB_ALGORITHMS",
    "TREE_VERIFY_RULES",
    "VERIFY_RULES",
    "Alternative",
    "ConstraintDeadEndError",
    "Contention",
    "DSIConfig",
    "DSIRun",
    "Decision",
    "Event",
    "FrequencyPenalty",
    "FunctionLM",
    "GrammarConstraint",
    "InsufficientServersError",
    "InvalidAuditError",
    "InvalidDistributionError",
    "InvalidParameterError",
    "LanguageModel",
    "Latency",
    "LosslessReport",
    "NondeterministicProgramError",
    "NumericalError",
    "PathLimitError",
    "PresencePenalty",
    "Randomness",
    "RepetitionPenalty",
    "Run",
    "SIRun",
    "Sampler",
    "ScheduleDependenceError",
    "SpeculativeConfig",
    "StatisticalReport",
    "StringReport",
    "TableLM",
    "TokenDFA",
    "Tokenizer",
    "UnderpoweredError",
    "Witness",
    "__version__",
    "assert_lossless",
    "assert_lossless_strings",
    "autoregressive",
    "block_law",
    "check_lossless",
    "check_lossless_strings",
    "conditional_law",
    "cross_vocab_speculative",
    "dsi",
    "exact_distribution",
    "exact_expectation",
    "expected_latency",
    "incremental",
    "inverse_cdf",
    "keyed_uniform",
    "merge_point",
    "processed",
    "recomputed",
    "sample_fn",
    "shared_tokens",
    "simulate_latency",
    "speculative",
    "statistical_audit",
    "string_level_drafter",
    "target_distribution",
    "target_string_distribution",
    "total_variation",
    "tree_speculative",
]
