"""Tiny Llama models for llama.cpp, written in code as GGUF files, and their float64 logits.

A `TinyLlama` is a seeded random Llama (vocabulary 259: three specials and the 256 bytes, an SPM
tokenizer with byte fallback; hidden size 64, 2 layers, 4 heads, float32 weights, about 0.5 MB)
that llama.cpp loads like any checkpoint. Nothing is downloaded: `write_gguf` writes the file with
the ``gguf`` writer that ships with llama.cpp, and `gguf_path` caches it under a name keyed by a
digest of the model's definition.

**Live and dead tokens.** Only the bytes of `LIVE` (eight letters) carry the model's randomness;
the other 251 tokens (specials included) get a logit tens of nats below them. One dimension of
the residual stream is a constant: every embedding has ``1`` there, no attention or MLP output
writes to it, and the LM head reads it with ``-DEAD_GAP`` for the dead tokens and ``0`` for the
live ones. So a dead token is rare (an EOS never ends a short run early) without being impossible,
and the audit's outcomes stay few (`dsi_ref.backends.llama_cpp.sampling` coarsens a dead token
into one outcome, `OTHER`).

**Drafters.** `near_drafter` is the target with every weight moved by ``noise`` times its own
scale (a drafter that agrees often), `independent_drafter` another seed (one that rarely does).

`forward` is the float64 forward pass of the same weights, llama.cpp's LLM_ARCH_LLAMA graph:
RMSNorm, rotary embeddings of the "normal" kind (adjacent pairs, base 10000), causal softmax
attention scaled by ``1/sqrt(head_dim)``, a SwiGLU MLP, a final RMSNorm and the LM head. The
reference laws are computed from it; tests/test_llama_models.py checks llama.cpp's logits
against it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np

from ...base.errors import InvalidParameterError, ModelFileError, VocabularyMismatchError

__all__ = ["BOS", "DEAD_GAP", "EOS", "LIVE", "N_VOCAB", "TOKEN_TEXTS", "UNK", "TinyLlama",
           "byte_token", "cache_dir", "check_same_vocabulary", "forward", "gguf_path",
           "independent_drafter", "live_tokens", "near_drafter", "read_vocabulary",
           "target_model", "token_byte", "write_gguf"]

#: The special tokens' ids (SPM's usual layout).
UNK, BOS, EOS = 0, 1, 2
#: Three specials, then one token per byte (``<0x00>`` ... ``<0xFF>``).
N_VOCAB = 3 + 256
#: The bytes whose tokens carry the model's law (see the module docstring).
LIVE = b"abcdefgh"
#: How far below the live tokens the LM head puts a dead token, per unit of the constant
#: dimension after the final RMSNorm (about 0.3-1 here, so 12-40 nats).
DEAD_GAP = 40.0
#: The token texts of the GGUF vocabulary.
TOKEN_TEXTS: tuple[str, ...] = ("<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)))
#: Bumped when the weights or the file layout change, so that cached files are not reused.
_FORMAT = 1


def byte_token(byte: int) -> int:
    """The token id of one byte (``3 + byte``)."""
    if not 0 <= byte < 256:
        raise InvalidParameterError(f"a byte is 0..255, got {byte!r}")
    return 3 + byte


def token_byte(token: int) -> int | None:
    """The byte of a byte token, ``None`` for a special token."""
    return token - 3 if 3 <= token < N_VOCAB else None


def live_tokens() -> tuple[int, ...]:
    """The ids of the live tokens (`LIVE`), ascending."""
    return tuple(byte_token(b) for b in LIVE)


@dataclass(frozen=True)
class TinyLlama:
    """A seeded random Llama, the same weights wherever it is built.

    Attributes:
        name: a label (also the GGUF's ``general.name``).
        seed: the seed of its weights.
        logit_scale: the spread of the live tokens' logits (about their standard deviation).
        noise_seed, noise: a drafter near another model: that model's weights (``seed``) plus
            ``noise`` times each tensor's scale times a standard normal from ``noise_seed``
            (``noise = 0``: none).
        n_embd, n_layer, n_head, n_ff, n_ctx: the shape (``n_ctx``: the trained context).
    """

    name: str
    seed: int
    logit_scale: float = 4.0
    noise_seed: int = 0
    noise: float = 0.0
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_ff: int = 128
    n_ctx: int = 256

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head or (self.n_embd // self.n_head) % 2:
            raise InvalidParameterError(f"{self.name}: n_embd {self.n_embd} must split into "
                                        f"{self.n_head} heads of an even size")
        if not self.noise >= 0 or not self.logit_scale > 0:
            raise InvalidParameterError(f"{self.name}: need noise >= 0 and logit_scale > 0")

    @property
    def head_dim(self) -> int:
        """The size of one attention head."""
        return self.n_embd // self.n_head

    def digest(self) -> str:
        """A digest of the definition (and of the layout's version): the cache key."""
        text = json.dumps({**asdict(self), "format": _FORMAT, "live": LIVE.hex(),
                           "gap": DEAD_GAP}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def weights(self) -> dict[str, np.ndarray]:
        """The tensors by their GGUF names, float32, shaped ``(out, in)`` as numpy sees them."""
        weights = _draw(replace(self, noise=0.0))
        if self.noise > 0:
            rng = np.random.default_rng([self.noise_seed, 7])
            for name in sorted(weights):
                w = weights[name]
                if name.endswith("norm.weight"):
                    continue                        # the norms stay 1: the trick needs them
                scale = float(np.std(w)) or 1.0
                moved = w + (self.noise * scale * rng.standard_normal(w.shape)).astype(np.float32)
                weights[name] = _keep_structure(name, moved, weights[name])
        return weights


def _draw(model: TinyLlama) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([model.seed, 1])
    d, f, v = model.n_embd, model.n_ff, N_VOCAB

    def mat(rows: int, cols: int, scale: float) -> np.ndarray:
        return (scale * rng.standard_normal((rows, cols))).astype(np.float32)

    w: dict[str, np.ndarray] = {}
    embd = mat(v, d, 1.0)
    embd[:, 0] = 1.0                                    # the constant dimension
    w["token_embd.weight"] = embd
    for i in range(model.n_layer):
        p = f"blk.{i}."
        w[p + "attn_norm.weight"] = np.ones(d, np.float32)
        w[p + "attn_q.weight"] = mat(d, d, d ** -0.5)
        w[p + "attn_k.weight"] = mat(d, d, d ** -0.5)
        w[p + "attn_v.weight"] = mat(d, d, d ** -0.5)
        out = mat(d, d, 0.5 * d ** -0.5)
        out[0] = 0.0                                    # nothing writes the constant dimension
        w[p + "attn_output.weight"] = out
        w[p + "ffn_norm.weight"] = np.ones(d, np.float32)
        w[p + "ffn_gate.weight"] = mat(f, d, d ** -0.5)
        w[p + "ffn_up.weight"] = mat(f, d, d ** -0.5)
        down = mat(d, f, 0.5 * f ** -0.5)
        down[0] = 0.0
        w[p + "ffn_down.weight"] = down
    w["output_norm.weight"] = np.ones(d, np.float32)
    head = np.zeros((v, d), np.float32)
    live = list(live_tokens())
    head[live, 1:] = mat(len(live), d - 1, model.logit_scale * (d - 1) ** -0.5)
    dead = [t for t in range(v) if t not in live]
    head[dead, 0] = -DEAD_GAP
    w["output.weight"] = head
    return w


def _keep_structure(name: str, moved: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Noise on a drafter's weights, but not on the entries that make dead tokens dead."""
    if name == "token_embd.weight":
        moved[:, 0] = base[:, 0]
    elif name.endswith(("attn_output.weight", "ffn_down.weight")):
        moved[0] = 0.0
    elif name == "output.weight":
        moved[:, 0] = base[:, 0]
        dead = [t for t in range(N_VOCAB) if t not in live_tokens()]
        moved[dead, 1:] = 0.0
    return moved


def target_model() -> TinyLlama:
    """The audited target."""
    return TinyLlama("dsi-ref tiny target", seed=36)


def near_drafter(noise: float = 0.1) -> TinyLlama:
    """The target plus ``noise`` (relative) on every weight: a drafter that agrees often."""
    return replace(target_model(), name=f"dsi-ref tiny near drafter ({noise:g} noise)",
                   noise_seed=1036, noise=noise)


def independent_drafter() -> TinyLlama:
    """A drafter of another seed: it rarely agrees with the target."""
    return TinyLlama("dsi-ref tiny independent drafter", seed=2036)


# -------------------------------------------------------------------------- the float64 forward

def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    out: np.ndarray = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return out


def _rope(x: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """llama.cpp's "normal" rotary embedding: dimensions ``(2i, 2i+1)`` of each head rotated
    by ``pos * base^(-2i/head_dim)``; ``x`` is ``(tokens, heads, head_dim)``."""
    n, _, hd = x.shape
    theta = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    angle = np.arange(n, dtype=np.float64)[:, None] * theta[None, :]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


@cache
def _float64_weights(model: TinyLlama) -> dict[str, np.ndarray]:
    out = {k: v.astype(np.float64) for k, v in model.weights().items()}
    for array in out.values():
        array.flags.writeable = False
    return out


def forward(model: TinyLlama, tokens: tuple[int, ...] | list[int],
            weights: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The float64 logits after each token of ``tokens`` (``(len(tokens), N_VOCAB)``).

    ``weights`` (``model.weights()``) may be given; by default the model's weights are drawn
    once per process and kept (read-only).
    """
    tokens = list(tokens)
    if not tokens or any(not 0 <= t < N_VOCAB for t in tokens):
        raise InvalidParameterError(f"tokens must be a non-empty list of ids in [0, {N_VOCAB}), "
                                    f"got {tokens!r}")
    if len(tokens) > model.n_ctx:
        raise InvalidParameterError(f"{len(tokens)} tokens exceed the context {model.n_ctx}")
    w = (_float64_weights(model) if weights is None
         else {k: v.astype(np.float64) for k, v in weights.items()})
    n, h, hd = len(tokens), model.n_head, model.head_dim
    x = w["token_embd.weight"][tokens]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(model.n_layer):
        p = f"blk.{i}."
        a = _rms_norm(x, w[p + "attn_norm.weight"])
        q = _rope((a @ w[p + "attn_q.weight"].T).reshape(n, h, hd))
        k = _rope((a @ w[p + "attn_k.weight"].T).reshape(n, h, hd))
        v = (a @ w[p + "attn_v.weight"].T).reshape(n, h, hd)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
        scores -= scores.max(axis=-1, keepdims=True)
        att = np.exp(scores)
        att /= att.sum(axis=-1, keepdims=True)
        mixed = np.einsum("hqk,khd->qhd", att, v).reshape(n, h * hd)
        x = x + mixed @ w[p + "attn_output.weight"].T
        m = _rms_norm(x, w[p + "ffn_norm.weight"])
        gate = m @ w[p + "ffn_gate.weight"].T
        up = m @ w[p + "ffn_up.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "ffn_down.weight"].T
    out: np.ndarray = _rms_norm(x, w["output_norm.weight"]) @ w["output.weight"].T
    return out


# ------------------------------------------------------------------------------ the GGUF files

def cache_dir() -> Path:
    """Where the GGUF files are cached: ``$DSI_REF_LLAMA_CACHE``, else
    ``$XDG_CACHE_HOME/dsi-ref/llama-cpp`` (``~/.cache/dsi-ref/llama-cpp``)."""
    explicit = os.environ.get("DSI_REF_LLAMA_CACHE")
    if explicit:
        return Path(explicit)
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "dsi-ref" / "llama-cpp"


def write_gguf(model: TinyLlama, path: Path | str) -> Path:
    """Write ``model`` as a GGUF file at ``path`` (float32 tensors, SPM byte vocabulary, BOS
    added by the tokenizer, no space prefix) with the ``gguf`` package's writer."""
    import gguf

    path = Path(path)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(model.name)
    writer.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    writer.add_context_length(model.n_ctx)
    writer.add_embedding_length(model.n_embd)
    writer.add_block_count(model.n_layer)
    writer.add_feed_forward_length(model.n_ff)
    writer.add_head_count(model.n_head)
    writer.add_head_count_kv(model.n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(model.head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(N_VOCAB)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(list(TOKEN_TEXTS))
    writer.add_token_scores([0.0] * N_VOCAB)
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    writer.add_token_types([*types, *[gguf.TokenType.BYTE] * 256])
    writer.add_unk_token_id(UNK)
    writer.add_bos_token_id(BOS)
    writer.add_eos_token_id(EOS)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(False)
    for name, tensor in model.weights().items():
        writer.add_tensor(name, np.ascontiguousarray(tensor, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def gguf_path(model: TinyLlama, directory: Path | str | None = None) -> Path:
    """The GGUF file of ``model`` in ``directory`` (default `cache_dir`), written on first use
    (atomically: a temporary name, then a rename) and reused while its definition is the same."""
    folder = Path(directory) if directory is not None else cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"tiny-llama-{model.digest()}.gguf"
    if not path.exists():
        partial = folder / f".{path.name}.{os.getpid()}.partial"
        write_gguf(model, partial)
        partial.replace(path)
    return path


def read_vocabulary(path: Path | str) -> tuple[str, ...]:
    """The token texts of a GGUF file (``tokenizer.ggml.tokens``), or `ModelFileError` in one
    line when it is not a readable GGUF with a vocabulary."""
    import gguf

    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"no model file at {path}")
    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, IndexError, KeyError) as error:
        raise ModelFileError(f"{path} is not a readable GGUF file: {error}") from None
    field = reader.fields.get("tokenizer.ggml.tokens")
    if field is None:
        raise ModelFileError(f"{path} has no vocabulary (tokenizer.ggml.tokens)")
    return tuple(bytes(field.parts[i]).decode(errors="replace") for i in field.data)


def check_same_vocabulary(target: Path | str, drafter: Path | str) -> None:
    """`VocabularyMismatchError` unless the drafter's GGUF has the target's vocabulary (the same
    texts for the same ids: speculative decoding compares ids)."""
    ours, theirs = read_vocabulary(target), read_vocabulary(drafter)
    if ours == theirs:
        return
    where = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                 min(len(ours), len(theirs)))
    shown = (f"id {where} is {theirs[where]!r} there, {ours[where]!r} in the target"
             if where < min(len(ours), len(theirs)) else "one vocabulary extends the other")
    raise VocabularyMismatchError(
        f"the drafter {drafter} has another vocabulary than the target {target} "
        f"({len(theirs)} tokens against {len(ours)}; {shown}); speculative decoding needs the "
        "same token ids")
