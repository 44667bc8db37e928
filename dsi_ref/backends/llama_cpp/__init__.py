"""The llama.cpp family: llama.cpp's speculative paths audited against the exact law, on a CPU.

* `dsi_ref.backends.llama_cpp.models`: tiny Llama models written in code as GGUF files (a target,
  a near and an independent drafter, a byte vocabulary) and their float64 forward pass;
* `dsi_ref.backends.llama_cpp.sampling`: llama.cpp's sampler chain applied exactly, and the law of
  the first tokens;
* `dsi_ref.backends.llama_cpp.binding`: llama-cpp-python without speculation, with prompt lookup
  and with a draft model;
* `dsi_ref.backends.llama_cpp.cpp`: the C++ examples ``llama-speculative-simple`` and
  ``llama-speculative``, one process per sample;
* `dsi_ref.backends.llama_cpp.build`: those examples built from the binding's locked sdist;
* `dsi_ref.backends.llama_cpp.whitebox`: the law ``llama-speculative`` samples from, computed;
* `dsi_ref.backends.llama_cpp.matrix`: the matrix of paths × samplers × draft lengths.

Only this family imports ``llama_cpp`` and ``gguf``, and only inside functions: the models, the
sampler chain and the laws run wherever numpy does.
"""
