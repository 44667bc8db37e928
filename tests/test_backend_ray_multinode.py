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
  raylet, the server processes, each in a process group of its own; the session is found from
  the servers' pids) and the test starts a new node with ``dsi_node2`` when it sees it gone: the
  run ends with non-SI's tokens (a recovery: the lost servers' replacements are built on the new
  node) or a named error (`ServerLostError`, its `ServerTimeoutError`, `UnschedulableError`)
  within the run's deadline (``dsi(timeout=…)``), never a hang or another exception;
* the new node killed mid-run with ``max_replacements=0``: a named error.

The recipe by hand is in docs/ray-backend.md ("Two nodes on one machine").
"""

from __future__ import annotations

import threading

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
from dsi_ref.backends.torch.model import build_pair
from dsi_ref.base.errors import BackendError
from ray_cluster import session
from test_backend_exec_equivalence import PROMPT, N, _replay

address = sys.argv[1]
target, drafter = build_pair()
where_fn = lambda self: (ray.get_runtime_context().get_node_id(), dsi_ref.__file__)


def engine_on_node2(**options):
    return RayEngine(target, drafter, address=address, runtime_env={"py_modules": [dsi_ref]},
                     server_resources={"dsi_node2": 1}, task_timeout=5.0, **options)


def placed(engine):
    node2 = {n["NodeID"] for n in ray.nodes() if n["Alive"] and "dsi_node2" in n["Resources"]}
    found = ray.get([engine.actor_for(s).__ray_call__.remote(where_fn) for s in range(2)])
    return [node in node2 for node, _ in found], [path for _, path in found]


def kill_node_at(engine, calls):
    # kill the node of the servers (every process of its session: ray start, raylet, the
    # server processes) just before the calls-th actor call of the next run is sent
    sid = {os.getsid(pid) for pid in engine.server_pids()}
    assert len(sid) == 1 and os.getsid(0) not in sid, sid
    pool = engine.ray_pool
    submit, sent = pool.submit, [0]
    def killing(slot, job):
        sent[0] += 1
        if sent[0] == calls:
            for pid in session(sid.pop()):
                os.kill(pid, signal.SIGKILL)
        submit(slot, job)
    pool.submit = killing
    return sent


def run_killed(engine, seed, calls):
    sent = kill_node_at(engine, calls)
    expected = dr.autoregressive(target, PROMPT, N, dr.Sampler(seed)).tokens
    began = time.monotonic()
    try:
        real = engine.dsi(PROMPT, N, dr.Sampler(seed), lookahead=2, sp_degree=2,
                          verify="exact_match", timeout=150.0)
        out = {"outcome": "tokens", "ok": list(real.tokens) == list(expected),
               "lost_tasks": real.stats["lost_tasks"],
               "replaced_servers": real.stats["replaced_servers"]}
    except BackendError as error:
        out = {"outcome": "error", "type": type(error).__name__, "message": str(error)}
    out["seconds"] = time.monotonic() - began
    out["calls_before"] = sent[0]
    return out


out = {}
# schedule_timeout: a replacement waits that long for a node to host it (the new node 2)
engine = engine_on_node2(start_timeout=90.0, schedule_timeout=60.0)
try:
    engine.pool(2)
    out["on_node2"], out["dsi_ref_files"] = placed(engine)
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
    # node 2 killed mid-run; the test starts a new node with dsi_node2 when it sees it gone
    out["killed"] = run_killed(engine, 7, calls=4)
    if out["killed"]["outcome"] == "tokens":
        out["after_on_node2"] = placed(engine)[0]
finally:
    engine.close()
# the new node killed mid-run too, with no replacement allowed: a named error
engine = engine_on_node2(start_timeout=90.0, max_replacements=0)
try:
    engine.pool(2)
    out["killed_again"] = run_killed(engine, 8, calls=4)
finally:
    engine.close()
print(json.dumps(out))
'''


def test_dsi_across_two_nodes_and_a_node_lost_mid_run() -> None:
    with RayCluster(num_cpus=1) as cluster:
        node2 = cluster.add_node(2, {"dsi_node2": 2})
        cluster.wait_for("dsi_node2")

        def restart() -> None:       # node 2 comes back (once) when the driver killed it
            node2.wait()
            cluster.add_node(2, {"dsi_node2": 2})

        watcher = threading.Thread(target=restart, daemon=True)
        watcher.start()
        out = cluster.driver(DRIVER, cluster.address, timeout=550)
        watcher.join(timeout=60)
    assert out["on_node2"] == [True, True]                    # placed by the custom resource
    assert all("runtime_resources" in path for path in out["dsi_ref_files"]), out
    for verify, tokens, expected in out["runs"]:
        assert tokens == expected, verify
    for name in ("killed", "killed_again"):
        killed = out[name]
        print(f"{name}: {killed}")
        assert killed["calls_before"] >= 4                    # the kill happened mid-run
        if killed["outcome"] == "tokens":                     # a recovery, and the loss seen
            assert killed["ok"] and killed["lost_tasks"] > 0, killed
        else:
            assert killed["type"] in ("ServerLostError", "ServerTimeoutError",
                                      "UnschedulableError"), killed
    assert out["killed_again"]["outcome"] == "error"          # no replacement allowed
    if out["killed"]["outcome"] == "tokens":                  # replaced on the new node 2
        assert out["after_on_node2"] == [True, True]
