"""``--backend ray`` on a real two-node Ray cluster: a head node and a worker node started with
``ray start`` (two raylets on this machine, on the loopback address 127.0.0.2, one CPU each, so
the two partition actors land one on each node), driven by ``kvproof check`` as a subprocess.

(a) The verdicts and state counts equal the one-process engine's.  (b) SIGKILL of the worker
node's raylet and its worker processes part way through a search ends it INCONCLUSIVE (exit 2)
with the lost-worker reason, within a bounded time, never with a verdict.

Skipped where the ``ray`` command is missing, except under ``KVPROOF_REQUIRE_RAY=1`` (which
``.ci/run`` sets), where a missing Ray fails.  The cluster's processes carry a tag of this run
in their environment; the finalizer kills exactly those (not ``ray stop --force``, which would
end every Ray process on the machine, another run's too) and checks that none is left.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE_IP = "127.0.0.2"  # loopback: Ray swaps 127.0.0.1 for the machine's outward address, not this one
SCENARIO = "aux-freed-early"  # 8,874 states, three claims violated, complete
LONG = ROOT / "bench" / "standard.toml"  # millions of states: tens of seconds on two actors
LOST = re.compile(r"a Ray worker was lost at depth (\d+) \((\w+)\): the search is cut short")
# node death noticed within about 2 s of missed health checks (Ray's default is tens of seconds)
HEALTH = {"health_check_initial_delay_ms": 1000, "health_check_period_ms": 500, "health_check_timeout_ms": 1000,
          "health_check_failure_threshold": 4}

pytestmark = pytest.mark.slow  # two nodes start in about 10 s


def _ray_cli() -> str | None:
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else shutil.which("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((NODE_IP, 0))
        return s.getsockname()[1]


def _procs() -> dict[int, tuple[int, int, str, int]]:
    """Every process: pid -> (parent pid, process group, command line, session)."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(d.name)] = (int(fields[1]), int(fields[2]), cmd, int(fields[3]))
    return out


def _ours(groups: set[int], tag: str) -> list[int]:
    """The live processes of the sessions ``groups`` (each ``ray start`` and its daemons), their
    descendants (Ray's worker processes start sessions of their own), and those whose environment
    still shows ``tag`` (the drivers; Ray's renamed processes overwrite theirs)."""
    procs = {pid: p for pid, p in _procs().items() if p[2]}  # zombies have no command line
    found = {pid for pid, (_, group, _, sid) in procs.items() if group in groups or sid in groups}
    needle = tag.encode()
    for pid in procs:
        try:
            if needle in Path(f"/proc/{pid}/environ").read_bytes():
                found.add(pid)
        except OSError:
            pass
    grew = True
    while grew:
        more = {pid for pid, (ppid, *_) in procs.items() if ppid in found} - found
        found |= more
        grew = bool(more)
    found.discard(os.getpid())
    return sorted(found)


class Cluster:
    """A head node and a worker node on this machine, and how to reach and stop them."""

    def __init__(self, ray: str):
        self.ray = ray
        self.tag = f"KVPROOF_RAY_CLUSTER_TAG={secrets.token_hex(8)}"
        self.dir = tempfile.mkdtemp(prefix="kvray")  # short: Ray's socket paths must fit 107 bytes
        self.port = _free_port()
        self.address = f"{NODE_IP}:{self.port}"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN": secrets.token_hex(32), self.tag.split("=")[0]: self.tag.split("=")[1]}
        self.env.pop("RAY_ADDRESS", None)
        self.groups: set[int] = set()
        self.worker_group = 0

    def _start(self, *args: str) -> int:
        p = subprocess.Popen([self.ray, "start", "--node-ip-address", NODE_IP, "--num-cpus", "1",
                              "--object-store-memory", str(100 * 1024**2), "--disable-usage-stats", *args],
                             env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)  # its daemons keep this process group
        self.groups.add(p.pid)
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0, f"ray start {' '.join(args)} failed:\n{out[-3000:]}"
        return p.pid

    def start(self) -> None:
        """``ray start --head``, then ``ray start --address`` of a second node."""
        self._start("--head", "--port", str(self.port), "--temp-dir", self.dir, "--include-dashboard", "false",
                    "--resources", json.dumps({"kvproof_head": 1}), "--system-config", json.dumps(HEALTH))
        self.worker_group = self._start("--address", self.address, "--resources", json.dumps({"kvproof_worker": 1}))

    def worker_raylet(self) -> int:
        """The worker node's raylet process."""
        for pid, (_, group, cmd, _) in _procs().items():
            if group == self.worker_group and cmd.split(" ")[0].endswith("/raylet"):
                return pid
        raise AssertionError("the worker node has no raylet")

    def stop(self) -> list[int]:
        """SIGKILL every process of this cluster; those still there 10 s later (none, normally)."""
        deadline = time.monotonic() + 10
        left = _ours(self.groups, self.tag)
        while left and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
            left = _ours(self.groups, self.tag)
        shutil.rmtree(self.dir, ignore_errors=True)
        return left


