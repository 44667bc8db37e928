"""Joining a Ray cluster (`dsi_ref.backends.ray.connect`): every failure names its cause.

Default run (no Ray started but in the last test; well under a second besides): the causes found
by the probe, each reproduced for real on this machine (a closed port: refused; a listener that
never answers: timeout; a plain HTTP server: not a Ray head), and `classify` on Ray 2.60's own
exception texts (copied from its source: worker.py, node.py, utils.py,
authentication_constants.py). With an in-process Ray (the shared fixture, a few seconds): an
address that names another cluster than the running one is a named error, never a silent reuse.

Slow (``-m slow``, a ``ray start --head`` cluster of the test's own, with token auth, on its own
port and temp dir, stopped by its own process group): no address starts a private Ray even with
that cluster running and ``RAY_ADDRESS`` pointing at it, ``join_existing`` / an address joins
it, a wrong token is a ``"auth"`` error, and a driver whose Ray version differs from the
cluster's (Ray's own version check, with this process's version reported as another one) is a
``"version"`` error. Each driver is a fresh Python process (a process holds one Ray connection,
and other test files start Ray in-process).
"""

from __future__ import annotations

import http.server
import socket
import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("ray")

from dsi_ref.backends.ray.connect import classify, connect, same_address
from dsi_ref.base.errors import BackendError, RayConnectionError


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    with listener:
        yield f"127.0.0.1:{listener.getsockname()[1]}"


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    """A plain HTTP server: it answers, but not as a Ray head."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _cause(address: str, timeout: float = 1.0) -> RayConnectionError:
    with pytest.raises(RayConnectionError) as caught:
        connect(address, connect_timeout=timeout)
    message = str(caught.value)
    assert "\n" not in message and address in message
    assert caught.value.address == address
    return caught.value


def test_a_closed_port_is_refused() -> None:
    error = _cause(f"127.0.0.1:{_free_port()}")
    assert error.cause == "refused"
    assert "connection refused" in str(error) and "ray start --head" in str(error)


def test_a_port_that_never_answers_is_a_timeout(silent: str) -> None:
    error = _cause(silent, timeout=0.3)
    assert error.cause == "timeout"
    assert "within 0.3 s" in str(error) and "connect_timeout" in str(error)


def test_a_plain_http_server_is_not_a_ray_head(http_server: str) -> None:
    error = _cause(http_server)
    assert error.cause == "not-ray"
    assert "not a Ray head" in str(error) and "DOCTYPE" in str(error)   # its error page


def test_an_unresolvable_host_is_unreachable() -> None:
    error = _cause("no-such-host.invalid:6379")
    assert error.cause == "unreachable"


def test_a_malformed_address_and_an_unknown_cause_are_named_errors() -> None:
    with pytest.raises(BackendError, match="host:port"):
        connect("nonsense")
    with pytest.raises(ValueError, match="unknown cause"):
        RayConnectionError("x", cause="bad luck", address=None)


# Ray 2.60's own texts (its source), as ray.init raises them
def _auth_error() -> BaseException:
    inner = RuntimeError(
        "Failed to connect to GCS. Last connection error: Traceback (most recent call last):\n"
        "ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token "
        "is missing or incorrect. Ensure that the token for the cluster is available ...")
    outer = ConnectionError("Failed to connect to Ray cluster at 192.0.2.2:6379")
    outer.__cause__ = inner
    return outer


_VERSION = RuntimeError(
    "Version mismatch: The cluster was started with:\n    Ray: 2.59.0\n    Python: 3.11.9\n"
    "This process on node 192.0.2.2 was started with:\n    Ray: 2.60.0\n    Python: 3.11.9\n")


@pytest.mark.parametrize(("error", "cause"), [
    (_auth_error(), "auth"),
    (RuntimeError("Token authentication is enabled but no authentication token was found"),
     "auth"),
    (_VERSION, "version"),
    (ConnectionError("Could not find any running Ray instance. Please specify the one to "
                     "connect to by setting the `--address` flag or `RAY_ADDRESS`"),
     "no-cluster"),
    (ConnectionError("Failed to connect to Ray cluster at 192.0.2.2:6379"), "failed"),
])
def test_classify_reads_the_cause_out_of_rays_own_text(error: BaseException,
                                                       cause: str) -> None:
    assert classify(error) == cause


def test_a_version_mismatch_names_both_versions() -> None:
    from dsi_ref.backends.ray.connect import _fail, _summary
    error = _fail("version", "h:1", _summary(_VERSION, "version"))
    assert error.cause == "version"
    assert "Ray 2.59.0 on Python 3.11.9" in str(error) and "Ray 2.60.0" in str(error)


# -- a real cluster (slow) -----------------------------------------------------------------------
_CONNECT = r'''
import json, sys, time
import ray
from dsi_ref.backends.ray.connect import connect
from dsi_ref.base.errors import RayConnectionError

address, how = sys.argv[1] or None, sys.argv[2]
if how == "old-ray":     # this process reports another Ray version to Ray's own version check
    import ray._private.utils as utils
    versions = utils.compute_version_info
    utils.compute_version_info = lambda: ("2.0.0", versions()[1])
began = time.monotonic()
try:
    connect(address, join_existing=how == "join", num_cpus=1, connect_timeout=5.0)
    print(json.dumps({"port": int(ray.get_runtime_context().gcs_address.rsplit(":", 1)[1])}))
except RayConnectionError as error:
    print(json.dumps({"cause": error.cause, "message": str(error),
                      "seconds": time.monotonic() - began}))
'''


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    from ray_cluster import RayCluster
    with RayCluster(num_cpus=1) as head:
        yield head


def _connect(cluster: Any, address: str, how: str, **env: str) -> dict[str, Any]:
    result: dict[str, Any] = cluster.driver(_CONNECT, address, how,
                                            env=cluster.env(**env), timeout=120)
    return result


@pytest.mark.slow
def test_no_address_starts_a_private_ray_even_with_a_cluster_here(cluster: Any) -> None:
    private = _connect(cluster, "", "private", RAY_ADDRESS=cluster.address)
    assert private["port"] != cluster.port                 # not the running cluster
    joined = _connect(cluster, "", "join", RAY_ADDRESS=cluster.address)
    assert joined["port"] == cluster.port                  # join_existing: "auto"
    assert _connect(cluster, cluster.address, "address")["port"] == cluster.port


@pytest.mark.slow
def test_a_wrong_or_missing_token_is_an_auth_error(cluster: Any) -> None:
    wrong = _connect(cluster, cluster.address, "address", token="0" * 32)
    assert wrong["cause"] == "auth", wrong
    assert "rejected this process's token" in wrong["message"]
    none = _connect(cluster, cluster.address, "address", RAY_AUTH_MODE="disabled")
    assert none["cause"] == "auth", none
    assert "this process sent none" in none["message"]
    for out in (wrong, none):
        assert "RAY_AUTH_TOKEN" in out["message"] and "\n" not in out["message"]
        print(f"{out['message']} ({out['seconds']:.2f} s)")


@pytest.mark.slow
def test_another_ray_version_is_a_version_error(cluster: Any) -> None:
    import ray
    out = _connect(cluster, cluster.address, "old-ray")
    assert out["cause"] == "version", out
    assert f"the cluster runs Ray {ray.__version__}" in out["message"]
    assert "this process Ray 2.0.0" in out["message"]
    print(f"{out['message']} ({out['seconds']:.2f} s)")


@pytest.mark.slow   # 3 s: torch and the tiny models
def test_bench_on_a_closed_port_prints_one_line_naming_the_cause(
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from dsi_ref.cli import main
    address = f"127.0.0.1:{_free_port()}"
    code = main(["bench", "--target", "tiny-target", "--drafter", "tiny-drafter", "--device",
                 "cpu", "--new-tokens", "4", "--prompts", "1", "--prompt-len", "3",
                 "--backend", "ray", "--ray-address", address])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"cannot join Ray at '{address}': refused" in err[-1]


# -- a process that already runs Ray (#34, point 7) ---------------------------------------------


class _Settings(socketserver.BaseRequestHandler):
    """Answers the probe's HTTP/2 preface with an empty SETTINGS frame, as a gRPC server does."""

    def handle(self) -> None:
        self.request.recv(64)
        self.request.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")


