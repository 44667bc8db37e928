"""Real (wall-clock) execution of non-SI, SI and DSI on torch models, with real concurrency.

The algorithms are the reference ones, run against real time instead of the virtual clock; the
engine subclasses the reference runs and overrides their seams, never their steps:

* `Engine.speculative` and `Engine.autoregressive` *are* `dsi_ref.decoders.speculative.SIRun`
  (`dsi_ref.backends.engine.si.WallClockSI`): only the model seam (a cached `Session` forward;
  SI scores prefix + drafts in *one* target forward), the clock (wall-clock seconds, prefill
  untimed) and the rule (`vectorised_rule`) change.
* `Engine.dsi` *is* `dsi_ref.decoders.dsi.DSIRun` (`dsi_ref.backends.engine.dsi.WallClockDSI`):
  the committer, windows, frontier task, dispatch, queueing and preemption rules of
  docs/dsi-semantics.md are inherited, not rewritten. Only the event loop changes: the drafter
  and the committer run in the calling thread, which drafts continuously and handles finished
  tasks between draft forwards; the ``sp_degree`` target servers are a `ServerPool`: worker
  threads (`ThreadPool`), each with its own KV cache and (on CUDA) its own stream and CUDA
  graphs, or the rows of one batched forward (`BatchedPool`, ``batched=True``).
* `Engine.tree_speculative` *is* `dsi_ref.decoders.tree.TreeRun`
  (`dsi_ref.backends.engine.tree`).

Verification uses the rules of `dsi_ref.decoders.verification` (same keys, same keyed uniforms),
with the array work vectorised (`vectorised_rule`): under ``Sampler(seed)`` a decision is the same
function of (target row, draft row, draft, key) as in the reference decoders.

Differences from the virtual clock, stated (see docs/gpu-backend.md):

* **Preemption granularity.** A preempted task that has not started never starts; a running one
  stops at the next boundary between layer segments (``Engine(segments=...)``; a GPU kernel
  cannot be interrupted, so the forward is split into CUDA graphs per segment and the server
  checks between them), so its server takes the next task up to one segment late.
* **Committer latency.** The committer runs between the drafter's forwards, so a finished task is
  handled at most one drafter forward (``c``) after it finishes.
* **One GPU.** On one device the servers' streams share the GPU: their forwards overlap only as
  far as the hardware lets them (the frontier server gets the lowest stream priority;
  ``frontier_yields`` holds frontier forwards back; ``batched`` makes the servers rows of one
  batched forward instead). docs/gpu-backend.md has the measurements.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...base.errors import BackendError
from ...base.randomness import Randomness
from ...base.result import Run
from ...decoders.autoregressive import non_si_config
from ...decoders.common import check_inputs
from ...decoders.dsi import DSIConfig, QueuePolicy
from ...decoders.speculative import SpeculativeConfig
from ...decoders.tree import TreeRule, TreeVerifyRule
from ...decoders.verification import Rule, VerifyRule
from ..torch.model import TorchLM
from ..torch.session import BackendLM, BatchedSession, SessionLike
from ..torch.transformer import canonical_device
from .batched import BatchedDSI, BatchedPool
from .dsi import WallClockDSI
from .pool import ServerPool
from .si import WallClockSI
from .threads import FrontierGate, ThreadPool
from .tree import tree_speculative

__all__ = ["Engine"]


class Engine:
    """Sessions for a target/drafter pair, reused across runs (KV caches, streams, CUDA graphs).

    Every run prefills the sessions it uses on the prompt *before* its clock starts, so
    ``Run.time`` (seconds) is the decoding time of the new tokens, the quantity the simulator's
    TPOT-unit latencies predict.

    Args:
        target: the target model.
        drafter: the drafter (needed for SI and DSI).
        graphs: CUDA graphs in every session (default: on CUDA).
        segments: layer segments per target-server forward: a preempted task's running forward
            stops at the next segment boundary (1: runs to its end).
        frontier_yields: on one GPU, hold a frontier forward back (between its segments) while
            a verification forward runs. A scheduling policy for servers that share a device:
            the committer and every rule are unchanged (so are the tokens), but the
            frontier task no longer runs at full speed, so DSI's "never slower than non-SI"
            argument does not apply to it. Off by default (the faithful DSI).
        batched: the ``sp_degree`` target servers are the rows of one batched session served
            by one thread (`BatchedPool`): whenever the device is free, one forward takes every
            task ready, and the committer handles its results before the next forward is
            gathered. A task submitted during a forward starts with the next one (up to one
            forward late, unlike the event model's idle server; the event model's
            ``Contention(batch=...)`` models this), and the forwards of concurrent tasks cost
            about one batch-1 forward on a latency-bound GPU instead of slowing each other down.
            `TorchLM` targets only.
        server_devices: the devices of the DSI target servers, server ``i`` on
            ``server_devices[i % len(server_devices)]`` (the paper's setting: one GPU per
            server, e.g. ``("cuda:1", "cuda:2", "cuda:3")``). Each device other than the
            target's gets a copy of the target's weights (`BackendLM.replica`); the drafter, SI
            and non-SI stay on the target's device. Default: every server on the target's
            device.
    """

    def __init__(self, target: BackendLM, drafter: BackendLM | None = None, *,
                 graphs: bool | None = None, segments: int = 4,
                 frontier_yields: bool = False, batched: bool = False,
                 server_devices: Sequence[str | torch.device] | None = None) -> None:
        if drafter is not None and drafter.device != target.device:
            raise BackendError(f"target on {target.device} but drafter on {drafter.device}")
        if server_devices is not None and not server_devices:
            raise BackendError("server_devices must name at least one device (or be None)")
        if server_devices is not None and batched:
            raise BackendError("batched=True runs every server in one forward on the target's "
                               "device: it cannot be combined with server_devices")
        home = canonical_device(target.device)
        self.server_devices = [home] if server_devices is None else \
            [canonical_device(d) for d in server_devices]
        self._replicas: dict[torch.device, BackendLM] = {home: target}
        for device in self.server_devices:
            if device not in self._replicas:
                self._replicas[device] = target.replica(device)
        self.target, self.drafter_lm, self.graphs = target, drafter, graphs
        self.segments = segments
        if batched and not isinstance(target, TorchLM):
            raise BackendError("batched=True needs a TorchLM target (a BatchedSession)")
        self.batched = batched
        self.device = target.device
        high = -1 if self.device.type == "cuda" else 0   # the more urgent CUDA stream priority
        self.target_session = target.session(graphs=graphs, priority=high)
        self._drafter_session = drafter.session(graphs=graphs, priority=high) \
            if drafter is not None else None
        self._high = high
        self.threads = ThreadPool(self._server_session, FrontierGate(frontier_yields))
        self._batched: dict[int, BatchedPool] = {}

    @property
    def drafter(self) -> BackendLM:
        """The drafter (an error when the engine has no drafter)."""
        if self.drafter_lm is None:
            raise BackendError("this Engine has no drafter: pass drafter= for SI and DSI")
        return self.drafter_lm

    @property
    def drafter_session(self) -> SessionLike:
        """The drafter's session (an error when the engine has no drafter)."""
        if self._drafter_session is None:
            raise BackendError("this Engine has no drafter: pass drafter= for SI and DSI")
        return self._drafter_session

    def _server_session(self, index: int) -> SessionLike:
        """Target server ``index``'s session: on its device (``server_devices``), the lowest
        stream priority for server 0 (the frontier server when ``sp_degree >= 2``), the highest
        for the verification servers."""
        lm = self._replicas[self.server_devices[index % len(self.server_devices)]]
        return lm.session(graphs=self.graphs, segments=self.segments,
                          priority=0 if index == 0 else self._high)

    def pool(self, sp_degree: int) -> ServerPool:
        """The pool of ``sp_degree`` target servers that `dsi` runs on: the threads
        (`ThreadPool`, started on first use, then reused), or with ``batched`` the batched
        pool of ``sp_degree`` rows (`batched_pool`)."""
        if self.batched:
            return self.batched_pool(sp_degree)
        self.threads.grow(sp_degree)
        return self.threads

    def batched_pool(self, sp_degree: int) -> BatchedPool:
        """The batched pool with ``sp_degree`` rows, one per target server (started on first
        use, then reused)."""
        if sp_degree not in self._batched:
            assert isinstance(self.target, TorchLM)
            session = BatchedSession(self.target, sp_degree, graphs=self.graphs,
                                     segments=self.segments, priority=self._high)
            self._batched[sp_degree] = BatchedPool(session)
        return self._batched[sp_degree]

    def close(self) -> None:
        """Stop the server threads."""
        self.threads.close()
        for pool in self._batched.values():
            pool.close()
        self._batched = {}

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- non-SI and SI --------------------------------------------------------------------------
    def autoregressive(self, prompt: Sequence[int], max_new_tokens: int, rng: Randomness, *,
                       greedy: bool = False) -> Run:
        """`dsi_ref.decoders.autoregressive` on the target, timed: one cached target forward per
        token (`SIRun` without a drafter)."""
        prompt = check_inputs(self.target, prompt, max_new_tokens)
        self.target_session.rows(prompt, 1)                        # prefill, untimed
        return WallClockSI(self, prompt, max_new_tokens, rng, non_si_config(greedy),
                           si=False).run()

    def speculative(self, prompt: Sequence[int], max_new_tokens: int, rng: Randomness,
                    lookahead: int = 3, verify: VerifyRule | Rule = "rejection") -> Run:
        """`dsi_ref.decoders.speculative`, timed: draft ``lookahead`` tokens, one target forward
        over prefix + drafts, verify left to right (`SIRun`, with cached sessions)."""
        config = SpeculativeConfig(lookahead, verify)
        prompt = check_inputs(self.target, prompt, max_new_tokens, self.drafter_lm)
        self.target_session.rows(prompt, 1)                        # prefill both, untimed
        self.drafter_session.rows(prompt, 1)
        return WallClockSI(self, prompt, max_new_tokens, rng, config, si=True).run()

    # -- DSI ---------------------------------------------------------------------------------------
    def dsi(self, prompt: Sequence[int], max_new_tokens: int, rng: Randomness,
            lookahead: int = 2, sp_degree: int = 2, verify: VerifyRule | Rule = "rejection",
            queue: QueuePolicy = "fifo") -> Run:
        """`dsi_ref.decoders.dsi` with real concurrency: ``sp_degree`` target-server threads.

        ``Run.time`` is wall-clock seconds (the last commit); ``Run.stats`` adds ``events``
        (drafts and task results handled), ``orchestration_us`` (the committer thread's time
        outside drafter forwards and waits), ``drafter_us``, and the mean wall-clock time of a
        completed target-server forward and of a drafter forward *during the run*
        (``target_forward_us``, ``drafter_forward_us``: under the contention of the other
        servers, which is what one GPU shared by all servers costs).
        """
        config = DSIConfig(lookahead, sp_degree, verify=verify, queue=queue)
        prompt = check_inputs(self.target, prompt, max_new_tokens, self.drafter_lm)
        self.drafter_session.rows(prompt, 1)                       # prefill everything, untimed
        if self.batched:
            batched = self.batched_pool(sp_degree)
            batched.session.rows_batch(dict.fromkeys(range(sp_degree), (prompt, 1)))
            return BatchedDSI(self, batched, prompt, max_new_tokens, rng, config).run()
        for session in self.threads.sessions(sp_degree):
            session.rows(prompt, 1)
        return WallClockDSI(self, self.threads, prompt, max_new_tokens, rng, config).run()

    # -- tree speculation ------------------------------------------------------------------------
    def tree_speculative(self, prompt: Sequence[int], max_new_tokens: int, rng: Randomness, *,
                         tree: Sequence[int] = (2, 1), verify: TreeVerifyRule | TreeRule = "rrs"
                         ) -> Run:
        """`dsi_ref.decoders.tree.tree_speculative`, timed: the tree drafted level by level (one
        drafter forward per depth), scored by *one* target forward with a tree attention mask,
        the accepted path compacted in the KV caches (`dsi_ref.backends.engine.tree`; `TorchLM`
        models)."""
        return tree_speculative(self, prompt, max_new_tokens, rng, tree=tree, verify=verify)
