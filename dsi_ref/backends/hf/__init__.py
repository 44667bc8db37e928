"""Hugging Face transformers: its assisted generation and candidate generators, audited.

* `dsi_ref.backends.hf.adapter`: dsi-ref's toy models as Hugging Face causal LMs, and
  `AssistedSampler` (``generate(..., assistant_model=...)`` as a ``seed -> tokens`` sampler);
* `dsi_ref.backends.hf.assisted`: the statistical audit of assisted generation (with its
  negative controls and the dtype study);
* `dsi_ref.backends.hf.generators`: the audit of every candidate generator of ``transformers``;
* `dsi_ref.backends.hf.toys`: the toy models and tokenizers those generators need, built in code;
* `dsi_ref.backends.hf.compat`: what changes between the supported ``transformers`` releases.
"""
