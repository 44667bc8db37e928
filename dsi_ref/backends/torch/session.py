"""Sessions over the torch models of `dsi_ref.backends.torch.model`: KV caches, streams, graphs.

A `Session` owns one KV cache (and on CUDA one stream and its CUDA graphs); several sessions share
one model's weights, e.g. one per DSI target server, and sessions on different threads run
concurrently on one GPU. A `BatchedSession` holds the ``SP`` = ``sp_degree`` target servers of
DSI as the rows of one static cache, so that one forward serves every server with work. A forward
is split into layer segments, between which it can be preempted (``rows_unless``). A `Session`
also scores a token tree in one forward (``tree_rows``: the nodes after the prefix in the cache,
a tree attention mask) and compacts the path a later context follows (tree speculation,
`dsi_ref.backends.engine.tree`).

`SessionLike` and `BackendLM` are the protocols the engine and the measurements run on: what they
need of a session and of a model (`dsi_ref.backends.torch.model.TorchLM`, or the Hugging Face
checkpoint model of `dsi_ref.backends.torch.checkpoint`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from ...base.errors import BackendError
from ...base.validate import check_int
from .transformer import MAX_GRAPH_LENGTH, KVCache, Transformer

__all__ = ["BackendLM", "BatchedSession", "NetworkLM", "Session", "SessionLike"]


class NetworkLM(Protocol):
    """What a `Session` needs of its model (`dsi_ref.backends.torch.model.TorchLM`): the
    network, the token prepended to every sequence, and a name for errors."""

    name: str
    bos: int
    model: Transformer


class SessionLike(Protocol):
    """What the engine and the measurements need of a session (`Session`, or the Hugging Face
    checkpoint session of `dsi_ref.backends.torch.checkpoint`)."""

    tokens: list[int]
    forwards: int

    def reset(self) -> None:
        """Forget the cached tokens."""
        ...

    def rows(self, context: Sequence[int], count: int = 1) -> np.ndarray:
        """Next-token rows [count, V] after the last ``count`` prefixes of ``context``."""
        ...

    def rows_unless(self, context: Sequence[int], count: int,
                    cancelled: Callable[[], bool] | None) -> np.ndarray | None:
        """`rows`, or ``None`` when preempted."""
        ...


class BackendLM(Protocol):
    """A `LanguageModel` that also makes sessions: what `Engine` and `measure` run on."""

    name: str
    vocab_size: int
    eos: int | None
    bos: int

    @property
    def device(self) -> torch.device:
        """Where the weights live."""
        ...

    def session(self, *, graphs: bool | None = None, priority: int = 0,
                segments: int = 1) -> SessionLike:
        """A new session (own KV cache) over the model's weights."""
        ...

    def replica(self, device: str | torch.device) -> BackendLM:
        """The same model (same weights) on ``device``: one per GPU when servers get their own."""
        ...

    def probs(self, prefix: Sequence[int]) -> tuple[float, ...]:
        """The next-token distribution after ``prefix``."""
        ...




class _Graph:
    """The forward of one fixed query length, captured as CUDA graphs, one per layer segment
    (static token, position, hidden-state and logit buffers)."""

    def __init__(self, model: Transformer, cache: KVCache, length: int,
                 stream: torch.cuda.Stream, pool: Any, segments: int, batch: int = 1) -> None:
        device = model.embed.device
        self.tokens = torch.zeros(batch, length, dtype=torch.long, device=device)
        self.positions = torch.arange(length, device=device) if batch == 1 \
            else torch.arange(length, device=device).repeat(batch, 1)        # [B, L]
        bounds = model.segments(segments)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm up kernels (and cuBLAS workspaces) outside the capture
                model(self.tokens, self.positions, cache)
        stream.synchronize()
        self.graphs: list[torch.cuda.CUDAGraph] = []
        hidden: torch.Tensor | None = None
        for layers in bounds:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                hidden = model(self.tokens, self.positions, cache, hidden=hidden, layers=layers)
            self.graphs.append(graph)
        assert hidden is not None
        self.logits = hidden


