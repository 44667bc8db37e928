"""Connecting to Ray: start a private one in this process, or join a cluster whose head is
probed first.

`connect` starts a private Ray in-process (``ray.init(address="local", num_cpus=…)``: never a
cluster that happens to run on this machine) or joins a cluster (``address=``, or
``join_existing=True`` for this machine's). Every failure is a `RayConnectionError` whose one
line names its cause and the fix (refused, unreachable, timeout, not a Ray head, auth token,
version mismatch, another cluster than the one this process already runs); an address where
nothing answers fails within ``connect_timeout`` seconds instead of Ray's own long retries.
`classify` reads the cause out of Ray's exceptions. `check_seconds` is the one check of every
timeout argument of the Ray backend.
"""

from __future__ import annotations

import contextlib
import importlib
import numbers
import os
import re
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import ray

from ...base.errors import BackendError, RayConnectionError

__all__ = ["check_seconds", "classify", "connect", "same_address"]


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

#: How each cause is fixed (the end of a `RayConnectionError`'s message).
_FIXES = {
    "refused": "start a head there with `ray start --head --port PORT`, or check the port",
    "unreachable": "check the host name and the network route to it",
    "timeout": "check that a Ray head (not a firewall or a proxy) listens there, or raise "
               "connect_timeout",
    "not-ray": "give the head's GCS port (`ray start --head --port`, 6379 by default), or "
               "ray://host:port for a Ray Client server",
    "auth": "give this process the cluster's token: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN "
            "(or RAY_AUTH_TOKEN_PATH); `ray get-auth-token` on the head prints it",
    "version": "run the same Ray and Python versions here as on the cluster",
    "no-cluster": "start one with `ray start --head`, or pass its address",
    "other-cluster": "call ray.shutdown() before joining another cluster, or pass the running "
                     "one's address (or none) to use it",
    "failed": "see Ray's message",
}


def _fail(cause: str, address: str | None, what: str) -> RayConnectionError:
    """The `RayConnectionError` for ``cause``: one line, the cause, then the fix."""
    where = "cannot start a local Ray" if address is None else f"cannot join Ray at {address!r}"
    what = " ".join(what.split())        # one line, whatever Ray's text was
    return RayConnectionError(f"{where}: {cause}: {what}; {_FIXES[cause]}", cause=cause,
                              address=address)


def _host_port(address: str) -> tuple[str, int]:
    url = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = url.hostname, url.port
    except ValueError:
        host = port = None
    if host is None or port is None:
        raise BackendError(f"Ray address {address!r} is not host:port (or ray://host:port, "
                           "or 'auto')")
    return host, port


def _probe(address: str, timeout: float) -> None:
    """Check that a gRPC server answers at ``host:port`` within ``timeout`` seconds, or raise a
    `RayConnectionError` naming why not (refused, unreachable, timeout, not-ray). A TCP
    connection is not enough: ``ray.init`` retries for minutes against a port that accepts
    connections but is not a Ray head (or behind a proxy that accepts all)."""
    host, port = _host_port(address)
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
    except ConnectionRefusedError:
        raise _fail("refused", address, "no Ray cluster answers (connection refused: nothing "
                    "listens on that port)") from None
    except TimeoutError:
        raise _fail("timeout", address, f"no Ray cluster answers within {timeout:g} s (the "
                    "connection or the handshake got no reply)") from None
    except OSError as error:
        raise _fail("unreachable", address, f"no Ray cluster answers ({error.strerror or error})"
                    ) from None
    if len(frame) < 9 or frame[3] != 0x04:
        said = "closed the connection" if not frame else f"answered {frame[:9]!r}"
        raise _fail("not-ray", address, f"no Ray cluster answers (the server {said}, which is "
                    "not a gRPC handshake: not a Ray head)")


#: Ray's own words for each cause, in its exceptions (ray 2.60's worker.py, node.py, utils.py,
#: authentication_constants.py, services.py), first match wins.
_RAY_SAYS = (
    ("auth", ("InvalidAuthToken", "AuthenticationError", "Authentication token is missing",
              "no authentication token was found", "authentication token is invalid",
              "Unauthenticated")),
    ("version", ("Version mismatch",)),
    ("no-cluster", ("Could not find any running Ray instance",)),
)


def classify(error: BaseException) -> str:
    """The `RayConnectionError` cause of an exception raised by ``ray.init``: its text and that
    of its causes (Ray wraps the real one: ``ConnectionError('Failed to connect to Ray cluster
    at …')`` from a ``RuntimeError`` carrying the ``AuthenticationError``) against Ray's own
    words; ``"failed"`` when none matches."""
    texts, seen = [], set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        texts.append(f"{type(link).__name__}: {link}")
        link = link.__cause__ or link.__context__
    text = "\n".join(texts)
    for cause, words in _RAY_SAYS:
        if any(word.lower() in text.lower() for word in words):
            return cause
    return "failed"