@pytest.fixture(scope="module")
def cluster():
    ray = _ray_cli()
    if ray is None:
        if os.environ.get("KVPROOF_REQUIRE_RAY") == "1":
            pytest.fail("KVPROOF_REQUIRE_RAY=1 but the ray command is missing (pip install 'kvproof[ray]')")
        pytest.skip("the ray command is missing (pip install 'kvproof[ray]')")
    c = Cluster(ray)
    try:
        c.start()
        yield c
    finally:
        assert c.stop() == [], "processes of the test's Ray cluster survived SIGKILL"


def _check(cluster: Cluster, *argv: str) -> subprocess.Popen:
    """``kvproof check ARGV --backend ray --workers 2`` on the cluster, started (not waited for)."""
    return subprocess.Popen([sys.executable, "-m", "kvproof", "check", *argv, "--backend", "ray", "--workers", "2",
                          "--ray-address", cluster.address, "--json", "--no-traces"], env=cluster.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cluster.dir)


def _finish(p: subprocess.Popen, timeout: float) -> tuple[dict, str]:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"kvproof check did not end within {timeout} s:\n{err[-3000:]}") from None
    assert out, f"no JSON on stdout (exit {p.returncode}):\n{err[-3000:]}"
    return json.loads(out), err


def test_two_nodes_give_the_one_process_verdicts_and_counts(cluster):
    p = _check(cluster, SCENARIO)
    doc, err = _finish(p, 120)
    alone = subprocess.run([sys.executable, "-m", "kvproof", "check", SCENARIO, "--backend", "python", "--json",
                            "--no-traces"], capture_output=True, text=True, timeout=120, cwd=cluster.dir)
    one = json.loads(alone.stdout)
    assert p.returncode == doc["exit_code"] == alone.returncode == 0, err[-3000:]
    (entry,), (base,) = doc["scenarios"], one["scenarios"]
    s, b = entry["stats"], base["stats"]
    assert entry["complete"] is base["complete"] is True and s["backend"] == "ray" and s["workers"] == 2
    counts = ("states", "transitions", "depth", "quiescent_states", "represented_states")
    assert [s[k] for k in counts] == [b[k] for k in counts]
    assert len(s["worker_cpu_seconds"]) == 2 and all(t > 0 for t in s["worker_cpu_seconds"])  # both partitions worked
    verdicts = [[(r["invariant"], r["verdict"], r["depth"]) for r in e["results"]] for e in (entry, base)]
    assert verdicts[0] == verdicts[1]
    assert any(r["verdict"] == "violated" for r in entry["results"])  # the comparison covers counterexamples


def test_a_killed_worker_node_ends_the_search_inconclusive(cluster):
    p = _check(cluster, str(LONG), "--visited", "fingerprint", "--max-seconds", "90")
    raylet = cluster.worker_raylet()
    deadline = time.monotonic() + 90  # the actor on the worker node: the search has begun
    while not any(ppid == raylet and cmd.startswith("ray::_Host") for ppid, _, cmd, _ in _procs().values()):
        assert p.poll() is None and time.monotonic() < deadline, "the search never started on the worker node"
        time.sleep(0.1)
    time.sleep(3)  # part way through the search (it takes tens of seconds)
    assert p.poll() is None, "the search ended before the worker node was killed"
    victims = [raylet] + [pid for pid, (ppid, *_) in _procs().items() if ppid == raylet]
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    doc, err = _finish(p, 60)
    assert time.monotonic() - killed < 30, "the loss took too long to be noticed"
    assert p.returncode == doc["exit_code"] == 2 and doc["verdict"] == "inconclusive", err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    (entry,) = doc["scenarios"]
    assert entry["complete"] is False
    m = LOST.fullmatch(entry["reason"])
    assert m, entry["reason"]
    assert int(m.group(1)) >= 1 and m.group(2).endswith("Error")  # lost part way, with Ray's own error named
    assert 1 < entry["stats"]["states"] and entry["stats"]["depth"] == int(m.group(1))
    assert entry["results"] and {r["verdict"] for r in entry["results"]} == {"inconclusive"}