class _DeviceSession:
    """The device state shared by `Session` and `BatchedSession`: CUDA or not, whether forwards
    replay CUDA graphs, the layer segments a forward may be stopped between, its own stream on
    CUDA, the graph pool and the captured graphs."""

    model: Transformer
    cuda: bool
    graphs: bool
    segments: list[tuple[int, int]]
    stream: torch.cuda.Stream | None
    _pool: Any
    _captured: dict[int, _Graph]
    forwards: int

    def _init_device(self, graphs: bool | None, segments: int, priority: int) -> None:
        self.cuda = self.model.embed.device.type == "cuda"
        self.graphs = self.cuda if graphs is None else graphs
        if self.graphs and not self.cuda:
            raise BackendError("CUDA graphs need a CUDA device; pass graphs=False on CPU")
        check_int("segments", segments, error=BackendError)
        self.segments = self.model.segments(segments)
        self.stream = torch.cuda.Stream(
            self.model.embed.device, priority=priority) if self.cuda else None
        self._pool = torch.cuda.graph_pool_handle() if self.graphs else None
        self._captured = {}
        self.forwards = 0


class Session(_DeviceSession):
    """One KV cache over one model's weights, with the tokens it holds; on CUDA, its own stream
    and CUDA graphs (so sessions on different threads run concurrently on one GPU).

    Args:
        lm: the model.
        graphs: capture forwards as CUDA graphs (default: on CUDA); every power-of-two length up
            to `MAX_GRAPH_LENGTH` is captured at the first forward, so warm up before timing.
        priority: CUDA stream priority (lower is more urgent; see ``torch.cuda.Stream``).
        segments: layer segments per forward; a forward can be preempted between segments
            (`rows_unless`). 1: not preemptible once started.
    """

    def __init__(self, lm: NetworkLM, *, graphs: bool | None = None, priority: int = 0,
                 segments: int = 1) -> None:
        self.lm = lm
        self.model = lm.model
        self.cache = self.model.new_cache(1)
        self.tokens: list[int] = []   # BOS + tokens whose keys/values are valid in the cache
        # a token tree laid out after them (`tree_rows`): (parent, token) of node i, at cache
        # slot len(tokens) + i; parent -1 is the last of ``tokens``
        self.tree: list[tuple[int, int]] = []
        self._init_device(graphs, segments, priority)
        self.preempted = 0

    def reset(self) -> None:
        """Forget the cached tokens (the next call recomputes from the start)."""
        self.tokens = []
        self.tree = []

    def rows(self, context: Sequence[int], count: int = 1) -> np.ndarray:
        """Next-token distributions [count, V] (float64) after the last ``count`` prefixes of
        ``context``: after ``context[:len - count + 1]``, ..., after ``context``.

        Reuses the cached keys/values of the longest common prefix with the previous call (so a
        rejected draft is rolled back by recomputing from where the sequences diverge).
        """
        rows = self.rows_unless(context, count, None)
        assert rows is not None
        return rows

    def rows_unless(self, context: Sequence[int], count: int,
                    cancelled: Callable[[], bool] | None) -> np.ndarray | None:
        """`rows`, or ``None`` when ``cancelled()`` turns true before the forward's last layer
        segment is launched (checked between segments: real preemption of a running forward,
        at the granularity of ``segments``)."""
        seq = self._check(context, count)
        if self.graphs and not self._captured:
            self.capture()
        self._adopt(seq)
        n = 0
        limit = min(len(seq), len(self.tokens))
        while n < limit and seq[n] == self.tokens[n]:
            n += 1
        start = min(n, len(seq) - count)            # logits of index j give the row after seq[:j+1]
        with self._on_stream(), torch.inference_mode():
            logits = self._forward(seq[start:], start, cancelled)  # [len(seq) - start, V]
            if logits is None:
                self.tokens = seq[:start]     # later blocks never saw the new tokens
                self.preempted += 1
                return None
            self.tokens = seq
            self.forwards += 1
            probs = torch.softmax(logits[-count:].double(), dim=-1)
            if probs.device.type == "cpu":
                return probs.numpy()
            host = probs.to("cpu", non_blocking=True)
        assert self.stream is not None
        self.stream.synchronize()
        return host.numpy()

    def tree_rows(self, context: Sequence[int], parents: Sequence[int], tokens: Sequence[int],
                  count: int | None = None) -> np.ndarray:
        """Next-token rows (float64) of a token tree after ``context``, in one forward: the row
        after ``context`` (the root), then the row after each node's path, for the last
        ``count`` of these ``len(tokens) + 1`` (default: all).

        Node ``i`` is ``tokens[i]`` after node ``parents[i]`` (``-1``: the root; else an
        earlier node, ``parents[i] < i``). The nodes are laid out after ``context`` in the
        cache, node ``i`` at slot ``len(context) + 1 + i`` (BOS first), at the position of its
        depth, and attend to ``context`` and to their ancestors only (a tree attention mask).
        The tree held from the previous call is reused when ``context`` is the same and its
        nodes are the first of ``parents``/``tokens`` (drafting a tree level by level costs one
        forward over each level). A later call (`rows` or `tree_rows`) whose context follows a
        path of the held tree moves that path's keys/values to the contiguous slots (compaction)
        and drops the rest. Eager (no CUDA graph), not preemptible.
        """
        nodes = len(tokens)
        count = nodes + 1 if count is None else count
        seq = self._check(context, 1)
        if len(parents) != nodes or not all(isinstance(p, int) and -1 <= p < i
                                            for i, p in enumerate(parents)):
            raise BackendError(f"parents must give each of the {nodes} nodes an earlier node or "
                               f"-1 (the root), got {list(parents)!r}")
        if not 1 <= count <= nodes + 1:
            raise BackendError(f"count must lie in 1..{nodes + 1} for a tree of {nodes} nodes, "
                               f"got {count}")
        depth: list[int] = []
        for p in parents:
            depth.append(1 if p < 0 else depth[p] + 1)
        base = len(seq)
        if base + nodes > self.cache.capacity or base + max(depth, default=0) > \
                self.model.config.max_seq_len:
            raise BackendError(f"{self.lm.name}: a tree of {nodes} nodes after {base} tokens "
                               f"exceeds max_seq_len={self.model.config.max_seq_len}")
        if self.graphs and not self._captured:
            self.capture()
        if seq != self.tokens:
            self._adopt(seq)
        wanted = list(zip(parents, tokens, strict=True))
        held = 0
        if seq == self.tokens:
            while held < min(nodes, len(self.tree)) and self.tree[held] == wanted[held]:
                held += 1
        n = 0
        limit = min(len(seq), len(self.tokens))
        while n < limit and seq[n] == self.tokens[n]:
            n += 1
        first = nodes + 1 - count                  # the first row wanted (0: the root's)
        start = min(n, base - 1) if first == 0 else n
        t0 = 0 if n < base else min(held, max(first - 1, 0))   # the tree nodes to compute
        out = self._tree_forward(seq, start, parents, tokens, depth, t0)
        self.tokens, self.tree = seq, wanted
        self.forwards += 1
        probs = torch.softmax(out[-count:].double(), dim=-1)
        return probs.cpu().numpy()

    def _tree_forward(self, seq: list[int], start: int, parents: Sequence[int],
                      tokens: Sequence[int], depth: list[int], t0: int) -> torch.Tensor:
        """Logits of ``seq[start:]`` (causal) then of tree nodes ``t0..`` (tree mask)."""
        device = self.model.embed.device
        base = len(seq)
        ancestors: list[set[int]] = []
        for i, p in enumerate(parents):
            ancestors.append((ancestors[p] if p >= 0 else set()) | {i})
        capacity = self.cache.capacity
        key = torch.arange(capacity, device=device)
        linear = torch.arange(start, base, device=device)
        rows = [key[None, :] <= linear[:, None]]                        # [base - start, cap]
        tree = torch.zeros(len(tokens) - t0, capacity, dtype=torch.bool, device=device)
        tree[:, :base] = True
        for i in range(t0, len(tokens)):
            tree[i - t0, [base + j for j in ancestors[i]]] = True
        rows.append(tree)
        mask = torch.cat(rows)
        slots = torch.cat([linear, torch.arange(base + t0, base + len(tokens), device=device)])
        positions = torch.cat([linear, torch.tensor([base - 1 + d for d in depth[t0:]],
                                                    dtype=torch.long, device=device)])
        t = torch.tensor([seq[start:] + list(tokens[t0:])], dtype=torch.long, device=device)
        with self._on_stream(), torch.inference_mode():
            logits: torch.Tensor = self.model(t, positions, self.cache, slots=slots,
                                              mask=mask)[0]
        if self.stream is not None:
            self.stream.synchronize()
        return logits

    def _adopt(self, seq: list[int]) -> None:
        """Compaction: when ``seq`` follows the held tokens into the held tree, move the keys/
        values of the longest tree path it follows to the slots after the held tokens and hold
        them as tokens; drop the tree either way."""
        if not self.tree:
            return
        base = len(self.tokens)
        slots: list[int] = []
        if seq[:base] == self.tokens:
            parent = -1
            for token in seq[base:]:
                child = next((i for i, node in enumerate(self.tree) if node == (parent, token)),
                             None)
                if child is None:
                    break
                slots.append(base + child)
                parent = child
        self.tree = []
        if not slots:
            return
        device = self.model.embed.device
        src = torch.tensor(slots, device=device)
        dst = torch.arange(base, base + len(slots), device=device)
        with self._on_stream(), torch.inference_mode():
            for cache in (self.cache.keys, self.cache.values):   # gathered first: overlap-safe
                cache[:, :, :, dst] = cache[:, :, :, src]
        self.tokens = seq[:base + len(slots)]

    def _check(self, context: Sequence[int], count: int) -> list[int]:
        seq = [self.lm.bos, *context]
        if not 1 <= count <= len(seq):
            raise BackendError(f"count must lie in 1..{len(seq)} for a context of length "
                               f"{len(seq) - 1}, got {count}")
        if len(seq) > self.model.config.max_seq_len:
            raise BackendError(f"{self.lm.name}: sequence of {len(seq)} tokens (BOS included) "
                               f"exceeds max_seq_len={self.model.config.max_seq_len}; build the "
                               "model with a larger max_seq_len")
        return seq

    def _on_stream(self) -> contextlib.AbstractContextManager[Any]:
        """This session's stream as the current one (nothing on CPU)."""
        return torch.cuda.stream(self.stream) if self.stream is not None \
            else contextlib.nullcontext()

    def capture(self) -> None:
        """Capture the forward of every power-of-two query length up to `MAX_GRAPH_LENGTH` as
        CUDA graphs (capturing runs the model, so the cache is invalidated)."""
        if not self.graphs:
            raise BackendError("this session does not use CUDA graphs")
        assert self.stream is not None
        with torch.inference_mode():
            length = 1
            while length <= MAX_GRAPH_LENGTH:
                self._captured[length] = _Graph(self.model, self.cache, length, self.stream,
                                                 self._pool, len(self.segments))
                length *= 2
        self.tokens = []
        self.tree = []

    def _forward(self, tokens: list[int], start: int,
                 cancelled: Callable[[], bool] | None) -> torch.Tensor | None:
        out: list[torch.Tensor] = []
        step = MAX_GRAPH_LENGTH if self.graphs else len(tokens)
        for offset in range(0, len(tokens), step):
            chunk = tokens[offset:offset + step]
            logits = self._replay(chunk, start + offset, cancelled) if self.graphs \
                else self._eager(chunk, start + offset, cancelled)
            if logits is None:
                return None
            # a graph's output buffer is overwritten by its next replay: copy all but the last
            out.append(logits if offset + step >= len(tokens) else logits.clone())
        return out[0] if len(out) == 1 else torch.cat(out)

    def _eager(self, tokens: list[int], start: int,
               cancelled: Callable[[], bool] | None) -> torch.Tensor | None:
        device = self.model.embed.device
        t = torch.tensor([tokens], dtype=torch.long, device=device)
        positions = torch.arange(start, start + len(tokens), device=device)
        hidden: torch.Tensor | None = None
        for i, layers in enumerate(self.segments):
            if i and cancelled is not None and cancelled():
                return None
            hidden = self.model(t, positions, self.cache, hidden=hidden, layers=layers)
        assert hidden is not None
        return hidden[0]

    def _replay(self, tokens: list[int], start: int,
                cancelled: Callable[[], bool] | None) -> torch.Tensor | None:
        length = 1 << (len(tokens) - 1).bit_length()    # pad to a captured power of two
        graph = self._captured[length]
        assert self.stream is not None
        padded = tokens + [0] * (length - len(tokens))   # padding writes past the valid length
        done: list[torch.cuda.Event] = []
        with torch.cuda.stream(self.stream):
            graph.tokens.copy_(torch.tensor([padded], dtype=torch.long), non_blocking=True)
            graph.positions.copy_(torch.arange(start, start + length), non_blocking=True)
            for i, segment in enumerate(graph.graphs):
                if i >= 2:      # keep one segment queued ahead: wait for the one before it
                    done[i - 2].synchronize()
                if i and cancelled is not None and cancelled():
                    return None
                segment.replay()
                if len(graph.graphs) > 1:
                    event = torch.cuda.Event()
                    event.record(self.stream)
                    done.append(event)
            logits: torch.Tensor = graph.logits[0, :len(tokens)]
            return logits


