"""The top floor: one module per ``dsi-ref`` sub-command, and everything that prints or draws.

* ``<name>.py`` — the sub-command ``dsi-ref <name>`` (``install(subparsers)``, registered in
  `dsi_ref.cli.COMMANDS`): `audit`, `audit_engine`, `bench` (with `bench_tree`), `heatmap`,
  `table`, `theorems`, `timeline`;
* `dsi_ref.commands.sections` — the sections of ``dsi-ref audit``, one module each (the core's
  in `dsi_ref.commands.sections.core`);
* `dsi_ref.commands.gantt`, `dsi_ref.commands.plots` — timelines and figures (matplotlib, lazily);
* `dsi_ref.commands.args` — argument types shared by the sub-commands.

Only `dsi_ref.cli` and this package may import `theory`, `proofs` or (lazily, inside a function)
`dsi_ref.backends`; a test enforces it.
"""
