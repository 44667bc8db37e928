"""Tiny Llama checkpoints built in code for the vLLM audit, and their logits in float64.

Nothing is downloaded: every weight is drawn from ``numpy.random.default_rng(seed)`` (the same
numbers on every machine and torch release), written as an ordinary Hugging Face checkpoint
(``config.json``, ``model.safetensors``, a WordLevel tokenizer) that vLLM loads as it would load
a downloaded model, and cached under `cache_root` in a folder named by a digest of the spec.

The models are small enough for exact laws and large enough for vLLM's CPU attention (head size
32, the smallest it accepts):

* `TARGET`: vocabulary 8, hidden size 64, 2 layers, 2 heads of 32; random weights, the LM head
  scaled so that a row is neither flat nor a point mass.
* `NEAR`: the target's weights plus 10 % noise: a drafter with a high acceptance rate
  (`acceptance_rate` computes it from the rows).
* `INDEPENDENT`: weights of its own: a drafter with a low acceptance rate.
* `WIDE`: vocabulary 9: a drafter whose vocabulary is not the target's (a named error).
* `EAGLE`: an EAGLE-1 head for the target (one decoder layer and the ``fc`` that mixes the
  target's hidden state with the token embedding), random: any head is lossless or not by the
  verifier alone, so its acceptance rate does not matter.

`logit_rows` runs a checkpoint in float64 with ``transformers`` (the reference), so the exact
law of the first tokens is computed from the same weights vLLM runs in float32.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...base.errors import ModelDirectoryError, VocabularyMismatchError

__all__ = [
    "EAGLE",
    "INDEPENDENT",
    "NEAR",
    "TARGET",
    "WIDE",
    "EagleHead",
    "ModelSet",
    "TinyLlama",
    "acceptance_rate",
    "build",
    "build_models",
    "cache_root",
    "check_same_vocabulary",
    "load_config",
    "logit_rows",
]

#: Bumped when the way a checkpoint is written changes (a new digest, so a new cache folder).
FORMAT = 1


@dataclass(frozen=True)
class TinyLlama:
    """A random Llama checkpoint, fully described by these fields.

    ``base`` and ``noise``: the weights are ``base``'s plus ``noise`` times a standard normal
    draw times the weight's own standard deviation (a near copy of ``base``).
    """

    name: str
    seed: int
    vocab_size: int = 8
    hidden_size: int = 64
    layers: int = 2
    heads: int = 2
    head_dim: int = 32
    intermediate_size: int = 128
    weight_std: float = 0.15
    head_std: float = 0.3
    base: TinyLlama | None = None
    noise: float = 0.0

    def digest(self) -> str:
        """A digest of the spec (and `FORMAT`): the name of its cache folder."""
        text = json.dumps({"format": FORMAT, **asdict(self)}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class EagleHead:
    """A random EAGLE-1 head (vLLM's ``method="eagle"``) for ``target``: one decoder layer."""

    name: str
    seed: int
    target: TinyLlama
    weight_std: float = 0.1

    def digest(self) -> str:
        """A digest of the spec (and `FORMAT`)."""
        text = json.dumps({"format": FORMAT, **asdict(self)}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


TARGET = TinyLlama("target", seed=1)
NEAR = TinyLlama("near", seed=2, base=TARGET, noise=0.1)
INDEPENDENT = TinyLlama("independent", seed=3)
WIDE = TinyLlama("wide", seed=4, vocab_size=9)
EAGLE = EagleHead("eagle", seed=5, target=TARGET)


def cache_root() -> Path:
    """Where checkpoints are cached: ``$DSI_REF_CACHE/vllm-models`` (default
    ``~/.cache/dsi-ref/vllm-models``)."""
    root = os.environ.get("DSI_REF_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "dsi-ref")
    return Path(root) / "vllm-models"


def _config(spec: TinyLlama) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size, "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads, "num_key_value_heads": spec.heads,
        "head_dim": spec.head_dim, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": spec.vocab_size - 1, "torch_dtype": "float32",
        "attention_bias": False, "mlp_bias": False,
    }


def _shapes(spec: TinyLlama) -> dict[str, tuple[int, ...]]:
    h, i, v = spec.hidden_size, spec.intermediate_size, spec.vocab_size
    qkv = spec.heads * spec.head_dim
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (v, h)}
    for layer in range(spec.layers):
        at = f"model.layers.{layer}"
        shapes |= {f"{at}.self_attn.q_proj.weight": (qkv, h),
                   f"{at}.self_attn.k_proj.weight": (qkv, h),
                   f"{at}.self_attn.v_proj.weight": (qkv, h),
                   f"{at}.self_attn.o_proj.weight": (h, qkv),
                   f"{at}.mlp.gate_proj.weight": (i, h), f"{at}.mlp.up_proj.weight": (i, h),
                   f"{at}.mlp.down_proj.weight": (h, i),
                   f"{at}.input_layernorm.weight": (h,),
                   f"{at}.post_attention_layernorm.weight": (h,)}
    shapes |= {"model.norm.weight": (h,), "lm_head.weight": (v, h)}
    return shapes


def weights(spec: TinyLlama) -> dict[str, np.ndarray]:
    """The checkpoint's tensors (float32), drawn from ``default_rng(spec.seed)`` in name order:
    norms 1, the embedding and the projections ``N(0, weight_std²)``, the LM head
    ``N(0, head_std²)``; a near copy adds its noise to its base's tensors."""
    rng = np.random.default_rng(spec.seed)
    base = weights(spec.base) if spec.base is not None else None
    out: dict[str, np.ndarray] = {}
    for name, shape in sorted(_shapes(spec).items()):
        if name.endswith("norm.weight"):
            w = np.ones(shape)
        else:
            std = spec.head_std if name == "lm_head.weight" else spec.weight_std
            w = rng.normal(0.0, std, size=shape)
        if base is not None:
            if base[name].shape != shape:
                raise VocabularyMismatchError(f"{spec.name}: a near copy of {spec.base} must "
                                              "have its shapes")
            w = base[name] + spec.noise * rng.normal(size=shape) * float(base[name].std() or 1)
        out[name] = w.astype(np.float32)
    return out


def _tokenizer_files(vocab_size: int) -> dict[str, Any]:
    """A WordLevel tokenizer whose words are ``t0 .. t{V-1}`` (id = index), BOS ``t0``, EOS the
    last word: enough for vLLM's tokenizer initialisation; the audit gives token ids."""
    vocab = {f"t{i}": i for i in range(vocab_size)}
    tokenizer: dict[str, Any] = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "t0"},
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "t0",
              "eos_token": f"t{vocab_size - 1}", "unk_token": "t0",
              "model_max_length": 64, "clean_up_tokenization_spaces": False}
    return {"tokenizer.json": tokenizer, "tokenizer_config.json": config,
            "special_tokens_map.json": {"bos_token": "t0", "eos_token": f"t{vocab_size - 1}",
                                        "unk_token": "t0"}}


