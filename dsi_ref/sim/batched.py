"""DSI/SI predicted for batched target servers on one device, from measured forward costs.

`BatchedCosts` holds the milliseconds of one device (a one-token target forward, SI's
verification forward, a batched forward over ``b`` active windows, a drafter forward and its
slowdown beside a running target forward); `predict` turns them into the event model's DSI and
SI latencies (`Contention` with ``batch``: the design of `dsi_ref.backends.engine.batched`, one
forward at a time carrying every task ready when the device frees). `H100_LLAMA7B` is the
measured preset of issue 25 (one H100, bf16, llama-7b / llama-68m shapes).

    python -m dsi_ref.sim.batched          # the table of docs/gpu-backend.md

Time unit: the target's one-token forward (TPOT); every cost is a measured ratio to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..base.errors import InvalidParameterError
from ..base.validate import check_int, check_number
from . import expected_latency
from .params import Contention

__all__ = ["H100_LLAMA7B", "BatchedCosts", "BatchedPrediction", "predict"]


@dataclass(frozen=True)
class BatchedCosts:
    """Measured costs (milliseconds) of one device serving DSI's target servers as batch rows.

    Args:
        tpot_ms: a one-token target forward (the time unit).
        verify_ms: SI's verification forward over ``lookahead + 1`` tokens (one session).
        batched_ms: ``{b: ms}``, a batched forward with ``b`` windows of ``lookahead + 1`` new
            tokens active; missing ``b`` are interpolated linearly (extended past the last).
        drafter_ms: a drafter forward alone.
        drafter_beside: a drafter forward's slowdown beside a running target forward (>= 1).
        lookahead: the window the forwards were measured with.
        source: where the numbers come from.
    """

    tpot_ms: float
    verify_ms: float
    batched_ms: Mapping[int, float]
    drafter_ms: float
    drafter_beside: float
    lookahead: int
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("tpot_ms", "verify_ms", "drafter_ms", "drafter_beside"):
            check_number(name, getattr(self, name), positive=True)
        check_int("lookahead", self.lookahead)
        if not self.batched_ms or 1 not in self.batched_ms:
            raise InvalidParameterError("batched_ms needs the cost of a forward with 1 window "
                                        f"active, got {dict(self.batched_ms)!r}")
        for b, ms in self.batched_ms.items():
            check_int("batched_ms key", b)
            check_number(f"batched_ms[{b}]", ms, positive=True)
        object.__setattr__(self, "batched_ms", MappingProxyType(dict(self.batched_ms)))

    @property
    def c(self) -> float:
        """The drafter's forward in TPOTs."""
        return self.drafter_ms / self.tpot_ms

    @property
    def verify_cost(self) -> float:
        """``v``: SI's verification forward in TPOTs."""
        return self.verify_ms / self.tpot_ms

    def batch_ms(self, rows: int) -> float:
        """A batched forward with ``rows`` windows active (interpolated)."""
        keys = sorted(self.batched_ms)
        table = self.batched_ms
        below = [b for b in keys if b <= rows]
        above = [b for b in keys if b >= rows]
        if below and above:
            lo, hi = below[-1], above[0]
        elif len(keys) == 1:
            return table[keys[0]]
        else:                                   # past the last: extend the last step
            lo, hi = keys[-2], keys[-1]
        if lo == hi:
            return table[lo]
        return table[lo] + (table[hi] - table[lo]) * (rows - lo) / (hi - lo)

    def contention(self, sp_degree: int) -> Contention:
        """The `Contention` of batched servers: ``batch[b − 1]`` = a forward over ``b`` windows
        over one session's forward of one window (``verify_ms``), for ``b = 1 .. sp_degree``."""
        check_int("sp_degree", sp_degree)
        batch = tuple(self.batch_ms(b) / self.verify_ms for b in range(1, sp_degree + 1))
        return Contention((1.0,), (1.0, self.drafter_beside), batch=batch)


