"""A throwaway Ray cluster of the tests' own: ``ray start`` processes on this machine.

Each node is ``ray start --block`` in a session of its own (``start_new_session``), so it is
stopped by its own session id (its pid), never by a name pattern or an unscoped ``ray stop`` (other
tests run Ray in-process on this machine). The head gets free ports and a temp dir of its own,
and token authentication with a token made up here. Drivers run as fresh Python processes
(`RayCluster.driver`): a process holds one Ray connection, and other test files start Ray
in-process.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def session(sid: int) -> list[int]:
    """The processes of session ``sid`` (Linux: /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    pids.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                pass
    return pids


class RayCluster:
    """A head (``num_cpus`` CPUs), and worker nodes added with `add_node`; a context manager
    that stops every node it started (SIGTERM to its session, then SIGKILL)."""

    def __init__(self, num_cpus: int = 1) -> None:
        self.token = secrets.token_hex(16)
        self.temp_dir = tempfile.mkdtemp(prefix="dsr", dir="/tmp")   # short: unix sockets
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[subprocess.Popen[bytes]] = []
        self._start(["--head", "--port", str(self.port), "--num-cpus", str(num_cpus),
                     "--node-ip-address", "127.0.0.1", "--temp-dir", self.temp_dir,
                     "--include-dashboard=false", "--dashboard-port", str(free_port()),
                     "--disable-usage-stats"])
        self._wait_head()

    def _wait_head(self, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return
            except OSError:
                if self.nodes[0].poll() is not None or time.monotonic() > end:
                    self.close()
                    raise AssertionError(f"the head did not start:\n{self.log(0)}") from None
                time.sleep(0.3)

    def log(self, index: int) -> str:
        """The output of node ``index`` (0: the head), its last 4000 characters."""
        path = Path(self.temp_dir) / f"node{index}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def env(self, token: str | None = None, **extra: str) -> dict[str, str]:
        """An environment that joins this cluster with ``token`` (default: its own)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token or self.token, **extra})
        return env

    def _start(self, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(Path(self.temp_dir) / f"node{len(self.nodes)}.log", "wb")  # noqa: SIM115
        with log:
            node = subprocess.Popen([RAY, "start", *args, "--block"], env=self.env(),
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.nodes.append(node)
        return node

    def add_node(self, num_cpus: int, resources: dict[str, float]) -> subprocess.Popen[bytes]:
        """Start a worker node (``ray start --address``) with these CPUs and custom
        resources; its pid is its session id (`kill`)."""
        return self._start(["--address", self.address, "--num-cpus", str(num_cpus),
                            "--node-ip-address", "127.0.0.1",
                            "--resources", json.dumps(resources), "--disable-usage-stats"])

    def kill(self, node: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
        """Signal every process of ``node``'s session (``ray start`` is its leader; the raylet
        puts each worker in a process group of its own, but in that session)."""
        for pid in session(node.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def driver(self, code: str, *args: str, env: dict[str, str] | None = None,
               timeout: float = 300.0) -> dict[str, Any]:
        """Run ``code`` in a fresh Python process (argv: ``args``); the last line it prints is
        JSON, returned. A driver that fails raises with its output."""
        done = subprocess.run([sys.executable, "-c", code, *args], env=env or self.env(),
                              capture_output=True, timeout=timeout, check=False,
                              cwd=Path(__file__).parent)
        lines = done.stdout.decode().strip().splitlines()
        if done.returncode != 0 or not lines:
            raise AssertionError(f"driver exited {done.returncode}:\n{done.stdout.decode()}\n"
                                 f"{done.stderr.decode()[-4000:]}")
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def wait_for(self, resource: str, timeout: float = 120.0) -> None:
        """Wait until a node with ``resource`` registered with the head."""
        code = ("import json, sys, time, ray\n"
                "ray.init(address=sys.argv[1], log_to_driver=False)\n"
                "end = time.monotonic() + float(sys.argv[3])\n"
                "while sys.argv[2] not in ray.cluster_resources() and time.monotonic() < end:\n"
                "    time.sleep(0.5)\n"
                "print(json.dumps(sys.argv[2] in ray.cluster_resources()))\n")
        result = self.driver(code, self.address, resource, str(timeout))
        assert result is True, f"no node with {resource} joined within {timeout} s"

    def close(self) -> None:
        """Stop every node: SIGTERM to its session (``ray start --block`` stops its
        processes), then, 10 s later, SIGKILL to whatever of the session is left."""
        for node in reversed(self.nodes):
            self.kill(node, signal.SIGTERM)
        end = time.monotonic() + 10
        for node in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.wait(timeout=max(0.1, end - time.monotonic()))
        for node in self.nodes:       # a node that did not stop, and workers left behind
            self.kill(node, signal.SIGKILL)
            node.wait(timeout=30)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
