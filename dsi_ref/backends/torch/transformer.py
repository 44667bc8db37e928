"""The network behind `TorchLM`: a Llama-style transformer with a static KV cache, its presets.

Nothing can be downloaded here, so the models are built in code with seeded random weights of
realistic *shapes* (`PRESETS`: a TinyLlama-shaped ~1.1B target, a Llama-2-7B-shaped target, a
Vicuna-68M-shaped drafter, and tiny ones for CPU tests). Latency depends on shapes, not on weight
values, so these models time like the real ones.

Acceptance does depend on the weights. Two independently random models would almost never agree,
so a target and a drafter built with the same ``shared_seed`` share a *low-rank bigram head*
(``shared_scale · U[last token] · W``) added to each model's own (normalised) logits: the knowledge
both models have in common, as a real drafter distilled from its target shares its target's. The
ratio ``shared_scale / own_scale`` sets how often they agree; the acceptance rate is then
*measured* (`dsi_ref.backends.engine.measure`), never assumed.

Shapes of the model (one layer):

* ``x``: [B, L, d_model] residual stream; RMSNorm → fused q/k/v projection → rotary embedding →
  keys/values written into the static cache at their absolute positions → causal attention over
  the whole cache with a mask ``key_position <= query_position`` → output projection; RMSNorm →
  SwiGLU MLP.
* The cache is static, [n_layers, B, n_heads, capacity, head_dim]: "truncating" it after a rejected
  draft is free (the valid length moves back; stale entries are masked until overwritten). Static
  shapes are what lets a forward be captured once as a CUDA graph and replayed.

Also here: the dtype names (`DTYPES`) and the device helpers every model of the backend shares.
The `LanguageModel` over this network is `dsi_ref.backends.torch.model.TorchLM`; the sessions
that run it are in `dsi_ref.backends.torch.session`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TypedDict

import torch
import torch.nn.functional as F

from ...base.errors import BackendError
from ...base.validate import check_int

__all__ = [
    "DTYPES",
    "MAX_GRAPH_LENGTH",
    "PRESETS",
    "KVCache",
    "ModelConfig",
    "Transformer",
    "canonical_device",
    "describe_device",
    "resolve_device",
]

#: Captured CUDA-graph query lengths are powers of two up to this (longer inputs are chunked).
MAX_GRAPH_LENGTH = 64


@dataclass(frozen=True)
class ModelConfig:
    """Shape and logit mixing of a random-weight Llama-style model.

    Args:
        vocab_size: number of tokens.
        d_model: width of the residual stream.
        n_layers: transformer blocks.
        n_heads: attention heads (``d_model`` must be divisible; head_dim must be even for RoPE).
        d_ff: hidden width of the SwiGLU MLP.
        max_seq_len: longest sequence (BOS + prompt + generated tokens) a session can hold.
        rope_base: RoPE frequency base.
        own_scale: standard deviation of the model's own (normalised) logits.
        shared_rank: rank of the shared bigram head (0: none).
        shared_scale: standard deviation of the shared bigram logits.
        shared_seed: seed of the shared head; models with equal ``shared_seed``, ``shared_rank``
            and vocabulary share it exactly.
        name: a label for reports.
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    max_seq_len: int = 512
    rope_base: float = 10000.0
    own_scale: float = 1.0
    shared_rank: int = 0
    shared_scale: float = 0.0
    shared_seed: int = 1234
    name: str = "custom"

    def __post_init__(self) -> None:
        for field_name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_seq_len"):
            check_int(f"ModelConfig.{field_name}", getattr(self, field_name), error=BackendError)
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise BackendError(f"ModelConfig: d_model={self.d_model} must be n_heads="
                               f"{self.n_heads} times an even head dimension (for RoPE)")
        if self.shared_rank < 0:
            raise BackendError(f"ModelConfig.shared_rank must be >= 0, got {self.shared_rank}")
        for field_name in ("own_scale", "shared_scale"):
            value = getattr(self, field_name)
            if not (math.isfinite(value) and value >= 0):
                raise BackendError(f"ModelConfig.{field_name} must be finite and >= 0, "
                                   f"got {value!r}")
        if not self.rope_base > 1:
            raise BackendError(f"ModelConfig.rope_base must be > 1, got {self.rope_base!r}")

    @property
    def head_dim(self) -> int:
        """``d_model // n_heads``."""
        return self.d_model // self.n_heads

    def n_params(self) -> int:
        """Number of parameters (embedding, blocks, norms, LM head, shared head)."""
        d, v = self.d_model, self.vocab_size
        block = 4 * d * d + 3 * d * self.d_ff + 2 * d
        return 2 * v * d + self.n_layers * block + d + 2 * v * self.shared_rank


class _SharedHead(TypedDict):
    """The shared bigram head's fields of `ModelConfig` (one per family of presets)."""

    shared_rank: int
    shared_scale: float
    shared_seed: int


_SHARED: _SharedHead = {"shared_rank": 64, "shared_scale": 12.0, "shared_seed": 1234}
_TINY_SHARED: _SharedHead = {"shared_rank": 4, "shared_scale": 4.0, "shared_seed": 7}

