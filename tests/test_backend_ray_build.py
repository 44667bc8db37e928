"""Models built from a spec where they run (`dsi_ref.backends.torch.spec`, issue 26 item 1).

Default run (no Ray, about 2 s): a `ModelSpec` builds the same weights (float64 rows equal:
the same code on the same weights), weights memory-mapped from a `save_weights` file are the
drawn ones, named spec errors, and `LazyLM` knows its vocabulary unbuilt and builds on its
first forward. Slow: a checkpoint's spec reads its special tokens without loading it;
`RayEngine`'s ``ship`` is checked before Ray starts; with a Ray of its own: actors built from
the spec hold the driver's exact weights (``state_dict`` via ``__ray_call__``), give its rows
and DSI commits non-SI's tokens with a driver that never builds the target (`LazyLM`); the
pickled copy (``ship="pickle"``); weights mapped from a file; a checkpoint directory loaded in
the actor; benchmarks/ray_build_memory.py run small.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_backend_exec_equivalence import PROMPT, N  # noqa: E402

import dsi_ref as dr  # noqa: E402
from dsi_ref.backends.torch.build import LazyLM, build_model  # noqa: E402
from dsi_ref.backends.torch.model import TorchLM, build_pair  # noqa: E402
from dsi_ref.backends.torch.spec import ModelSpec  # noqa: E402
from dsi_ref.backends.torch.transformer import ModelConfig  # noqa: E402
from dsi_ref.base.errors import BackendError  # noqa: E402

pytestmark = pytest.mark.torch

CONTEXT = (1, 2, 3, 4)


def _rows(lm: object, count: int = 3) -> np.ndarray:
    rows: np.ndarray = lm.session().rows(CONTEXT, count)  # type: ignore[attr-defined]
    return rows


def _same_model(a: object, b: object) -> bool:
    """The same weights, tensor for tensor (exactly: drawn by the same generator, or read from
    the same file), and rows of two forwards through them that agree to 1e-12 (two computations'
    floats are not compared with ==)."""
    ours, theirs = a.model.state_dict(), b.model.state_dict()  # type: ignore[attr-defined]
    return (ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
            and np.allclose(_rows(a), _rows(b), rtol=1e-12, atol=0))


def test_a_spec_builds_the_same_weights() -> None:
    target, drafter = build_pair()
    for lm in (target, drafter):
        spec = lm.spec()
        assert spec.device == "cpu" and spec.dtype == "fp64" and spec.preset == lm.config.name
        assert len(pickle.dumps(spec)) < 1000               # what crosses to an actor
        built = build_model(spec)
        assert isinstance(built, TorchLM) and built.name == lm.name
        assert _same_model(built, lm)
    custom = TorchLM(ModelConfig(7, 8, 1, 2, 16, max_seq_len=12, name="custom"), seed=5,
                     dtype="fp32", eos=6)
    spec = custom.replica("cpu").spec()                     # a replica names its original
    assert (spec.preset, spec.seed, spec.dtype, spec.eos) == (custom.config, 5, "fp32", 6)
    assert _same_model(build_model(spec), custom)


def test_mapped_weights_are_the_drawn_ones(tmp_path: Path) -> None:
    target, _ = build_pair()
    path = str(tmp_path / "tiny.pt")
    target.save_weights(path)
    mapped = TorchLM("tiny-target", weights=path)
    ours, theirs = target.model.state_dict(), mapped.model.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    spec = mapped.spec()
    assert spec.weights == path and _same_model(build_model(spec), target)
    with pytest.raises(BackendError, match=r"torch\.float64 for torch\.float32"):
        TorchLM("tiny-target", weights=path, dtype="fp32")
    with pytest.raises(BackendError, match="do not fit tiny-drafter"):
        TorchLM("tiny-drafter", weights=path)
    with pytest.raises(BackendError, match="cannot map weights"):
        TorchLM("tiny-target", weights=str(tmp_path / "none.pt"))


def test_spec_errors_are_named() -> None:
    with pytest.raises(BackendError, match="exactly one of"):
        ModelSpec()
    with pytest.raises(BackendError, match="exactly one of"):
        ModelSpec(preset="tiny-target", checkpoint="/nowhere")
    with pytest.raises(BackendError, match="unknown dtype"):
        ModelSpec(preset="tiny-target", dtype="float64")
    with pytest.raises(BackendError, match="unknown model preset"):
        ModelSpec(preset="llama-70b")
    with pytest.raises(BackendError, match=r"config\.json"):
        ModelSpec(checkpoint="/nowhere").tokens()


def test_a_lazy_model_builds_on_its_first_forward() -> None:
    target, _ = build_pair()
    lazy = LazyLM(target.spec())
    session = lazy.session()
    assert (lazy.vocab_size, lazy.eos, lazy.bos, lazy.name) == (11, None, 0, target.name)
    assert not lazy.built                                   # nothing built yet
    assert np.allclose(session.rows(CONTEXT, 3), _rows(target), rtol=1e-12, atol=0)
    assert lazy.built and _same_model(lazy.model(), target)
    assert np.allclose(lazy.probs(CONTEXT), target.probs(CONTEXT), rtol=1e-12, atol=0)


@pytest.mark.slow   # importing Ray: 2.4 s on the loaded build machine
def test_ship_is_checked_before_ray_starts() -> None:
    ray_module = pytest.importorskip("dsi_ref.backends.ray")
    target, drafter = build_pair()
    with pytest.raises(BackendError, match="ship must be one of"):
        ray_module.RayEngine(target, drafter, ship="copy")
    with pytest.raises(BackendError, match="pass the model, not its ModelSpec"):
        ray_module.RayEngine(target.spec(), drafter, ship="pickle")
    table = dr.TableLM.context_free((0.5, 0.5))
    with pytest.raises(BackendError, match="has no spec"):
        ray_module.RayEngine(table, ship="spec")
    with pytest.raises(BackendError, match="max_replacements"):
        ray_module.RayEngine(target, drafter, max_replacements=-1)


def _checkpoint(path: Path) -> Path:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=11, hidden_size=16, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2,
                                      intermediate_size=32, max_position_embeddings=64,
                                      bos_token_id=1, eos_token_id=10)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    return path


@pytest.mark.slow   # transformers' import and a save: a few seconds
def test_a_checkpoint_spec_loads_the_same_checkpoint(tmp_path: Path) -> None:
    from dsi_ref.backends.torch.checkpoint import CheckpointLM

    path = _checkpoint(tmp_path / "target")
    lm = CheckpointLM(path)
    spec = lm.spec()
    assert (spec.checkpoint, spec.eos, spec.bos, spec.dtype) == (str(path.resolve()), 10, 1,
                                                                  "fp64")
    assert ModelSpec(checkpoint=str(path)).tokens() == ("target", 11, 10, 1)   # not loaded
    assert _same_model(build_model(spec), lm)


# -- in Ray actors (slow: a Ray of its own) ------------------------------------------------------
@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    from dsi_ref.backends.ray import connect

    started = connect(num_cpus=2)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # _weights, to the actors
    yield
    if started:
        ray.shutdown()


def _weights(server: Any) -> dict[str, Any]:
    """An actor's model weights (run in the actor by ``__ray_call__``)."""
    return {k: v.clone() for k, v in server.session.lm.model.state_dict().items()}