@pytest.fixture
def grpc_like() -> Iterator[str]:
    """A server that passes the probe (it answers like a gRPC server) but is no Ray head."""
    server = socketserver.TCPServer(("127.0.0.1", 0), _Settings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(("wanted", "running", "same"), [
    ("127.0.0.1:6379", "127.0.0.1:6379", True),
    ("localhost:6379", "127.0.0.1:6379", True),
    ("127.0.0.1:6379", "127.0.0.1:6380", False),
    ("ray://127.0.0.1:10001", "127.0.0.1:10001", False),
    ("ray://localhost:10001", "ray://127.0.0.1:10001", True),
    ("192.0.2.7:6379", "127.0.0.1:6379", False),   # TEST-NET-1: never this machine
])
def test_same_address_compares_kind_port_and_host(wanted: str, running: str,
                                                   same: bool) -> None:
    assert same_address(wanted, running) is same


@pytest.mark.usefixtures("ray_local")
def test_an_address_other_than_the_running_rays_is_a_named_error(grpc_like: str) -> None:
    """With Ray running in this process, an address that names it (or another name of this
    machine with its port) reuses it; one that names another cluster, or a Ray Client server,
    is the ``other-cluster`` error (before #34 it was reused in silence)."""
    import ray

    running = ray.get_runtime_context().gcs_address
    assert connect(running, connect_timeout=5) is False
    assert connect(f"localhost:{running.rsplit(':', 1)[1]}", connect_timeout=5) is False
    assert connect() is False and connect("auto") is False
    for other in (grpc_like, f"ray://{grpc_like}"):
        error = _cause(other)
        assert error.cause == "other-cluster"
        assert str(error) == (
            f"cannot join Ray at {other!r}: other-cluster: this process already runs Ray, "
            f"connected to {running!r}; call ray.shutdown() before joining another cluster, "
            "or pass the running one's address (or none) to use it")
    assert ray.is_initialized() and ray.get_runtime_context().gcs_address == running
