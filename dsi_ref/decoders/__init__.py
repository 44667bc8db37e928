"""The decoding algorithms, each written once against a `Randomness`: non-SI, SI and DSI.

* `dsi_ref.decoders.verification` — the verification rules and the glossary (accepted, rejected,
  residual, bonus, committed); add a rule here;
* `dsi_ref.decoders.common` — what every decoder shares: argument checks, the model seam, the
  virtual-clock recorder;
* `dsi_ref.decoders.autoregressive` — non-SI;
* `dsi_ref.decoders.speculative` — SI as a step-wise run (`SIRun`);
* `dsi_ref.decoders.dsi` — DSI, event level, as a step-wise run (`DSIRun`).
* `dsi_ref.decoders.tree` — multi-draft and tree speculation (`tree_speculative`), its rules
  (`TREE_VERIFY_RULES`).

Engines (the torch backend) and the zoo's mutants override one step of `SIRun` or `DSIRun`.
"""
