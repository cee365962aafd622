"""Throughput of ``kvproof validate``: events per second on logs of simulated runs.

Each log is a random run of the spec itself (``kvproof simulate``'s workload: 8 request slots
over 64 decode pages, faults at weight 0.02), turned into an event log by the observation
function, so it validates clean.  The time is the search alone (the log read and parsed, the
frontier closed and advanced per event), not compiling the steps; wall and CPU time are both
printed (the search is one process, one core).  Run:
``.venv/bin/python bench/bench_validate.py [--requests N] [--seeds K]``.  The last lines say, per
search, whether the run meets the target (:data:`TARGET` events per CPU second at
:data:`TARGET_SLOTS` slots).

``--engine vllm`` does the same for vLLM logs: a random run of the ``vllm-*`` scenario's engine as
a stream (:class:`kvproof.spec.vllm.validate.VllmStream`: ``--slots`` request slots, ``--pages``
blocks in each pool), faults (a stalled decode, a client abort) at weight 0.02.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from kvproof.checker.logs.validate import Checked, explain, read_log
from kvproof.checker.logs.validate_native import make_search
from kvproof.model.machine import Machine
from kvproof.model.scenario import builtin
from kvproof.spec.sglang import validate as sv
from kvproof.spec.sglang.simulate import simulation_scenario


TARGET = 20_000
"""The throughput target at 8 request slots, in events per CPU second (the issue "From model to
deployment": "at least 20,000 events per CPU second at 8 slots")."""
TARGET_SLOTS = 8

BACKEND = "auto"
"""The search (``--backend``): ``auto`` as ``kvproof validate`` picks it, ``native`` the steps in C,
``python`` the reference, ``factored`` the factored frontier."""


def one(name: str, requests: int, seed: int, slots: int, pages: int) -> tuple[int, float, float, int]:
    """(events, wall seconds, CPU seconds, peak frontier) of validating one simulated log."""
    sc = simulation_scenario(builtin(name), pages, slots)
    spec = sc.build()
    gen = Machine(spec)
    events = sv.to_events(gen, sv.random_run(gen, requests, seed))
    text = sv.log_text(sc, events)
    machine = Checked.invariants(spec)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(text)
    try:
        obs = sv.observation(machine)
        search = make_search(machine, obs, 100_000, BACKEND)
        t0, c0 = time.perf_counter(), time.process_time()
        _, rows = read_log(f.name)
        verdict = explain(machine, obs, (obs.decode(no, raw) for no, raw in rows), 100_000, search)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        os.unlink(f.name)
    assert verdict.kind == "explained", (name, seed, verdict.kind, verdict.why)
    return verdict.events, seconds, cpu, verdict.peak


def one_vllm(name: str, requests: int, seed: int, slots: int, pages: int) -> tuple[int, float, float, int]:
    """(events, wall seconds, CPU seconds, peak frontier) of validating one simulated vLLM log."""
    from kvproof.spec.vllm import validate as vv

    sc = vv.stream_scenario(builtin(name), slots, pages, pages)
    spec = sc.build()
    gen = Machine(spec)
    text = vv.log_text(sc, vv.to_events(gen, vv.random_run(gen, requests, seed)))
    machine = Checked.invariants(spec)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(text)
    try:
        obs = vv.observation(machine)
        search = make_search(machine, obs, 1_000_000, BACKEND)
        t0, c0 = time.perf_counter(), time.process_time()
        _, rows = read_log(f.name)
        verdict = explain(machine, obs, (obs.decode(no, raw) for no, raw in rows), 1_000_000, search)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        os.unlink(f.name)
    assert verdict.kind == "explained", (name, seed, verdict.kind, verdict.why)
    return verdict.events, seconds, cpu, verdict.peak


def main() -> None:
    """Print events/s per scenario and seed, and the total."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--pages", type=int, default=64)
    ap.add_argument("--scenarios", help="default: pr-38935,pr-41404,pr-35049-drain-ack (sglang: scenarios whose random runs break no invariant), "
                                        "vllm-pull-heartbeat,vllm-push-heartbeat,vllm-pull-abort-32255 (vllm)")
    ap.add_argument("--engine", choices=("sglang", "vllm"), default="sglang")
    ap.add_argument("--backend", default="auto", help="the search: auto (as kvproof validate picks), native, python, "
                                                     "factored, both (each log with python, then native), all "
                                                     "(python, native, factored), or a list: python,native,auto")
    a = ap.parse_args()
    vllm = a.engine == "vllm"
    a.scenarios = a.scenarios or ("vllm-pull-heartbeat,vllm-push-heartbeat,vllm-pull-abort-32255" if vllm
                                  else "pr-38935,pr-41404,pr-35049-drain-ack")
    global BACKEND
    backends = {"both": ("python", "native"), "all": ("python", "native", "factored")}.get(
        a.backend, tuple(a.backend.split(",")))
    totals = {b: [0, 0.0, 0.0] for b in backends}
    for name in a.scenarios.split(","):
        for seed in range(a.seeds):
            for backend in backends:
                BACKEND = backend
                e, s, c, peak = (one_vllm if vllm else one)(name, a.requests, seed, a.slots, a.pages)
                t = totals[backend]
                t[0], t[1], t[2] = t[0] + e, t[1] + s, t[2] + c
                print(f"{name:28} seed {seed} {backend:6}: {e:6,} events in {s:5.2f} s wall, {c:5.2f} s CPU = "
                      f"{e / s:7,.0f} events/s wall, {e / c:7,.0f} per CPU second; peak frontier {peak}", flush=True)
    for backend, (total_e, total_s, total_c) in totals.items():
        rate = total_e / total_c
        print(f"total {backend}: {total_e:,} events in {total_s:.2f} s wall ({total_e / total_s:,.0f} events/s), "
              f"{total_c:.2f} s CPU ({rate:,.0f} events per CPU second)")
        print(f"target {backend}: {TARGET:,} events per CPU second at {TARGET_SLOTS} slots ({a.engine} logs, "
              + (f"{a.slots} slots: {'met' if rate >= TARGET else 'NOT met'}, {rate / TARGET:.0%} of it)"
                 if a.slots == TARGET_SLOTS else f"not measured: this run has {a.slots} slots)"))


if __name__ == "__main__":
    main()