def _write(folder: Path, config: dict[str, Any], tensors: dict[str, np.ndarray],
           vocab_size: int) -> None:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 0, "eos_token_id": vocab_size - 1, "do_sample": True}))
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    for name, content in _tokenizer_files(vocab_size).items():
        (folder / name).write_text(json.dumps(content, indent=2))


def _eagle_tensors(head: EagleHead) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    t = head.target
    h, i, qkv = t.hidden_size, t.intermediate_size, t.heads * t.head_dim
    config = {**_config(t), "num_hidden_layers": 1}
    shapes = {"fc.weight": (h, 2 * h), "layers.0.self_attn.q_proj.weight": (qkv, h),
              "layers.0.self_attn.k_proj.weight": (qkv, h),
              "layers.0.self_attn.v_proj.weight": (qkv, h),
              "layers.0.self_attn.o_proj.weight": (h, qkv),
              "layers.0.mlp.gate_proj.weight": (i, h), "layers.0.mlp.up_proj.weight": (i, h),
              "layers.0.mlp.down_proj.weight": (h, i),
              "layers.0.post_attention_layernorm.weight": (h,)}
    rng = np.random.default_rng(head.seed)
    tensors = {name: (np.ones(shape) if name.endswith("norm.weight")
                      else rng.normal(0.0, head.weight_std, size=shape)).astype(np.float32)
               for name, shape in sorted(shapes.items())}
    return config, tensors


def build(spec: TinyLlama | EagleHead, root: Path | None = None) -> Path:
    """The checkpoint folder of ``spec``, written on first use (atomically: a half-written
    folder is never seen) and reused afterwards."""
    root = root or cache_root()
    folder = root / f"{spec.name}-{spec.digest()}"
    if (folder / "model.safetensors").exists():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=root))
    try:
        if isinstance(spec, EagleHead):
            config, tensors = _eagle_tensors(spec)
            _write(scratch / "m", config, tensors, spec.target.vocab_size)
        else:
            _write(scratch / "m", _config(spec), weights(spec), spec.vocab_size)
        try:
            (scratch / "m").rename(folder)
        except OSError:  # another process wrote it first: theirs is the same checkpoint
            if not (folder / "model.safetensors").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


