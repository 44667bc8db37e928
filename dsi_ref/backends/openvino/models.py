"""The tiny Llama checkpoints of the vLLM family, converted to OpenVINO IR, cached by digest.

OpenVINO GenAI runs models in OpenVINO's own format (IR: ``openvino_model.xml`` + ``.bin``) with
tokenizers converted to OpenVINO models too (``openvino_tokenizer.xml``,
``openvino_detokenizer.xml``; a draft model is refused without them even when the prompt is given
as token ids). `convert` turns any Hugging Face causal-LM folder into such a folder, offline:
optimum-intel's exporter (``OVModelForCausalLM.from_pretrained(..., export=True)``, the same as
``optimum-cli export openvino``, weights kept in float32) and openvino-tokenizers'
``convert_tokenizer``. The checkpoints themselves are `dsi_ref.backends.vllm.models`' (numpy-seeded
weights, a WordLevel tokenizer), so the reference logits are the same float64 rows.

A converted folder is cached under `cache_root` in a folder named by a digest of the source
(its ``config.json`` and the size and modification time of its weight files), the releases of
openvino, optimum-intel and openvino-tokenizers, and `FORMAT`; it is written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from ...base.errors import EngineEnvironmentError, ModelDirectoryError
from ..vllm.models import build_models, load_config

__all__ = ["FORMAT", "IRSet", "build_ir", "cache_root", "conversion_versions", "convert",
           "is_ir_folder"]

#: Bumped when the way a folder is converted changes (a new digest, so a new cache folder).
FORMAT = 1
#: The files a converted folder holds (GenAI reads them by these names).
IR_FILES = ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml",
            "openvino_detokenizer.xml", "config.json")


def cache_root() -> Path:
    """Where converted folders are cached: ``$DSI_REF_CACHE/openvino-models`` (default
    ``~/.cache/dsi-ref/openvino-models``)."""
    root = os.environ.get("DSI_REF_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "dsi-ref")
    return Path(root) / "openvino-models"


def conversion_versions() -> dict[str, str]:
    """The releases the conversion depends on (`EngineEnvironmentError` when one is missing)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for name in ("openvino", "optimum-intel", "openvino-tokenizers"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            raise EngineEnvironmentError(
                f"{name} is not installed: build the OpenVINO environment with `python3 run.py "
                "audit --openvino` (it makes .venv-openvino)") from None
    return out


def is_ir_folder(folder: str | Path) -> bool:
    """Whether ``folder`` already holds a converted model with its tokenizers."""
    return all((Path(folder) / name).exists() for name in IR_FILES)


def _digest(source: Path) -> str:
    config = (source / "config.json").read_text()
    files = sorted((p.name, p.stat().st_size, int(p.stat().st_mtime))
                   for p in source.iterdir() if p.suffix in {".safetensors", ".bin"})
    text = json.dumps({"format": FORMAT, "config": config, "files": files,
                       "versions": conversion_versions()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _export(source: Path, out: Path) -> None:
    """optimum-intel's export and openvino-tokenizers' conversion of ``source`` into ``out``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import openvino as ov
        from openvino_tokenizers import convert_tokenizer
        from optimum.intel import OVModelForCausalLM
        from transformers import AutoTokenizer
    except ImportError as error:
        raise EngineEnvironmentError(
            f"the OpenVINO conversion cannot be imported here ({error}): build the environment "
            "with `python3 run.py audit --openvino`") from None
    try:
        # the exporter traces the model with torch.jit, which warns about every data-dependent
        # branch (TracerWarning): expected there, and an error under `-W error` (the test run)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = OVModelForCausalLM.from_pretrained(str(source), export=True, compile=False,
                                                       load_in_8bit=False)
            model.save_pretrained(str(out))
            tokenizer = AutoTokenizer.from_pretrained(str(source))
            encoder, decoder = convert_tokenizer(tokenizer, with_detokenizer=True)
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelDirectoryError(f"model directory {str(source)!r} does not convert to "
                                  f"OpenVINO IR: {first[:300]}") from None
    ov.save_model(encoder, str(out / "openvino_tokenizer.xml"))
    ov.save_model(decoder, str(out / "openvino_detokenizer.xml"))


def convert(source: str | Path, root: Path | None = None) -> Path:
    """The OpenVINO IR folder of the Hugging Face causal LM in ``source``: converted on first
    use (atomically) and reused afterwards. A folder that is already IR is returned as it is.

    Raises `ModelDirectoryError` (one line) for a folder that does not exist, holds no causal
    LM or does not convert, and `EngineEnvironmentError` without optimum-intel."""
    path = Path(source)
    if is_ir_folder(path):
        return path
    load_config(path)  # a folder that does not exist or holds no causal LM: say so first
    root = root or cache_root()
    folder = root / f"{path.name}-{_digest(path)}"
    if is_ir_folder(folder):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=root))
    try:
        _export(path, scratch / "m")
        try:
            (scratch / "m").rename(folder)
        except OSError:  # another process converted it first: theirs is the same model
            if not is_ir_folder(folder):
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


@dataclass(frozen=True)
class IRSet:
    """The converted folders of the audit, beside the Hugging Face checkpoints they come from
    (``hf_target`` is where the reference logits are computed)."""

    target: Path
    near: Path
    independent: Path
    hf_target: Path

    def drafter(self, name: str) -> Path:
        """The converted folder of drafter ``name`` (``near``, ``independent``)."""
        folder: Path = getattr(self, name)
        return folder


def build_ir(root: Path | None = None) -> IRSet:
    """The tiny target and its near and independent drafters (`dsi_ref.backends.vllm.models`),
    built or found in their cache, then converted or found in this one."""
    models = build_models()
    return IRSet(convert(models.target, root), convert(models.near, root),
                 convert(models.independent, root), models.target)