#: Issue 25, one NVIDIA H100 (bf16, CUDA graphs), llama-7b / llama-68m shapes, k = 5: the
#: engine's target TPOT 7.9 ms; a `Session` forward of 6 new tokens after a 64-token prefix
#: 9.02 ms; a `BatchedSession` forward with 1 / 2 / 4 of 4 rows active (6 new tokens each)
#: 9.67 / 9.78 / 9.99 ms; a drafter forward 0.38 ms; beside a running 7B forward a drafter
#: forward took 0.659 ms instead of 0.431 ms (docs/gpu-results/run2/bench-7b-rejection.log).
H100_LLAMA7B = BatchedCosts(
    tpot_ms=7.9, verify_ms=9.02, batched_ms={1: 9.67, 2: 9.78, 4: 9.99}, drafter_ms=0.38,
    drafter_beside=0.659 / 0.431, lookahead=5,
    source="issue 25 (one H100, bf16, llama-7b/llama-68m) and run 2's drafter probe")


@dataclass(frozen=True)
class BatchedPrediction:
    """Predicted ms per token of SI and of batched DSI, and their ratio; for comparison, DSI
    if a task could join a running forward (``join_ms``: processor sharing with the slowdowns
    ``c(b) / c(1)``, continuous batching) and with independent servers (``independent_ms``)."""

    si_ms: float
    dsi_ms: float
    join_ms: float
    independent_ms: float
    sp_degree: int
    a: float

    @property
    def dsi_over_si(self) -> float:
        """DSI's speedup over SI (SI's latency over DSI's)."""
        return self.si_ms / self.dsi_ms


def predict(costs: BatchedCosts, a: float, sp_degree: int, n_tokens: int = 128,
            lookahead: int | None = None) -> BatchedPrediction:
    """SI and batched DSI (event model, `BatchedCosts.contention`) in ms per token, for
    acceptance rate ``a`` (exact expectations, `expected_latency`).

    SI pays ``c`` per draft and ``v`` per verification; DSI's verification tasks cost ``v``
    and its frontier tasks 1, each batched forward ``batch[b − 1]`` times its longest task.
    """
    k = costs.lookahead if lookahead is None else lookahead
    v = costs.verify_cost
    si = float(expected_latency("si", c=costs.c, a=a, lookahead=k, n_tokens=n_tokens,
                                verify_cost=v))
    batched = costs.contention(sp_degree)
    assert batched.batch is not None
    join = Contention(tuple(x / batched.batch[0] for x in batched.batch), batched.drafter)

    def dsi(contention: Contention | None) -> float:
        return float(expected_latency("dsi", c=costs.c, a=a, lookahead=k, n_tokens=n_tokens,
                                      verify_cost=v, model="event", sp_degree=sp_degree,
                                      contention=contention))

    unit = costs.tpot_ms / n_tokens
    return BatchedPrediction(si * unit, dsi(batched) * unit, dsi(join) * unit,
                             dsi(None) * unit, sp_degree, a)


def table(costs: BatchedCosts = H100_LLAMA7B, a: float = 0.768,
          sp_degrees: tuple[int, ...] = (2, 4), n_tokens: int = 128) -> str:
    """The markdown table of docs/gpu-backend.md: predicted SI and DSI ms/token, DSI/SI."""
    lines = [f"Predicted with `{costs.source}`: TPOT {costs.tpot_ms} ms, c = {costs.c:.4f}, "
             f"v = {costs.verify_cost:.4f}, k = {costs.lookahead}, a = {a}, N = {n_tokens}", "",
             "| SP | batch cost c(1..SP) / v | SI ms/token | DSI ms/token | **DSI/SI** | "
             "DSI/SI if tasks joined a running forward | DSI/SI, independent servers |",
             "|---|---|---|---|---|---|---|"]
    for sp in sp_degrees:
        p = predict(costs, a, sp, n_tokens)
        batch = ", ".join(f"{x:.3f}" for x in costs.contention(sp).batch or ())
        lines.append(f"| {sp} | {batch} | {p.si_ms:.3f} | {p.dsi_ms:.3f} | "
                     f"**{p.dsi_over_si:.3f}** | {p.si_ms / p.join_ms:.3f} | "
                     f"{p.si_ms / p.independent_ms:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
