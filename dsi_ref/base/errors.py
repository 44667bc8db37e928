"""Every error class of dsi-ref, defined once (the layers above import them from here).

Each names what a user did or what happened, so that a caller can catch exactly that:

* bad arguments: `InvalidParameterError` (and its refinement `InsufficientServersError`),
  `InvalidDistributionError` (a model's row), `InvalidAuditError` (the statistical audit's
  inputs), `BackendError` (the torch backend's inputs);
* an engine under audit that cannot run (vLLM, llama.cpp): `EngineEnvironmentError` (its
  environment is missing or broken; the message gives the command that builds it),
  `ModelDirectoryError` (a model directory that does not exist or holds no causal LM),
  `EngineOptionError` (a method or option the engine refuses), `VocabularyMismatchError` (a
  drafter whose vocabulary is not the target's), `EngineCrashError` (the engine raised while
  sampling: a bug of the engine, reported as a finding), all `BackendError`s; an engine built
  from source: `ToolchainMissingError` (cmake or a compiler missing) and `EngineBuildError` (the
  build failed), both `EngineEnvironmentError`s, and `ModelFileError` (a model file, a GGUF,
  that does not exist or does not load), a `ModelDirectoryError`;
* a distributed run that cannot go on: `ServerLostError` (every target server died) and its
  refinement `ServerTimeoutError` (a deadline passed: servers frozen, or the run's timeout),
  `UnschedulableError` (no node can host a server's resources), `RayConnectionError` (a Ray
  cluster could not be joined; ``cause`` says why);
* verdicts that cannot be given: `ScheduleDependenceError` (the law depends on the schedule; it
  carries the witness), `NondeterministicProgramError` (the program is not a function of its
  draws through ``rng``: randomness drawn elsewhere, or a replay that diverged),
  `PathLimitError` (too many paths to enumerate), `UnderpoweredError` (the sample cannot reach
  the stated power);
* arithmetic: `NumericalError` (float rounding made an impossible event happen).

`theory` and `proofs` never import the core, so their errors (`theory.TheoryDomainError`,
`proofs.TranslationError`) live there.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BackendError",
    "ConstraintDeadEndError",
    "EngineBuildError",
    "EngineCrashError",
    "EngineEnvironmentError",
    "EngineOptionError",
    "InsufficientServersError",
    "InvalidAuditError",
    "InvalidDistributionError",
    "InvalidParameterError",
    "ModelDirectoryError",
    "ModelFileError",
    "NondeterministicProgramError",
    "NumericalError",
    "PathLimitError",
    "RayConnectionError",
    "ScheduleDependenceError",
    "ServerLostError",
    "ServerTimeoutError",
    "ToolchainMissingError",
    "UnderpoweredError",
    "UnschedulableError",
    "VocabularyMismatchError",
]


class InvalidParameterError(ValueError):
    """A decoder, latency or simulator parameter is out of its domain (the message says which
    and why)."""


class InsufficientServersError(InvalidParameterError):
    """The paper model assumes no task ever waits: it needs ``SP >= ceil(1 / (k c))``."""


class InvalidDistributionError(ValueError):
    """A model returned something that is not a probability vector over its vocabulary."""


class ConstraintDeadEndError(InvalidDistributionError):
    """A constraint (a grammar of `dsi_ref.base.stateful`) leaves no probability mass: the model
    gives zero probability to every token the constraint allows after this prefix, so the
    processed next-token law is undefined (0/0). Never renormalised away."""


class InvalidAuditError(ValueError):
    """Bad arguments to the statistical audit (a reference that is not a law, a bad alpha...)."""


class BackendError(ValueError):
    """A torch-backend argument is out of its domain (the message says which and how to fix it)."""


class EngineEnvironmentError(BackendError):
    """The environment of an engine under audit is missing or broken (not installed, an import
    that fails, a toolchain that is absent); the one-line message gives the command that builds
    it."""


class ModelDirectoryError(BackendError):
    """A model directory handed to an engine does not exist or holds no causal language model."""


class EngineOptionError(BackendError):
    """The engine refuses a method or an option (the message quotes the engine's reason)."""


class EngineCrashError(BackendError):
    """The engine under audit raised while it sampled (a bug of the engine: an audit reports it
    as the cell's finding, with the engine's message)."""


class VocabularyMismatchError(BackendError):
    """A drafter's vocabulary is not the target's (speculative decoding needs the same ids)."""


class ToolchainMissingError(EngineEnvironmentError):
    """An engine built from source needs a tool that is not on the PATH (cmake, a C++
    compiler); the message names it and how to install it."""


class EngineBuildError(EngineEnvironmentError):
    """Building an engine from source failed; the message quotes the build's first error line
    and names the full log."""


class ModelFileError(ModelDirectoryError):
    """A model file (a GGUF) that does not exist or that the engine does not load."""


class ServerLostError(BackendError):
    """Every target server of a distributed DSI run died (or froze): the run cannot go on
    (nothing a lost call computed was committed)."""


class ServerTimeoutError(ServerLostError):
    """A deadline of a distributed run passed: every target server left froze (no reply within
    the per-task deadline), or the whole run (``timeout=``) did not end in time. Nothing a
    frozen or unfinished call computed was committed."""


class UnschedulableError(BackendError):
    """No node of the cluster can host a target server's resources (e.g. a GPU share on a
    machine without GPUs) within the scheduling deadline."""


class RayConnectionError(BackendError):
    """A Ray cluster could not be joined (or started). The one-line message names the cause and
    the fix; ``cause`` is one of `CAUSES`:

    * ``"refused"``: nothing listens at the address; ``"unreachable"``: no route to it, or its
      name does not resolve; ``"timeout"``: no answer within the connect timeout;
    * ``"not-ray"``: something answers, but not as a Ray head (a gRPC server);
    * ``"auth"``: the head rejected this process's authentication token (or got none);
    * ``"version"``: the cluster runs another Ray or Python version than this process;
    * ``"no-cluster"``: joining "the cluster on this machine" found none;
    * ``"other-cluster"``: this process already runs Ray, connected to another address (a
      process holds one Ray connection);
    * ``"failed"``: anything else (Ray's own first line is quoted).

    Attributes:
        cause: the cause, one of `CAUSES`.
        address: the address that was tried (``None``: a local start).
    """

    CAUSES = ("refused", "unreachable", "timeout", "not-ray", "auth", "version", "no-cluster",
              "other-cluster", "failed")

    def __init__(self, message: str, *, cause: str, address: str | None) -> None:
        if cause not in self.CAUSES:
            raise ValueError(f"unknown cause {cause!r}, not one of {self.CAUSES}")
        super().__init__(message)
        self.cause, self.address = cause, address


class NumericalError(ArithmeticError):
    """Float rounding made an impossible event happen (e.g. a rejection with an empty residual)."""


class PathLimitError(RuntimeError):
    """The program has more paths (or longer paths) than the configured bound."""


class ScheduleDependenceError(AssertionError):
    """The program's output law depends on how its nondeterministic choices are resolved.

    Attributes:
        witness: the shortest path to a scheduler's choice whose options lead to different laws
            (a `dsi_ref.audit.exact.Witness`).
    """

    def __init__(self, witness: Any) -> None:
        super().__init__(str(witness))
        self.witness: Any = witness


class NondeterministicProgramError(RuntimeError):
    """The audited program is not a deterministic function of the choices it makes through
    ``rng``: it drew randomness elsewhere (Python's ``random``, ``numpy.random``'s global or
    unseeded generators, torch's global generator, ``os.urandom``, ``secrets``), or a replay of a
    path made fewer or different choices, or (statistical audit) one seed gave two samples.

    An auditor gives this error instead of a verdict. The message says where the replay diverged.

    Attributes:
        source: the outside source that was called or whose state changed (e.g.
            ``"numpy.random.random"``), or ``None`` when only the divergence was seen.
        path: the choices made before the divergence (``dsi_ref.audit.exact.WitnessStep``s;
            empty when unknown).
    """

    def __init__(self, message: str, *, source: str | None = None,
                 path: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.source = source
        self.path = path


class UnderpoweredError(RuntimeError):
    """The planned sample cannot detect the stated alternative with the requested power.

    Attributes:
        n_samples: the sample size asked for.
        power: the power it achieves.
        required_power: the power asked for.
        needed_samples: a sample size that achieves it (None if none up to the search bound).
    """

    def __init__(self, n_samples: int, power: float, required_power: float,
                 needed_samples: int | None, alternative: str) -> None:
        self.n_samples, self.power = n_samples, power
        self.required_power, self.needed_samples = required_power, needed_samples
        need = (f"about {needed_samples} samples are needed" if needed_samples is not None
                else "no sample size up to the search bound reaches it")
        super().__init__(
            f"{n_samples} samples detect {alternative} with power {power:.4g} < the required "
            f"{required_power:.4g}: the audit cannot declare the decoder lossless; {need} "
            "(or state a larger epsilon / a lower power)")