def _same_weights(engine: Any, slot: int, lm: Any) -> bool:
    import ray

    theirs = ray.get(engine.actor_for(slot).__ray_call__.remote(_weights))
    ours = lm.model.state_dict()
    return theirs.keys() == ours.keys() and all(torch.equal(theirs[k], ours[k]) for k in ours)


def _close_rows(engine: Any, slot: int, lm: Any) -> None:
    """The actor's rows are the driver's, to the float64 rounding of another reduction order
    (the actor's cache holds other tokens, it runs one torch thread)."""
    import ray

    rows, _ = ray.get(engine.actor_for(slot).rows.remote(CONTEXT, 3))
    np.testing.assert_allclose(rows, _rows(lm), rtol=0, atol=1e-12)


@pytest.mark.slow
def test_actors_built_from_the_spec_give_the_drivers_rows(ray_local: None) -> None:
    from dsi_ref.backends.ray import RayEngine

    target, drafter = build_pair()
    expected = dr.autoregressive(target, PROMPT, N, dr.Sampler(0)).tokens
    with RayEngine(target.spec(), drafter) as engine:       # DSI only: no target built here
        assert isinstance(engine.shipped, ModelSpec) and isinstance(engine.target, LazyLM)
        run = engine.dsi(PROMPT, N, dr.Sampler(0), lookahead=2, sp_degree=2,
                         verify="exact_match")
        assert run.tokens == expected
        assert not engine.target.built                      # the driver never built it
        assert all(_same_weights(engine, slot, target) for slot in range(2))
        _close_rows(engine, 1, target)
        real = engine.dsi(PROMPT, N, dr.Sampler(1), lookahead=3, sp_degree=2)  # rejection
        assert len(real.tokens) == N and not engine.target.built
    with RayEngine(target, drafter, ship="pickle") as engine:   # the explicit pickled copy
        assert engine.shipped is target
        run = engine.dsi(PROMPT, N, dr.Sampler(0), lookahead=2, sp_degree=2,
                         verify="exact_match")
        assert run.tokens == expected


@pytest.mark.slow
def test_actors_load_a_checkpoint_from_its_path(ray_local: None, tmp_path: Path) -> None:
    from dsi_ref.backends.ray import RayEngine
    from dsi_ref.backends.torch.checkpoint import CheckpointLM

    lm = CheckpointLM(_checkpoint(tmp_path / "target"))
    with RayEngine(lm, lm) as engine:                       # the drafter: the target itself
        assert isinstance(engine.shipped, ModelSpec) and engine.shipped.checkpoint
        engine.pool(1)
        assert _same_weights(engine, 0, lm)
        _close_rows(engine, 0, lm)
        run = engine.dsi(PROMPT, 6, dr.Sampler(0), lookahead=2, sp_degree=1,
                         verify="exact_match")
        assert run.tokens == dr.autoregressive(lm, PROMPT, 6, dr.Sampler(0)).tokens


@pytest.mark.slow
def test_the_build_memory_benchmark_runs_small(ray_local: None) -> None:
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "ray_build_memory.py"
    loader = importlib.util.spec_from_file_location("ray_build_memory", path)
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    for ship in ("spec", "pickle"):
        result = module.measure("tiny-target", "fp64", 1, ship, 1)
        assert result["ship"] == ship and len(result["actor_rss_mb"]) == 1
        assert result["driver_peak_growth_mb"] >= 0 and result["up_seconds"] > 0


@pytest.mark.slow
def test_actors_map_the_weights_file(ray_local: None, tmp_path: Path) -> None:
    from dsi_ref.backends.ray import RayEngine

    target, drafter = build_pair()
    path = str(tmp_path / "target.pt")
    target.save_weights(path)
    spec = ModelSpec(preset="tiny-target", weights=path)
    with RayEngine(spec, drafter) as engine:
        run = engine.dsi(PROMPT, N, dr.Sampler(0), lookahead=2, sp_degree=2,
                         verify="exact_match")
        assert run.tokens == dr.autoregressive(target, PROMPT, N, dr.Sampler(0)).tokens
        assert all(_same_weights(engine, slot, target) for slot in range(2))