def _summary(error: BaseException, cause: str) -> str:
    """A short account of Ray's error: for ``auth`` whether this process sent a token, for
    ``version`` the two versions, else Ray's first line."""
    text = str(error)
    if cause == "auth":
        sent = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
        return ("the head rejected this process's token" if sent else
                "the head requires a token and this process sent none (RAY_AUTH_MODE is not "
                "'token' here)")
    if cause == "version":
        versions = re.findall(r"Ray: (\S+)\s+Python: (\S+)", text)
        if len(versions) == 2:
            (ray_c, py_c), (ray_h, py_h) = versions
            return (f"the cluster runs Ray {ray_c} on Python {py_c}, this process Ray {ray_h} "
                    f"on Python {py_h}")
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def _check_token(address: str, timeout: float) -> None:
    """Raise the ``auth`` `RayConnectionError` at once when the head at ``address`` (a GCS,
    ``host:port``) rejects this process's token. A Ray client of the GCS learns it in
    milliseconds, but ``ray.init`` retries 20 times, a second apart, before it says only
    ``Failed to connect``. Any other outcome (or none within ``timeout``) is left to
    ``ray.init``."""
    client = importlib.import_module("ray._raylet").GcsClient    # Ray's own client, its token
    failure: list[BaseException] = []

    def attempt() -> None:
        try:
            client(address=address)
        except Exception as error:       # classified below
            failure.append(error)

    thread = threading.Thread(target=attempt, name="dsi-ref-ray-token-check", daemon=True)
    thread.start()
    thread.join(timeout)
    if failure and classify(failure[0]) == "auth":
        raise _fail("auth", address, _summary(failure[0], "auth")) from failure[0]


def _running_address() -> str:
    """The address of the Ray this process runs: ``ray://host:port`` for a Ray Client
    connection, else its GCS ``host:port``."""
    client = importlib.import_module("ray.util.client").ray
    if client.is_connected():
        return f"ray://{client.get_context().client_worker._conn_str}"
    return str(ray.get_runtime_context().gcs_address)


def _local_hosts() -> set[str]:
    """The IP addresses of this machine that a local Ray may be named by: loopback, this
    host's name's, and the one Ray reports for this node."""
    hosts = {"127.0.0.1", "::1"}
    with contextlib.suppress(OSError):
        hosts.update(socket.gethostbyname_ex(socket.gethostname())[2])
    with contextlib.suppress(Exception):
        hosts.add(str(ray.util.get_node_ip_address()))
    return hosts


def _ips(host: str) -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return {host}


def same_address(wanted: str, running: str) -> bool:
    """Whether ``wanted`` names the Ray at ``running`` (both ``host:port``, or both
    ``ray://host:port``): the same kind and port, and hosts that resolve to a common IP address
    or are both this machine (``localhost`` and this node's IP name one GCS)."""
    if wanted.startswith("ray://") != running.startswith("ray://"):
        return False
    (host_w, port_w), (host_r, port_r) = _host_port(wanted), _host_port(running)
    if port_w != port_r:
        return False
    ips_w, ips_r = _ips(host_w), _ips(host_r)
    local = _local_hosts()
    return bool(ips_w & ips_r) or (ips_w <= local and ips_r <= local)


def connect(address: str | None = None, *, num_cpus: int | None = None,
            connect_timeout: float = 10.0, join_existing: bool = False,
            runtime_env: dict[str, Any] | None = None) -> bool:
    """Make sure Ray is running in this process; return whether this call started it.

    Args:
        address: ``None`` starts a private local Ray (``num_cpus`` CPUs, no dashboard), even if
            a ``ray start`` cluster runs on this machine or ``RAY_ADDRESS`` is set;
            ``"host:port"`` / ``"ray://host:port"`` joins that cluster (probed first: nothing
            answering within ``connect_timeout`` seconds is a `RayConnectionError`);
            ``"auto"`` joins the cluster of this machine, as Ray finds it: ``RAY_ADDRESS``, else
            the latest ``ray start``, else the one Ray GCS process running here (which may be
            another program's in-process Ray); ``"local"`` is ``None``.
        num_cpus: CPUs of a local Ray (ignored when joining).
        connect_timeout: seconds to wait for an address to answer.
        join_existing: with no ``address``, join the cluster of this machine (``"auto"``)
            instead of starting a private one.
        runtime_env: Ray's ``runtime_env`` of this job (e.g. ``{"py_modules": [dsi_ref]}`` to
            ship this code to nodes that lack it).

    A failure to join is a `RayConnectionError` whose ``cause`` names why (refused,
    unreachable, timeout, not-ray, auth, version, no-cluster, other-cluster). An
    already-initialised Ray is reused as it is (and not owned by this call) when no address is
    given, with ``"auto"``, or when the address names it (`same_address`); an address that
    names another cluster is the ``other-cluster`` error, never a silent reuse (a process holds
    one Ray connection: ``ray.shutdown()`` first). A given address is probed all the same.
    """
    if address is None and join_existing:
        address = "auto"
    if address == "local":
        address = None
    if address is not None and address != "auto":
        began = time.monotonic()
        _probe(address, connect_timeout)
        if "://" not in address:          # a GCS (ray:// is a Ray Client server)
            _check_token(address, max(0.1, connect_timeout - (time.monotonic() - began)))
    if ray.is_initialized():
        if address is not None and address != "auto":
            running = _running_address()
            if not same_address(address, running):
                raise _fail("other-cluster", address, f"this process already runs Ray, "
                            f"connected to {running!r}")
        return False
    try:
        if address is None:       # "local": never the cluster of RAY_ADDRESS or `ray start`
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                     log_to_driver=False, runtime_env=runtime_env)
        else:
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
    except Exception as error:
        cause = classify(error)
        raise _fail(cause, address, _summary(error, cause)) from error
    return True
