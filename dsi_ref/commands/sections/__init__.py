"""The sections of ``dsi-ref audit``: each runs a family of checks and returns one table.

* `dsi_ref.commands.sections.core` — `Section`, `SectionSpec` and the core's sections (decoders,
  DSI under every schedule and scheduler class, block and tree verification, the zoo);
* `processors`, `cross_vocab`, `theorems` — the processors' and cross-vocabulary sections, and
  the latency theorems (z3);
* `hf`, `hf_generators` — the Hugging Face audits (opt-in: torch and transformers);
* `vllm`, `llama`, `openvino` — the engines audited in environments of their own (opt-in).

`dsi_ref.commands.audit` lists them (`TOP_SECTIONS` after the core's `SECTIONS`).
"""
