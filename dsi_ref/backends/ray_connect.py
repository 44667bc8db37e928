"""Connecting to Ray: start it in this process, or join a cluster whose head is probed first.

`connect` starts Ray in-process (``ray.init(num_cpus=…)``) or joins a cluster (``address=``);
an address where nothing answers fails within ``connect_timeout`` seconds with a
`BackendError`, instead of Ray's own long retries. `check_seconds` is the one check of every
timeout argument of the Ray backend.
"""

from __future__ import annotations

import numbers
import socket
import time
from urllib.parse import urlsplit

import ray

from ..base.errors import BackendError

__all__ = ["check_seconds", "connect"]


def check_seconds(name: str, value: object, *, optional: bool = True) -> None:
    """`BackendError` unless ``value`` is a number of seconds ``> 0`` (or, when ``optional``,
    ``None``: no bound)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value) > 0:
        raise BackendError(f"{name} must be > 0 seconds, got {value!r}")


# -- connecting --------------------------------------------------------------------------------
#: An HTTP/2 client preface and an empty SETTINGS frame: a Ray head (its GCS, or the Ray Client
#: server of ``ray://``) is a gRPC server, which answers with a SETTINGS frame of its own.
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _probe(address: str, timeout: float) -> None:
    """Check that a gRPC server answers at ``host:port`` within ``timeout`` seconds, or raise a
    `BackendError`. A TCP connection is not enough: ``ray.init`` retries for minutes against a
    port that accepts connections but is not a Ray head (or behind a proxy that accepts all)."""
    url = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = url.hostname, url.port
    except ValueError:
        host = port = None
    if host is None or port is None:
        raise BackendError(f"Ray address {address!r} is not host:port (or ray://host:port, "
                           "or 'auto')")
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            sock.sendall(_H2_HELLO)
            frame = b""
            while len(frame) < 9:
                chunk = sock.recv(9 - len(frame))
                if not chunk:
                    break
                frame += chunk
        if len(frame) < 9 or frame[3] != 0x04:
            raise OSError("it does not answer as a gRPC server (not a Ray head)")
    except OSError as error:
        raise BackendError(f"no Ray cluster answers at {address!r} (within {timeout:g} s: "
                           f"{error or type(error).__name__}); start one with `ray start "
                           "--head`, or pass no address to start Ray in this process") from None


def connect(address: str | None = None, *, num_cpus: int | None = None,
            connect_timeout: float = 10.0) -> bool:
    """Make sure Ray is running in this process; return whether this call started it.

    Args:
        address: ``None`` starts a local Ray in-process (``num_cpus`` CPUs, no dashboard);
            ``"host:port"`` / ``"ray://host:port"`` joins that cluster (probed first: nothing
            answering within ``connect_timeout`` seconds is a `BackendError`); ``"auto"`` joins
            the cluster started on this machine by ``ray start``.
        num_cpus: CPUs of a local Ray (ignored with ``address``).
        connect_timeout: seconds to wait for an address to answer.

    An already-initialised Ray is reused as it is (and not owned by this call); a given address
    is probed all the same.
    """
    if address is not None and address != "auto":
        _probe(address, connect_timeout)
    if ray.is_initialized():
        return False
    try:
        if address is None:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    except (ConnectionError, TimeoutError, RuntimeError) as error:
        raise BackendError(f"cannot start or join Ray (address={address!r}): {error}") from None
    return True
