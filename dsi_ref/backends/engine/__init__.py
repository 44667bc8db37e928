"""The wall-clock engine: the reference algorithms run on torch models, with real concurrency.

`Engine` (`dsi_ref.backends.engine.engine`) runs non-SI, SI, DSI and tree speculation by
subclassing the reference runs (`dsi_ref.decoders`) and overriding their seams; its DSI target
servers are threads, or the rows of one batched forward (`dsi_ref.backends.engine.batched`).
Tree speculation is `dsi_ref.backends.engine.tree`; the verification rules' arithmetic on numpy
rows is `dsi_ref.backends.engine.vectorised` and `dsi_ref.backends.engine.vectorised_tree`;
the paper's measurements made with the engine are `dsi_ref.backends.engine.measure`.
"""

from .engine import Engine

__all__ = ["Engine"]
