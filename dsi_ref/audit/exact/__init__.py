"""The exact interpreter of `Randomness`: a program's output law, with schedules quantified over.

`exact_distribution(program)` re-runs ``program(rng)`` replaying a prefix of choices and branching
at the next one, until every path is explored; probabilities multiply as `Fraction`s.

* At a probabilistic choice (``categorical``/``bernoulli``) the law is the mixture of the branches.
* At a nondeterministic choice (``choose``) every option is explored and the options must lead to
  the *same* law; otherwise the program is schedule-dependent and `ScheduleDependenceError` reports
  a witness: the path to the choice, the two options and the laws they lead to. Hence the law is
  only defined for schedule-robust programs, and computing it proves robustness (for every
  scheduler that sees the whole history: the strongest adversary; `dsi_ref.audit.schedulers`
  restricts what the scheduler may see).
* Keyed draws (see `dsi_ref.base.randomness`) share one uniform per key: the enumerator keeps,
  per key, the interval of ``u`` that the earlier draws left possible, and branches on
  sub-intervals.
* ``merge_point(state)`` calls made by decoders let paths that reach the same state share the
  law of their continuation (dynamic programming instead of path enumeration).
* Float weights are read as the `Fraction` of their binary value, normalised by their exact sum
  (`exact_probabilities`, the one treatment of float rows that `target_distribution` shares).

Laws are ``dict[value, Fraction]`` with zero-probability outcomes left out.

The package is one module per role, and re-exports the public names: `dsi_ref.audit.exact.law`
(the entry points `exact_law`, `exact_distribution`, `exact_expectation`),
`dsi_ref.audit.exact.witness` (laws, outcomes, witnesses), `dsi_ref.audit.exact.rows` (exact
rows), `dsi_ref.audit.exact.engine` (the replaying interpreter), `dsi_ref.audit.exact.uniform`
(``rng.uniform``'s lazy uniform) and `dsi_ref.audit.exact.guard` (randomness outside ``rng``).

**Randomness outside ``rng``.** The law is only defined for a program that is a deterministic
function of the choices it makes through ``rng``; anything else gets
`NondeterministicProgramError`, never a verdict. Three detectors, all cheap on the path of a
well-behaved program:

1. *Replays are checked*: the choices a replay makes before it branches must be the choices (kind,
   key, options and probabilities) recorded when that path was first run; a different or a
   missing choice raises at once, naming the first choice that differed and the path before it.
2. *The entropy sources are guarded* while the program runs (in the auditing thread only, and
   restored afterwards, exceptions included): a call of ``os.urandom``/``os.getrandom``, of
   ``secrets``, of ``random.SystemRandom`` or of ``numpy.random.default_rng()`` without a seed
   raises, naming the function and the path so far. The error is also recorded, so a program
   that swallows exceptions is caught when its run ends.
3. *The global generators' states are compared*: the state of Python's ``random``, of numpy's
   legacy global ``RandomState`` (``np.random.random()``, ``np.random.seed``, ...) and, when
   torch is already imported, of torch's global generator (``torch.rand``, ``Tensor.uniform_``,
   ``torch.manual_seed``, ...), before and after the exploration, and after any error. A draw
   changes them, through whatever name it was made; then a second, diagnostic exploration
   compares the states around every run and the error names the generator and the path of the
   first run that changed it.

Seeded generators the program makes for itself (``np.random.default_rng(seed)``,
``random.Random(seed)``, a torch ``Generator``) are deterministic and allowed, as is numpy's and
torch's arithmetic. The happy path pays two snapshots of the states and a dozen attribute swaps
per `exact_distribution` call (tens of microseconds), and one comparison per replayed choice.

What no detector sees: entropy read through an alias captured before the audit (``from os import
urandom``), or a fresh unseeded generator (``np.random.PCG64()``, ``random.Random()``), whose
values change neither a choice nor a global state, only the returned value. Draw through ``rng``.
"""

from ...base.errors import NondeterministicProgramError, PathLimitError, ScheduleDependenceError
from .law import (
    DEFAULT_MAX_CHOICES,
    DEFAULT_MAX_PATHS,
    PROGRESS_EVERY,
    ExactLaw,
    exact_distribution,
    exact_expectation,
    exact_law,
)
from .rows import exact_probabilities, exact_probability, exact_row
from .witness import (
    READABLE_DENOMINATOR,
    Law,
    Witness,
    WitnessStep,
    as_outcome,
    check_program,
    readable,
    total_variation,
)

__all__ = [
    "DEFAULT_MAX_CHOICES",
    "DEFAULT_MAX_PATHS",
    "PROGRESS_EVERY",
    "READABLE_DENOMINATOR",
    "ExactLaw",
    "Law",
    "NondeterministicProgramError",
    "PathLimitError",
    "ScheduleDependenceError",
    "Witness",
    "WitnessStep",
    "as_outcome",
    "check_program",
    "exact_distribution",
    "exact_expectation",
    "exact_law",
    "exact_probabilities",
    "exact_probability",
    "exact_row",
    "readable",
    "total_variation",
]
