"""Torch models behind `dsi_ref.LanguageModel`, and the sessions the engines run them in.

* `dsi_ref.backends.torch.model`: `TorchLM`, Llama-style models with seeded random weights of
  realistic shapes (presets), and `build_pair`;
* `dsi_ref.backends.torch.session`: `Session` and `BatchedSession` (KV caches, CUDA streams and
  graphs, layer segments), and the protocols every engine runs on (`BackendLM`,
  `SessionLike`);
* `dsi_ref.backends.torch.checkpoint`: a local Hugging Face checkpoint as a `BackendLM`;
* `dsi_ref.backends.torch.transformer`: the network (a Llama-style transformer with a static KV
  cache), its presets, the dtype names and the device helpers;
* `dsi_ref.backends.torch.spec`: `ModelSpec`, a model named by a small recipe;
* `dsi_ref.backends.torch.build`: `build_model` (a spec's model, built here) and `LazyLM` (built
  on its first forward);
* `dsi_ref.backends.torch.processed`: sampling processors applied to a backend model.

Nothing here runs a decoding algorithm: that is `dsi_ref.backends.engine`'s job.
"""
