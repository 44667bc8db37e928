"""Options that llama.cpp accepts and silently ignores, each shown by a run with and without it.

A probe runs one path on the same seeds twice, with the option at a value whose documented
effect would change the run and without it, and compares what the runs report: the generated
tokens, or a counter the example prints (``n_drafted``). The option is **ignored** when every
seed gives the same result both ways, although honouring it would have changed the result
(each probe's ``effect`` says why it would have):

* llama-cpp-python ``generate(tfs_z=0.5)``: tail-free sampling with ``z = 0.5`` removes the
  least likely tokens of every row; the binding keeps the keyword (``Llama.generate``,
  ``create_completion``) but its sampler chain (``Llama._init_sampler``) has no such step;
* ``llama-speculative --spec-draft-p-min 1.0``: "minimum speculative decoding probability"; no
  draft of the tiny drafter has ``q >= 1``, so honoured it leaves nothing to draft
  (``n_drafted = 0``); the example never reads it (``common/speculative.cpp``'s draft-simple
  does);
* ``llama-speculative-simple --spec-type ngram-simple --spec-draft-n-max 1``: the draft length
  of the n-gram drafter is ``--spec-ngram-simple-size-m`` alone, so a draft-length cap of 1
  leaves its drafts as long as without the cap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .binding import BindingPath, binding_sampler
from .cpp import CppPath, run_example
from .sampling import SAMPLERS

__all__ = ["OptionProbe", "probe_options"]


@dataclass(frozen=True)
class OptionProbe:
    """One probe's result.

    Attributes:
        path, option: where and what was probed (the option as the user writes it).
        measure: what was compared (``"tokens"`` or a counter's name).
        effect: what honouring the option would have changed.
        same: the share of seeds with the same result with and without the option.
        with_option, without_option: the mean of the counter over the seeds (``None`` for
            tokens).
        seeds: how many seeds were run.
    """

    path: str
    option: str
    measure: str
    effect: str
    same: float
    with_option: float | None
    without_option: float | None
    seeds: int

    @property
    def ignored(self) -> bool:
        """Every seed gave the same result with the option as without it."""
        return self.same == 1.0


def _compare(seeds: Sequence[int], run: Callable[[int, bool], object]) -> float:
    return sum(run(s, True) == run(s, False) for s in seeds) / len(seeds)


def probe_options(target: Path, drafter: Path, prompt_ids: Sequence[int], prompt: bytes,
                  seeds: Sequence[int]) -> list[OptionProbe]:
    """Run the three probes of the module docstring on ``seeds``."""
    plain = SAMPLERS[0]
    probes: list[OptionProbe] = []

    base = binding_sampler(target, BindingPath("plain"), prompt_ids, 3, plain)
    tfs = binding_sampler(target, BindingPath("plain"), prompt_ids, 3, plain, tfs_z=0.5)
    probes.append(OptionProbe(
        "llama-cpp-python Llama.generate", "tfs_z=0.5", "tokens",
        "tail-free sampling would drop each row's tail", _compare(
            seeds, lambda s, on: (tfs if on else base)(s)), None, None, len(seeds)))

    def counter(path: CppPath, extra: list[str], n: int) -> Callable[[int, bool], int]:
        def run(seed: int, on: bool) -> int:
            return run_example(target, path, prompt, n, seed, plain,
                               extra if on else []).n_drafted or 0
        return run

    def mean(run: Callable[[int, bool], int], on: bool) -> float:
        return sum(run(s, on) for s in seeds) / len(seeds)

    spec = CppPath("speculative", 2, drafter)
    run = counter(spec, ["--spec-draft-p-min", "1.0"], 3)
    probes.append(OptionProbe(
        "llama-speculative", "--spec-draft-p-min 1.0", "n_drafted",
        "no draft has q >= 1: nothing would be drafted", _compare(seeds, run), mean(run, True),
        mean(run, False), len(seeds)))
    ngram = CppPath("ngram-simple", 4)
    run = counter(ngram, ["--spec-draft-n-max", "1"], 16)
    probes.append(OptionProbe(
        "llama-speculative-simple --spec-type ngram-simple", "--spec-draft-n-max 1",
        "n_drafted", "drafts would be cut to one token", _compare(seeds, run), mean(run, True),
        mean(run, False), len(seeds)))
    return probes
