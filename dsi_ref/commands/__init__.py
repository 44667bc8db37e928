"""The top floor: one module per ``dsi-ref`` sub-command, and everything that prints or draws.

* ``<name>_command.py`` — the sub-command ``dsi-ref <name>`` (``install(subparsers)``, registered
  in `dsi_ref.cli.COMMANDS`);
* `dsi_ref.commands.audit_sections` — the sections of ``dsi-ref audit`` that the core can run;
  `dsi_ref.commands.hf_section` adds the Hugging Face one;
* `dsi_ref.commands.gantt`, `dsi_ref.commands.plots` — timelines and figures (matplotlib, lazily);
* `dsi_ref.commands.args` — argument types shared by the sub-commands.

Only `dsi_ref.cli` and this package may import `theory`, `proofs` or (lazily, inside a function)
`dsi_ref.backends`; a test enforces it.
"""
