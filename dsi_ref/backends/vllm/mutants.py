"""What dsi-ref wraps around vLLM's ``rejection_sample`` in an engine's own process.

Installed by the worker (`dsi_ref.backends.vllm.worker`) before the engine starts, in-process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``): ``RejectionSampler.forward`` calls the module's
``rejection_sample`` by name, so replacing it there reaches every speculative step.

* **A counter** of the draft tokens handed to the sampler and of those accepted (a request that
  emits ``j + 1`` tokens from ``k`` drafts accepted ``j`` of them: the last is the recovered or
  the bonus token). `take_counts` returns them since the last call, so every cell of the
  matrix reports how often its drafts were accepted: a cell whose drafts are rarely accepted
  tests the rejection path almost alone.
* **The negative controls** (`BONUS_MUTANTS`, shared with the kernel audit): when every draft of
  a request was accepted, the bonus token it emits (position ``k + 1``) is replaced by a token
  drawn from the drafter's row of the last draft (``"from-q"``; a draft without probabilities,
  n-gram or greedy drafting, is its own one-hot row: the last draft repeated) or from the
  processed target row of the last draft's position (``"one-early"``). Each draw uses the
  request's own seeded generator, so a seed still gives the same tokens. A cell of each
  speculative family whose budget reaches the bonus must flag both.
"""

from __future__ import annotations

from typing import Any

from .kernel import BONUS_MUTANTS

__all__ = ["BONUS_MUTANTS", "install", "take_counts"]

_ORIGINAL: dict[str, Any] = {}
_COUNTS = {"drafted": 0, "accepted": 0}


def take_counts() -> tuple[int, int]:
    """``(drafted, accepted)`` since the last call (the counter starts again at 0)."""
    out = (_COUNTS["drafted"], _COUNTS["accepted"])
    _COUNTS.update(drafted=0, accepted=0)
    return out


def _wrong_bonus(mutant: str, out: Any, num_draft_tokens: list[int], cu_num_draft_tokens: Any,
                 draft_token_ids: Any, draft_probs: Any, target_logits: Any,
                 generators: dict[int, Any]) -> None:
    import torch

    valid = (out != -1).sum(dim=1)
    for i, n in enumerate(num_draft_tokens):
        if n == 0 or int(valid[i]) != n + 1:
            continue  # no draft, or one was rejected: no bonus in this row
        last = int(cu_num_draft_tokens[i]) - 1
        if mutant == "from-q" and draft_probs is None:
            out[i, n] = int(draft_token_ids[last])  # a one-hot q: the last draft again
            continue
        row = (draft_probs[last].float() if mutant == "from-q"
               else torch.softmax(target_logits[last].float(), dim=-1))
        out[i, n] = int(torch.multinomial(row, 1, generator=generators.get(i)))


def install(mutant: str | None) -> None:
    """Wrap vLLM's ``rejection_sample`` with the counter and, for ``mutant`` (one of
    `BONUS_MUTANTS`), the wrong bonus token; ``None`` counts only."""
    if mutant is not None and mutant not in BONUS_MUTANTS:
        raise ValueError(f"mutant must be None or one of {BONUS_MUTANTS}, got {mutant!r}")
    import vllm.v1.sample.rejection_sampler as sampler

    original = _ORIGINAL.setdefault("rejection_sample", sampler.rejection_sample)

    def wrapped(draft_token_ids: Any, num_draft_tokens: list[int], max_spec_len: int,
                cu_num_draft_tokens: Any, draft_probs: Any, target_logits: Any,
                bonus_token_ids: Any, sampling_metadata: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens,
                       draft_probs, target_logits, bonus_token_ids, sampling_metadata, *args,
                       **kwargs)
        if mutant is not None:
            _wrong_bonus(mutant, out, num_draft_tokens, cu_num_draft_tokens, draft_token_ids,
                         draft_probs, target_logits, sampling_metadata.generators)
        valid = (out != -1).sum(dim=1)
        _COUNTS["drafted"] += int(sum(num_draft_tokens))
        _COUNTS["accepted"] += int((valid - 1).clamp(min=0).sum())
        return out

    sampler.rejection_sample = wrapped
