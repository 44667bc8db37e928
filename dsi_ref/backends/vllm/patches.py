"""vLLM's CPU ``expand_kernel`` shim as released, half fixed and fixed (vllm-project/vllm#55005).

On a machine without Triton's CPU backend, vLLM registers C++ stand-ins for its Triton kernels
(``CpuPlatform.register_triton_kernel_overrides``). The stand-in for ``expand_kernel``
(``vllm.utils.cpu_triton_utils._expand_kernel_impl``), which spreads each request's
temperature, top-k and top-p over its draft positions, has two layers of bug:

1. it hands the C++ kernel ``_ensure_int64(output)``, a *new* int64 tensor whenever the caller's
   buffer is float32 (temperature, top-p) or int32 (top-k), and never copies it back: the
   rejection sampler then divides the logits by uninitialised memory;
2. it converts the input to int64 too, truncating the floats: temperature 0.7 becomes 0, which
   the kernel's ``replace_from=0 → replace_to=1`` rewrite (meant for greedy requests) turns
   into 1, so the target rows are verified at temperature 1 while the request asked for 0.7.

The variants (`EXPANDS`), installed in-process before the engine starts (one process:
``VLLM_ENABLE_V1_MULTIPROCESSING=0``):

* ``"stock"``: the release as it is;
* ``"copy-back"``: layer 1 fixed only (the int64 result copied into the caller's buffer):
  lossless at temperature 1, lossy at 0.7, which shows layer 2 on its own;
* ``"fixed"``: the expansion done natively at the caller's dtype with
  ``torch.repeat_interleave`` and the ``replace_from → replace_to`` rewrite applied before the
  store, as upstream's pull request #55006 does; and the guard below.

A third bug shows once the first is fixed: on a CPU, top-k without top-p takes the path
``apply_top_k_only``, which calls ``k.max()``; in a step where no request has a draft token
(every request one token from its ``max_tokens``), the rejection sampler hands it zero rows and
the empty ``max()`` raises, ending the engine. ``"fixed"`` also returns the zero rows unchanged
there (`install_empty_step_guard`); the other variants leave it as released.
"""

from __future__ import annotations

from typing import Any

from ...base.errors import EngineEnvironmentError

__all__ = ["EXPANDS", "install", "install_empty_step_guard", "install_expand"]

#: The variants of the CPU expand shim, in the order the findings list them.
EXPANDS: tuple[str, ...] = ("stock", "copy-back", "fixed")

_ORIGINAL: dict[str, Any] = {}


def _copy_back(output: Any, input_val: Any, cu_num_tokens: Any, replace_from: Any,
               replace_to: Any, MAX_NUM_TOKENS: Any = None) -> None:
    import torch
    import vllm.utils.cpu_triton_utils as cpu_tl

    out64 = cpu_tl._ensure_int64(output)
    torch.ops._C.expand_kernel_impl(out64, cpu_tl._ensure_int64(input_val),
                                    cpu_tl._ensure_int64(cu_num_tokens), replace_from,
                                    replace_to)
    if out64 is not output:
        output.copy_(out64.to(output.dtype))


def _fixed(output: Any, input_val: Any, cu_num_tokens: Any, replace_from: Any, replace_to: Any,
           MAX_NUM_TOKENS: Any = None) -> None:
    import torch

    ends = cu_num_tokens.to(torch.int64)
    counts = torch.diff(ends, prepend=ends.new_zeros(1))
    replaced = torch.where(input_val == replace_from,
                           torch.tensor(replace_to, dtype=input_val.dtype), input_val)
    expanded = torch.repeat_interleave(replaced, counts)
    output[:expanded.numel()].copy_(expanded)


def install_expand(variant: str) -> None:
    """Make vLLM's CPU platform register ``variant``'s expand shim (call before the engine
    starts: registration happens when its worker initialises)."""
    if variant not in EXPANDS:
        raise ValueError(f"expand variant must be one of {EXPANDS}, got {variant!r}")
    try:
        import vllm.utils.cpu_triton_utils as cpu_tl
    except ImportError as error:
        raise EngineEnvironmentError(f"vLLM's CPU kernels cannot be imported ({error}): build "
                                     "the environment with `python3 run.py audit --vllm`"
                                     ) from None
    if not hasattr(cpu_tl, "_expand_kernel_impl"):
        raise EngineEnvironmentError("this vLLM has no CPU expand shim "
                                     "(vllm.utils.cpu_triton_utils._expand_kernel_impl): the "
                                     "#55005 variants do not apply to it")
    _ORIGINAL.setdefault("expand", cpu_tl._expand_kernel_impl)
    cpu_tl._expand_kernel_impl = {"stock": _ORIGINAL["expand"], "copy-back": _copy_back,
                                  "fixed": _fixed}[variant]


def install_empty_step_guard(enabled: bool) -> None:
    """Return zero rows unchanged from vLLM's ``apply_top_k_only`` (``enabled``), or restore
    the released function."""
    import vllm.v1.sample.ops.topk_topp_sampler as sampler

    _ORIGINAL.setdefault("top_k_only", sampler.apply_top_k_only)
    original = _ORIGINAL["top_k_only"]

    def guarded(logits: Any, k: Any) -> Any:
        if logits.shape[0] == 0:
            return logits
        return original(logits, k)

    sampler.apply_top_k_only = guarded if enabled else original


def install(variant: str) -> None:
    """Install ``variant`` (`EXPANDS`): its expand shim, and the empty-step guard when
    ``"fixed"``."""
    install_expand(variant)
    install_empty_step_guard(variant == "fixed")
