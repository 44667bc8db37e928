"""llama.cpp itself (marker ``llama``: `python3 run.py test --llama` runs these in .venv-llama):
its logits against the float64 forward, the files it refuses, the drafters it must refuse, and
the findings that are not verdicts (the binding's ``logits_all`` crash, the options it ignores).

The verdicts of the matrix are in tests/test_llama_smoke.py and ``dsi-ref audit --section
llama``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("gguf")

from dsi_ref.audit.statistical import sample_seeds
from dsi_ref.backends.llama_cpp import models as m
from dsi_ref.backends.llama_cpp.binding import (
    BindingPath,
    binding_sampler,
    load_llama,
    logits_all_crash,
)
from dsi_ref.backends.llama_cpp.cpp import CppPath, cpp_sampler, run_example
from dsi_ref.backends.llama_cpp.matrix import PATHS, PROMPT, cell_sampler, cells, prompt_ids
from dsi_ref.backends.llama_cpp.options import probe_options
from dsi_ref.backends.llama_cpp.sampling import SAMPLERS
from dsi_ref.base.errors import ModelFileError, VocabularyMismatchError

pytestmark = pytest.mark.llama
#: The largest distance allowed between llama.cpp's logits (float32, float32 KV cache) and the
#: float64 forward; `dsi_ref.backends.llama_cpp.matrix.MIN_MARGIN` is ten times larger.
LOGIT_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("gguf")
    return {"target": m.gguf_path(m.target_model(), folder),
            "near": m.gguf_path(m.near_drafter(), folder),
            "independent": m.gguf_path(m.independent_drafter(), folder)}


@pytest.mark.parametrize(("name", "model"), [("target", m.target_model()),
                                             ("near", m.near_drafter()),
                                             ("independent", m.independent_drafter())])
def test_llama_cpp_logits_are_the_float64_forward(files: dict[str, Path], name: str,
                                                  model: m.TinyLlama) -> None:
    tokens = [*prompt_ids(), *(m.byte_token(b) for b in b"hgfedcba\x00\xff")]
    llm = load_llama(files[name], logits_all=True)
    llm.eval(tokens)
    theirs = np.array(llm.scores[:len(tokens)], dtype=np.float64)
    gap = float(np.abs(theirs - m.forward(model, tokens)).max())
    assert gap < LOGIT_TOLERANCE, gap


def test_a_file_that_is_not_a_gguf_does_not_load(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"\x00" * 4096)
    with pytest.raises(ModelFileError, match="did not load") as error:
        load_llama(junk)
    assert "\n" not in str(error.value)
    with pytest.raises(ModelFileError, match="no model file"):
        load_llama(tmp_path / "missing.gguf")


def test_a_drafter_with_another_vocabulary_is_refused(files: dict[str, Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(m, "TOKEN_TEXTS", (*m.TOKEN_TEXTS[:3], "<0xAA>", *m.TOKEN_TEXTS[4:]))
    other = m.write_gguf(m.near_drafter(), tmp_path / "other-vocabulary.gguf")
    plain = SAMPLERS[0]
    with pytest.raises(VocabularyMismatchError, match="id 3 is '<0xAA>'") as error:
        binding_sampler(files["target"], BindingPath("draft-model", 2, other), prompt_ids(), 3,
                        plain)
    assert "\n" not in str(error.value)
    with pytest.raises(VocabularyMismatchError):
        cpp_sampler(files["target"], CppPath("speculative", 2, other), PROMPT, 3, plain)


def test_the_same_seed_gives_the_same_tokens(files: dict[str, Path]) -> None:
    seed = sample_seeds(5, 1)[0]
    path = CppPath("speculative", 2, files["near"])
    runs = {run_example(files["target"], path, PROMPT, 3, seed, SAMPLERS[0]).tokens
            for _ in range(3)}
    sample = binding_sampler(files["target"], BindingPath("prompt-lookup", 2), prompt_ids(), 3,
                             SAMPLERS[0])
    assert len(runs) == 1 and len({sample(seed) for _ in range(3)}) == 1


def test_every_path_gives_the_tokens_its_cell_audits() -> None:
    # The longest outcome of the sweep: every path must generate N = 5 tokens (or stop early,
    # which the tiny models almost never do: a token outside the live alphabet is ~1e-13).
    longest = [c for c in cells() if c.n_tokens == max(x.n_tokens for x in cells())]
    assert {c.path for c in longest} == {p.name for p in PATHS}
    for cell in longest:
        sample = cell_sampler(cell)
        assert all(len(sample(s)) >= cell.n_tokens for s in sample_seeds(3, 5)), cell.name


def test_finding_a_draft_model_without_logits_all_crashes(files: dict[str, Path]) -> None:
    # llama-cpp-python 0.3.36: Llama(draft_model=...) forces logits_all on but sizes its score
    # buffer for n_batch rows; the finding holds while this passes (docs/engine-findings.md).
    message = logits_all_crash(files["target"])
    assert message.startswith("ValueError: could not broadcast"), message


def test_finding_options_accepted_and_ignored(files: dict[str, Path]) -> None:
    probes = probe_options(files["target"], files["near"], prompt_ids(), PROMPT,
                           sample_seeds(7, 40))
    assert [p.option for p in probes if p.ignored] == [p.option for p in probes]
    p_min = next(p for p in probes if "p-min" in p.option)
    assert p_min.with_option is not None and p_min.with_option > 0   # it still drafted
