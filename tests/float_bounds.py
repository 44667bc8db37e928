"""How far two float evaluations of the same torch model may differ: a bound, derived.

Two evaluations of one `Transformer` on the same input, with bit-identical weights (a replica,
another session, another device of the same kind), perform the same real-number computation
with the same operations. What may differ is the *order* of the additions inside reductions:
BLAS and oneDNN pick kernels by shape, thread count, and the alignment of the buffers, and each
kernel sums in its own order. Nothing else changes (no operation is replaced by another).

A sum of n terms computed in any order equals the exact sum of the terms each perturbed by a
relative error of at most γ_{n-1} = (n-1)u / (1 - (n-1)u), u the unit roundoff (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., Lemma 3.1 and §4.2). Following one
logit back through the network, its value passes through a chain of reductions whose lengths add
up to K (below); to first order (condition number of order one, which the random-weight models
with normalised activations have), each evaluation is within γ_K relative of the exact value,
so two evaluations are within 2γ_K of each other. A probability p_i = exp(z_i) / Σ exp(z_j) then
moves by at most a factor exp(2·δ) for a logit error δ, hence ``rtol = 4·γ_K`` on the rows.

K for one row of a `ModelConfig` (per block: RMSNorm over d, the q/k/v projection over d, the
scores over head_dim, the attention softmax and the weighted values over the cache capacity, the
output projection over d, RMSNorm over d, the gate/up projection over d, the down projection
over d_ff; then the final RMSNorm and the LM head over d, the shared head over its rank, and the
row softmax over the vocabulary):

    K = n_layers · (5·d + head_dim + 2·capacity + d_ff) + 2·d + shared_rank + V

For the tiny float64 target (capacity 128) that is 1,055 additions, so rtol = 4.7e-13:
rounding-order noise (seen: 8.6e-16 relative) passes, and any real difference (a wrong weight, a
redrawn model, float32 somewhere in a float64 path, ~1e-7 and up) fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from dsi_ref.backends.torch.transformer import ModelConfig

__all__ = ["assert_rows_close", "reduction_depth", "reorder_rtol"]


def reduction_depth(config: ModelConfig) -> int:
    """K: the additions on the reduction chain of one logit (module docstring)."""
    d, head_dim = config.d_model, config.d_model // config.n_heads
    per_block = 5 * d + head_dim + 2 * config.max_seq_len + config.d_ff
    return config.n_layers * per_block + 2 * d + config.shared_rank + config.vocab_size


def reorder_rtol(config: ModelConfig, dtype: torch.dtype) -> float:
    """4·γ_K in ``dtype``'s unit roundoff: two evaluations' rows agree within this, relative."""
    u = torch.finfo(dtype).eps / 2
    k = reduction_depth(config)
    return 4 * k * u / (1 - k * u)


def assert_rows_close(got: Sequence[float], expected: Sequence[float], rtol: float) -> None:
    """Every probability within ``rtol`` relative (zeros must be zeros on both sides)."""
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert math.isclose(a, b, rel_tol=rtol, abs_tol=0.0), (
            f"token {i}: {a!r} vs {b!r}, relative difference {abs(a - b) / max(abs(b), 1e-300):.3g}"
            f" > {rtol:.3g}")
