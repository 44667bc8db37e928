"""Everything that judges a decoder: exact laws, schedulers as adversaries, statistics, the zoo.

* `dsi_ref.audit.exact` — the exact interpreter: the output law of any program over `Randomness`,
  with every schedule quantified over (a package, one module per role: `dsi_ref.audit.exact.law`,
  the entry points; `dsi_ref.audit.exact.engine`, the replaying interpreter;
  `dsi_ref.audit.exact.guard`, randomness outside ``rng``; `dsi_ref.audit.exact.witness`, laws
  and witnesses; `dsi_ref.audit.exact.rows`, exact rows; `dsi_ref.audit.exact.uniform`, the lazy
  uniform);
* `dsi_ref.audit.laws` — the target law and the lossless checks built on it;
* `dsi_ref.audit.schedulers` — the scheduler (adversary) classes and their checks; add one here;
* `dsi_ref.audit.statistical` — the black-box audit with stated power;
* `dsi_ref.audit.registry` — each public decoder paired with its reference;
* `dsi_ref.audit.zoo` — wrong decoders that every audit must catch;
* `dsi_ref.audit.suite` — the toy model pairs every audit runs on;
* `dsi_ref.audit.strategies` — hypothesis strategies (also importable as `dsi_ref.strategies`).
"""
