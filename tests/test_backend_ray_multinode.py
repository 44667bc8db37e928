"""DSI on a real two-node Ray cluster on this machine (issue 26, point 5); slow.

A head (``ray start --head``, 1 CPU) and a second node (``ray start --address …``, 2 CPUs and the
custom resource ``dsi_node2: 2``), each its own session (tests/ray_cluster.py). The driver,
a fresh Python process, joins with ``runtime_env={"py_modules": [dsi_ref]}`` (the code travels
with the job: a node without dsi_ref installed gets it), puts the target servers on node 2 with
``server_resources={"dsi_node2": 1}``, and runs DSI with the tiny float64 pair:

* ``exact_match`` / ``greedy`` commit non-SI's tokens, ``rejection`` the reference rule's
  decisions on the run's own schedule (the replay of tests/test_backend_exec_equivalence.py);
  every server ran on node 2 and imported dsi_ref from the shipped copy;
* then node 2 is killed mid-run (SIGKILL to every process of its session: ``ray start``, the
  raylet, the server processes, each in a process group of its own): the
  run ends with non-SI's tokens (a recovery) or a named error (`ServerLostError`, its
  `ServerTimeoutError`, or `UnschedulableError` for a replacement no node can host) within
  the run's deadline (``dsi(timeout=…)``), never a hang or another exception.

The recipe by hand is in docs/ray-backend.md ("Two nodes on one machine").
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray")

from ray_cluster import RayCluster

pytestmark = [pytest.mark.slow, pytest.mark.torch]

DRIVER = r'''
import json, os, signal, sys, time
import ray
import dsi_ref, dsi_ref as dr
from dsi_ref.backends.ray import RayEngine
from dsi_ref.backends.torch_model import build_pair
from dsi_ref.base.errors import BackendError
from test_backend_exec_equivalence import PROMPT, N, _replay

address, node2_session = sys.argv[1], int(sys.argv[2])
from ray_cluster import session
target, drafter = build_pair()
out = {}
engine = RayEngine(target, drafter, address=address, runtime_env={"py_modules": [dsi_ref]},
                   server_resources={"dsi_node2": 1}, task_timeout=5.0, start_timeout=45.0)
try:
    node2 = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "dsi_node2" in n["Resources"]]
    servers = engine.servers(2)
    where = ray.get([engine.actor_for(s).__ray_call__.remote(
        lambda self: (ray.get_runtime_context().get_node_id(), dsi_ref.__file__))
        for s in range(2)])
    out["on_node2"] = [node == node2[0] for node, _ in where]
    out["dsi_ref_files"] = [path for _, path in where]
    out["runs"] = []
    for verify in ("exact_match", "greedy"):
        for seed in range(2):
            expected = dr.autoregressive(target, PROMPT, N, dr.Sampler(seed),
                                         greedy=verify == "greedy").tokens
            real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=2,
                              verify=verify, timeout=120.0)
            out["runs"].append([verify, list(real.tokens), list(expected)])
    real = engine.dsi(PROMPT, N, dr.Sampler(5), lookahead=3, sp_degree=2, timeout=120.0)
    out["runs"].append(["rejection", list(real.tokens), _replay(target, drafter, real, 5)])

    # node 2 dies mid-run: every process of its session (ray start, raylet, servers)
    outbox = engine.ray_outbox
    submit, sent = outbox.submit, [0]
    def killing(slot, job):
        sent[0] += 1
        if sent[0] == 4:
            for pid in session(node2_session):
                os.kill(pid, signal.SIGKILL)
        submit(slot, job)
    outbox.submit = killing
    expected = dr.autoregressive(target, PROMPT, N, dr.Sampler(7)).tokens
    began = time.monotonic()
    try:
        real = engine.dsi(PROMPT, N, dr.Sampler(7), lookahead=2, sp_degree=2,
                          verify="exact_match", timeout=100.0)
        out["killed"] = {"outcome": "tokens", "ok": list(real.tokens) == list(expected),
                         "lost_tasks": real.stats["lost_tasks"]}
    except BackendError as error:
        out["killed"] = {"outcome": "error", "type": type(error).__name__,
                         "message": str(error)}
    out["killed"]["seconds"] = time.monotonic() - began
    out["killed"]["calls_before"] = sent[0]
finally:
    began = time.monotonic()
    engine.close()
    out["close_seconds"] = time.monotonic() - began
print(json.dumps(out))
'''


def test_dsi_across_two_nodes_and_a_node_lost_mid_run() -> None:
    with RayCluster(num_cpus=1) as cluster:
        node2 = cluster.add_node(2, {"dsi_node2": 2})
        cluster.wait_for("dsi_node2")
        out = cluster.driver(DRIVER, cluster.address, str(node2.pid), timeout=500)
    assert out["on_node2"] == [True, True]                    # placed by the custom resource
    assert all("runtime_resources" in path for path in out["dsi_ref_files"]), out
    for verify, tokens, expected in out["runs"]:
        assert tokens == expected, verify
    killed = out["killed"]
    print(f"node 2 killed mid-run: {killed}; engine closed in {out['close_seconds']:.1f} s")
    assert killed["calls_before"] >= 4                        # the kill happened mid-run
    if killed["outcome"] == "tokens":
        assert killed["ok"] and killed["lost_tasks"] > 0      # a recovery, and the loss seen
    else:
        assert killed["type"] in ("ServerLostError", "ServerTimeoutError",
                                  "UnschedulableError"), killed
