"""The vocabulary every other layer speaks: models, randomness, virtual time, run results, errors.

* `dsi_ref.base.models` — the `LanguageModel` protocol and the toy models (`TableLM`, `FunctionLM`);
* `dsi_ref.base.randomness` — the `Randomness` protocol and the `Sampler` interpreter;
* `dsi_ref.base.latency` — `Latency`: what a forward costs on the virtual clock;
* `dsi_ref.base.result` — `Run` and `Event`: what a decoder returns;
* `dsi_ref.base.errors` — every error class of dsi-ref, defined once;
* `dsi_ref.base.validate` — the argument checks shared by every layer.

Nothing here imports the decoders, the audits, the simulators or the backends.
"""