class BatchedSession(_DeviceSession):
    """DSI's ``SP`` = ``sp_degree`` target servers as the rows of one static cache
    [layers, sp_degree, ...]: one forward serves every server that has work. On one GPU, batch-1
    forwards are latency-bound, so a forward of a few rows costs about one of a single row; the
    servers can then be batch rows (``Engine(batched=True)``) instead of streams that slow each
    other down. Row ``slot`` (``0 .. sp_degree − 1``) is server ``slot``'s sequence.

    Args:
        lm: the model.
        sp_degree: the number of target servers, one row each.
        graphs: CUDA graphs (default: on CUDA), one set per query length, for all rows at once.
        segments: layer segments per forward (preemption points, see `Session`).
    """

    def __init__(self, lm: NetworkLM, sp_degree: int, *, graphs: bool | None = None,
                 segments: int = 1, priority: int = 0) -> None:
        check_int("sp_degree", sp_degree, error=BackendError)
        self.lm, self.model, self.sp_degree = lm, lm.model, sp_degree
        self.cache = self.model.new_cache(sp_degree)
        self.tokens: list[list[int]] = [[] for _ in range(sp_degree)]
        self._init_device(graphs, segments, priority)

    def capture(self) -> None:
        """Capture every power-of-two query length up to `MAX_GRAPH_LENGTH` for all rows."""
        assert self.stream is not None
        with torch.inference_mode():
            length = 1
            while length <= MAX_GRAPH_LENGTH:
                self._captured[length] = _Graph(self.model, self.cache, length, self.stream,
                                                self._pool, len(self.segments), self.sp_degree)
                length *= 2
        self.tokens = [[] for _ in range(self.sp_degree)]

    def rows_batch(self, jobs: dict[int, tuple[Sequence[int], int]],
                   cancelled: Callable[[], bool] | None = None) -> dict[int, np.ndarray] | None:
        """For each ``slot: (context, count)`` (``slot`` = a server's row), the rows of
        `Session.rows` — computed by shared forwards over all rows; ``None`` when
        ``cancelled()`` turns true between segments."""
        if self.graphs and not self._captured:
            self.capture()
        pending: dict[int, list[int]] = {}
        starts: dict[int, int] = {}
        wanted: dict[int, int] = {}
        for slot, (context, count) in jobs.items():
            if not 0 <= slot < self.sp_degree:
                raise BackendError(f"slot {slot} is not one of 0..{self.sp_degree - 1}")
            seq = [self.lm.bos, *context]
            if not 1 <= count <= len(seq) or len(seq) > self.model.config.max_seq_len:
                raise BackendError(f"slot {slot}: count {count} or length {len(seq)} out of "
                                   f"range (max_seq_len {self.model.config.max_seq_len})")
            held = self.tokens[slot]
            n = 0
            while n < min(len(seq), len(held)) and seq[n] == held[n]:
                n += 1
            starts[slot] = min(n, len(seq) - count)
            pending[slot] = seq
            wanted[slot] = count
        out: dict[int, list[torch.Tensor]] = {slot: [] for slot in jobs}
        device = self.model.embed.device
        with contextlib.ExitStack() as stack:
            if self.stream is not None:
                stack.enter_context(torch.cuda.stream(self.stream))
            stack.enter_context(torch.inference_mode())
            offset = dict.fromkeys(jobs, 0)
            while any(starts[s] + offset[s] < len(pending[s]) for s in jobs):
                chunks = {s: pending[s][starts[s] + offset[s]:][:MAX_GRAPH_LENGTH] for s in jobs}
                longest = max(len(c) for c in chunks.values())
                length = 1 << (longest - 1).bit_length() if self.graphs else longest
                tokens = [[0] * length for _ in range(self.sp_degree)]
                positions = []
                for slot in range(self.sp_degree):
                    chunk = chunks.get(slot, [])
                    first = starts[slot] + offset[slot] if slot in jobs \
                        else len(self.tokens[slot])   # idle row: writes past its valid length
                    tokens[slot][:len(chunk)] = chunk
                    positions.append(list(range(first, first + length)))
                logits = self._run(tokens, positions, cancelled, device)
                if logits is None:
                    for slot in jobs:       # later blocks never saw the new tokens
                        self.tokens[slot] = pending[slot][:starts[slot] + offset[slot]]
                    return None
                for slot, chunk in chunks.items():
                    if chunk:
                        out[slot].append(logits[slot, :len(chunk)].clone())
                    offset[slot] += len(chunk)
            result: dict[int, torch.Tensor] = {}
            for slot in jobs:
                self.tokens[slot] = pending[slot]
                logits_slot = torch.cat(out[slot])[-wanted[slot]:]
                result[slot] = torch.softmax(logits_slot.double(), dim=-1).to(
                    "cpu", non_blocking=self.stream is not None)
            self.forwards += 1
        if self.stream is not None:
            self.stream.synchronize()
        return {slot: rows.numpy() for slot, rows in result.items()}

    def _run(self, tokens: list[list[int]], positions: list[list[int]],
             cancelled: Callable[[], bool] | None,
             device: torch.device) -> torch.Tensor | None:
        length = len(tokens[0])
        if not self.graphs:
            t = torch.tensor(tokens, dtype=torch.long, device=device)
            pos = torch.tensor(positions, dtype=torch.long, device=device)
            hidden: torch.Tensor | None = None
            for i, layers in enumerate(self.segments):
                if i and cancelled is not None and cancelled():
                    return None
                hidden = self.model(t, pos, self.cache, hidden=hidden, layers=layers)
            return hidden
        graph = self._captured[length]
        assert self.stream is not None
        graph.tokens.copy_(torch.tensor(tokens, dtype=torch.long), non_blocking=True)
        graph.positions.copy_(torch.tensor(positions, dtype=torch.long), non_blocking=True)
        done: list[torch.cuda.Event] = []
        for i, segment in enumerate(graph.graphs):
            if i >= 2:
                done[i - 2].synchronize()
            if i and cancelled is not None and cancelled():
                return None
            segment.replay()
            event = torch.cuda.Event()
            event.record(self.stream)
            done.append(event)
        return graph.logits