#: Built-in configurations. Shapes follow public models: TinyLlama-1.1B, Llama-2-7B, Vicuna-68M.
PRESETS: dict[str, ModelConfig] = {
    "llama-7b": ModelConfig(32000, 4096, 32, 32, 11008, name="llama-7b", **_SHARED),
    "llama-1b": ModelConfig(32000, 2048, 22, 32, 5632, name="llama-1b", **_SHARED),
    "llama-68m": ModelConfig(32000, 768, 2, 12, 3072, name="llama-68m", **_SHARED),
    "tiny-target": ModelConfig(11, 32, 2, 4, 64, max_seq_len=128, name="tiny-target",
                               **_TINY_SHARED),
    "tiny-drafter": ModelConfig(11, 16, 1, 2, 32, max_seq_len=128, name="tiny-drafter",
                                **_TINY_SHARED),
}


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on [B, H, L, D] with cos/sin [L, D/2] (halves layout, as in Llama/GPT-NeoX)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


@dataclass(eq=False)
class KVCache:
    """Static keys/values [n_layers, B, n_heads, capacity, head_dim] of one session."""

    keys: torch.Tensor
    values: torch.Tensor

    @property
    def capacity(self) -> int:
        """Positions the cache holds."""
        return int(self.keys.shape[3])


