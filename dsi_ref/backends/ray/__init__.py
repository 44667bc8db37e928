"""DSI across processes and machines on Ray: target servers as actors (docs/ray-backend.md).

`RayEngine` (`dsi_ref.backends.ray.engine`) is `dsi_ref.backends.engine.Engine` with its DSI
target servers in Ray actors; `connect` (`dsi_ref.backends.ray.connect`) starts Ray in-process
or joins a cluster; `ray_map` and `sample_parallel` (`dsi_ref.backends.ray.map`) fan the
statistical audit's samples out over Ray workers.
"""

from ...base.errors import ServerLostError, ServerTimeoutError, UnschedulableError
from .connect import connect
from .engine import RayEngine
from .map import ray_map, sample_parallel

__all__ = ["RayEngine", "ServerLostError", "ServerTimeoutError", "UnschedulableError", "connect",
           "ray_map", "sample_parallel"]
