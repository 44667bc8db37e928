"""The thin GPU backend: torch models behind `LanguageModel`, and real (wall-clock) execution.

Only code under here imports torch. Nothing in the core imports this package; the CLI imports it
lazily inside the commands that need it, and its tests skip without torch (``gpu`` tests without
CUDA). Install with the ``[torch]`` extra.
"""