class Transformer(torch.nn.Module):
    """A Llama-style decoder with seeded random weights (see the module docstring)."""

    cos: torch.Tensor             # [capacity, head_dim / 2] RoPE tables (buffers)
    sin: torch.Tensor
    key_positions: torch.Tensor   # [capacity] 0, 1, 2, ...

    def __init__(self, config: ModelConfig, *, seed: int, device: torch.device,
                 dtype: torch.dtype, draw: bool = True) -> None:
        super().__init__()
        self.config = config
        d, v, ff, layers = config.d_model, config.vocab_size, config.d_ff, config.n_layers
        gen = torch.Generator(device=device).manual_seed(seed)

        def normal(*shape: int, std: float, generator: torch.Generator = gen,
                   dtype: torch.dtype = dtype) -> torch.nn.Parameter:
            t = torch.empty(*shape, device=device, dtype=dtype)
            if draw:          # else left unwritten, for load_state_dict(assign=True)
                t.normal_(0.0, std, generator=generator)
            return torch.nn.Parameter(t, requires_grad=False)

        def ones(*shape: int) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.ones(*shape, device=device, dtype=dtype),
                                      requires_grad=False)

        out_std = 0.02 / math.sqrt(2 * layers)  # GPT-2's scaled init of residual projections
        self.embed = normal(v, d, std=0.02)
        self.wqkv = torch.nn.ParameterList(normal(3 * d, d, std=0.02) for _ in range(layers))
        self.wo = torch.nn.ParameterList(normal(d, d, std=out_std) for _ in range(layers))
        self.w13 = torch.nn.ParameterList(normal(2 * ff, d, std=0.02) for _ in range(layers))
        self.w2 = torch.nn.ParameterList(normal(d, ff, std=out_std) for _ in range(layers))
        self.norm1 = torch.nn.ParameterList(ones(d) for _ in range(layers))
        self.norm2 = torch.nn.ParameterList(ones(d) for _ in range(layers))
        self.norm_out = ones(d)
        self.lm_head = normal(v, d, std=0.02)
        # own logits: after the final RMSNorm each logit has std ~ 0.02 * sqrt(d); rescale to 1
        self.own_factor = config.own_scale / (0.02 * math.sqrt(d))
        self.shared_u: torch.nn.Parameter | None = None
        self.shared_w: torch.nn.Parameter | None = None
        self.logit_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        if config.shared_rank:
            shared_gen = torch.Generator(device=device).manual_seed(config.shared_seed)
            r = config.shared_rank
            self.shared_u = normal(v, r, std=1.0, generator=shared_gen, dtype=self.logit_dtype)
            self.shared_w = normal(v, r, std=1.0 / math.sqrt(r), generator=shared_gen,
                                   dtype=self.logit_dtype)
        half = config.head_dim // 2
        inv_freq = 1.0 / config.rope_base ** (torch.arange(half, dtype=torch.float64) / half)
        angles = torch.outer(torch.arange(config.max_seq_len + MAX_GRAPH_LENGTH,
                                          dtype=torch.float64), inv_freq)
        self.register_buffer("cos", angles.cos().to(device=device, dtype=dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(device=device, dtype=dtype), persistent=False)
        self.register_buffer("key_positions",
                             torch.arange(config.max_seq_len + MAX_GRAPH_LENGTH, device=device),
                             persistent=False)

    def new_cache(self, batch: int = 1) -> KVCache:
        """An empty static cache for ``batch`` sequences (room for padded graph inputs too)."""
        c = self.config
        shape = (c.n_layers, batch, c.n_heads, c.max_seq_len + MAX_GRAPH_LENGTH, c.head_dim)
        return KVCache(torch.zeros(shape, device=self.embed.device, dtype=self.embed.dtype),
                       torch.zeros(shape, device=self.embed.device, dtype=self.embed.dtype))

    def segments(self, count: int) -> list[tuple[int, int]]:
        """``count`` contiguous layer ranges ``[l0, l1)`` covering every layer (fewer when there
        are fewer layers): the units between which a forward can be preempted."""
        count = max(1, min(count, self.config.n_layers))
        bounds = [round(i * self.config.n_layers / count) for i in range(count + 1)]
        return list(itertools.pairwise(bounds))

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache, *,
                hidden: torch.Tensor | None = None,
                layers: tuple[int, int] | None = None,
                slots: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, L, V] (float32, or float64 for a float64 model) for ``tokens`` [B, L] at
        absolute ``positions`` [L] (or [B, L]: each row at its own positions); writes their
        keys/values into ``cache`` at those positions.

        A token tree (``positions`` [L] only): ``slots`` [L] are the cache slots the keys/values
        go to instead of ``positions`` (which still give RoPE: a node's depth), and ``mask``
        [L, capacity] (bool) says which cache slots each query attends to instead of the causal
        ``slot <= position`` (`dsi_ref.backends.torch.session.Session.tree_rows`).

        With ``layers=(l0, l1)`` only those blocks run: the input is ``hidden`` (the residual
        stream [B, L, d_model] after block ``l0 - 1``; the embedding when ``l0 == 0``) and the
        output is the residual stream after block ``l1 - 1``, or the logits when ``l1`` is the
        last block.
        """
        c = self.config
        b, length = tokens.shape
        l0, l1 = layers if layers is not None else (0, c.n_layers)
        x = F.embedding(tokens, self.embed) if l0 == 0 else hidden
        if x is None:
            raise BackendError(f"forward from block {l0} needs the hidden state (hidden=)")
        per_row = positions.dim() == 2      # [B, L]: each row at its own positions
        if per_row and (slots is not None or mask is not None):
            raise BackendError("slots= and mask= take positions [L], not [B, L]")
        if per_row:
            cos, sin = self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)
            mask = (self.key_positions[None, None, :]
                    <= positions[:, :, None]).unsqueeze(1)                   # [B, 1, L, cap]
            index = positions[:, None, :, None].expand(b, c.n_heads, length, c.head_dim)
        else:
            cos, sin = self.cos[positions], self.sin[positions]
            if mask is None:
                mask = self.key_positions[None, :] <= positions[:, None]    # [L, capacity]
        where = positions if slots is None else slots
        for i in range(l0, l1):
            h = _rms_norm(x, self.norm1[i])
            q, k, v = F.linear(h, self.wqkv[i]).view(b, length, 3, c.n_heads, c.head_dim) \
                .permute(2, 0, 3, 1, 4)                                      # 3 x [B, H, L, D]
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
            if per_row:
                cache.keys[i].scatter_(2, index, k)
                cache.values[i].scatter_(2, index, v)
            else:
                cache.keys[i].index_copy_(2, where, k)
                cache.values[i].index_copy_(2, where, v)
            attn = F.scaled_dot_product_attention(q, cache.keys[i], cache.values[i],
                                                  attn_mask=mask)            # [B, H, L, D]
            x = x + F.linear(attn.transpose(1, 2).reshape(b, length, c.d_model), self.wo[i])
            gate, up = F.linear(_rms_norm(x, self.norm2[i]), self.w13[i]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, self.w2[i])
        if l1 < c.n_layers:
            return x
        logits = F.linear(_rms_norm(x, self.norm_out), self.lm_head).to(self.logit_dtype)
        logits = logits * self.own_factor
        if self.shared_u is not None and self.shared_w is not None:
            # in float32 at least: these logits are large (std shared_scale), and bfloat16's
            # resolution at that size would create ties at the top
            bigram = F.linear(F.embedding(tokens, self.shared_u), self.shared_w)
            logits = logits + c.shared_scale * bigram
        return logits


#: dtype names accepted wherever a dtype is (the CLI's ``--dtype``).
DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16,
                                  "fp32": torch.float32, "fp64": torch.float64}


def resolve_device(device: str) -> str:
    """``"auto"`` → ``"cuda"`` when available, else ``"cpu"``; other names pass through."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def canonical_device(device: str | torch.device) -> torch.device:
    """``device`` with its index made explicit (``cuda`` → ``cuda:<current>``), so that two
    spellings of one device compare equal."""
    device = torch.device(device)
    index: int | None = device.index      # None for a bare "cuda" (the stubs say int)
    if device.type == "cuda" and index is None:
        if not torch.cuda.is_available():
            raise BackendError("device='cuda' requested but torch.cuda.is_available() is False")
        return torch.device("cuda", torch.cuda.current_device())
    if device.type == "cuda" and index is not None and index >= torch.cuda.device_count():
        raise BackendError(f"{device} requested but this machine has "
                           f"{torch.cuda.device_count()} CUDA device(s)")
    return device


def describe_device(device: str) -> str:
    """The device's name and the torch version, for reports."""
    name = torch.cuda.get_device_name(torch.device(device)) \
        if torch.device(device).type == "cuda" else "cpu"
    return f"{name}, torch {torch.__version__}"