@dataclass(frozen=True)
class ModelSet:
    """The checkpoint folders of one audit: the target and every drafter."""

    target: Path
    near: Path
    independent: Path
    wide: Path
    eagle: Path

    def drafter(self, name: str) -> Path:
        """The folder of drafter ``name`` (``near``, ``independent``, ``wide``, ``eagle``)."""
        folder: Path = getattr(self, name)
        return folder


def build_models(root: Path | None = None) -> ModelSet:
    """Every checkpoint of the audit, built (or found in the cache)."""
    return ModelSet(build(TARGET, root), build(NEAR, root), build(INDEPENDENT, root),
                    build(WIDE, root), build(EAGLE, root))


def load_config(folder: str | Path) -> dict[str, Any]:
    """The ``config.json`` of a causal-LM checkpoint folder; `ModelDirectoryError` when the
    folder does not exist, has no readable config, or its architecture is not a causal LM."""
    path = Path(folder)
    if not path.is_dir():
        raise ModelDirectoryError(f"model directory {str(folder)!r} does not exist")
    try:
        config: dict[str, Any] = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as error:
        raise ModelDirectoryError(f"model directory {str(folder)!r} has no readable "
                                  f"config.json ({type(error).__name__})") from None
    architectures = config.get("architectures") or []
    if not any(str(a).endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        raise ModelDirectoryError(f"model directory {str(folder)!r} is not a causal LM "
                                  f"(architectures {architectures or 'missing'})")
    if not isinstance(config.get("vocab_size"), int):
        raise ModelDirectoryError(f"model directory {str(folder)!r}: config.json has no "
                                  "vocab_size")
    return config


def check_same_vocabulary(target: str | Path, drafter: str | Path) -> None:
    """`VocabularyMismatchError` unless the two checkpoints have one vocabulary size."""
    v_target = load_config(target)["vocab_size"]
    v_drafter = load_config(drafter)["vocab_size"]
    if v_target != v_drafter:
        raise VocabularyMismatchError(
            f"drafter {str(drafter)!r} has a vocabulary of {v_drafter} tokens, the target "
            f"{str(target)!r} {v_target}: speculative decoding needs the target's ids")


_LOADED: dict[str, Any] = {}


def logit_rows(folder: str | Path, contexts: Sequence[Sequence[int]]) -> np.ndarray:
    """The next-token logits (float64) of the checkpoint in ``folder`` after each context (all
    of one length), by ``transformers`` in float64: the reference rows of the audit (any causal
    LM ``AutoModelForCausalLM`` loads)."""
    import torch
    from transformers import AutoModelForCausalLM

    key = str(Path(folder).resolve())
    if key not in _LOADED:
        load_config(folder)
        try:
            model = AutoModelForCausalLM.from_pretrained(key, dtype=torch.float64)
        except (OSError, ValueError, KeyError) as error:
            raise ModelDirectoryError(f"model directory {str(folder)!r} does not load as a "
                                      f"causal LM: {str(error).splitlines()[0]}") from None
        _LOADED[key] = model.eval()
    model = _LOADED[key]
    lengths = {len(c) for c in contexts}
    if len(lengths) != 1:
        raise ValueError(f"contexts must have one length, got {sorted(lengths)}")
    with torch.no_grad():
        ids = torch.tensor([list(c) for c in contexts], dtype=torch.long)
        logits = model(input_ids=ids).logits[:, -1, :].double()
    rows: np.ndarray = logits.numpy().copy()
    return rows


def acceptance_rate(target: str | Path, drafter: str | Path, context: Sequence[int]) -> float:
    """``1 − TV(p, q)`` of the two checkpoints' next-token rows after ``context``: the
    probability that speculative sampling accepts a draft drawn from ``q`` there."""
    p = _softmax(logit_rows(target, [context])[0])
    q = _softmax(logit_rows(drafter, [context])[0])
    return float(1.0 - 0.5 * np.abs(p - q).sum())


def _softmax(row: np.ndarray) -> np.ndarray:
    z = np.exp(row - row.max())
    out: np.ndarray = z / z.sum()
    return out
