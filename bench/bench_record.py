"""Overhead of ``kvproof.record``: the conformance harness driving SGLang 0.5.23's real code along
the same random event sequences, with and without the recorder installed.

After an untimed warm-up round, each round runs every sequence once plain and once recorded (the
order alternating between rounds, so load drift falls on both sides); the time is ``run_on_code`` (the real
code's work, the harness's thread hand-offs and the model comparison), not building the harness.
The ratio is recorded time over plain time, summed over all runs; the cost of writing one line
(``write_event``: format, append, flush) is timed alone over 10,000 lines.  Needs the sglang extra.  Run:
``.venv/bin/python bench/bench_record.py [--scenario NAME] [--sequences N] [--rounds K]``.

``--engine vllm`` does the same on vLLM 0.33.0's real scheduler and NIXL connector classes (pull
mode; the vllm extra), default scenario ``vllm-pull-heartbeat``, with the recorder of
``kvproof.spec.vllm.record``.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time


def sequences(machine, count: int, steps: int) -> list[list[int]]:
    """``count`` random runs of the model (``steps`` long at most), as tests/test_record.py draws
    them (no client abort of a request decode never had: that calls no SGLang code)."""
    out = []
    slot = machine.spec.layout.slot
    for seed in range(count):
        rng = random.Random(seed)
        state, run = machine.init, []
        for _ in range(steps):
            enabled = [(a, t) for a, t in machine.successors(state)
                       if not (machine.instances[a].name == "decode_abort"
                               and state[slot("d_phase", machine.instances[a].args[0])] == 0)]
            if not enabled:
                break
            aid, state = rng.choice(enabled)
            run.append(aid)
        out.append(run)
    return out


def timed(scenario, machine, actions, log: str | None) -> tuple[float, int]:
    """(seconds of ``run_on_code``, events logged) for one run, recorded to ``log`` if given."""
    if scenario.family == "vllm":
        from kvproof.spec.vllm.conform.replay import harness_for, run_on_code
        from kvproof.spec.vllm.record import install as install_vllm

        harness = harness_for(scenario, machine.spec)
        rec = install_vllm(log, scenario.name) if log else None
        if rec is not None:
            harness.on_read_posted.append(rec.read_posted)  # the harness stands in for decode's worker
    else:
        from kvproof.spec.sglang.conform.replay import harness_for, run_on_code
        from kvproof.spec.sglang.conform.wiring import ROOM_BASE
        from kvproof.spec.sglang.record import install

        harness = harness_for(scenario, machine.spec)
        rec = install(log, scenario.name, room_base=ROOM_BASE) if log else None
    try:
        t0 = time.perf_counter()
        result = run_on_code(machine, harness, actions)
        seconds = time.perf_counter() - t0
    finally:
        if rec is not None:
            rec.uninstall()
            rec.log.close()
        harness.close()
    if not result.agrees:
        raise SystemExit(f"the harness disagreed with the model: {result.reason}")
    return seconds, rec.log.count if rec is not None else 0


def main() -> None:
    """Print plain and recorded seconds per round and the overall ratio."""
    from kvproof.model.machine import Machine
    from kvproof.model.scenario import builtin

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("sglang", "vllm"), default="sglang")
    ap.add_argument("--scenario", help="default: sglang-0.5.23-mooncake (sglang), vllm-pull-heartbeat (vllm)")
    ap.add_argument("--sequences", type=int, default=20)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    args.scenario = args.scenario or ("vllm-pull-heartbeat" if args.engine == "vllm" else "sglang-0.5.23-mooncake")
    sc = builtin(args.scenario)
    machine = Machine(sc.build())
    runs = sequences(machine, args.sequences, args.steps)
    plain = recorded = 0.0
    events = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, actions in enumerate(runs):  # a warm-up round, untimed: the first run of each code path
            timed(sc, machine, actions, None)  # pays for imports and caches (vLLM: 2-3 times a later run)
            timed(sc, machine, actions, os.path.join(tmp, f"warm-{i}.jsonl"))
        for k in range(args.rounds):
            p = r = 0.0
            for i, actions in enumerate(runs):
                log = os.path.join(tmp, f"{k}-{i}.jsonl")
                order = (None, log) if (k + i) % 2 == 0 else (log, None)
                for target in order:
                    seconds, n = timed(sc, machine, actions, target)
                    if target is None:
                        p += seconds
                    else:
                        r += seconds
                        events += n
            plain, recorded = plain + p, recorded + r
            print(f"round {k + 1}: plain {p:.3f} s, recorded {r:.3f} s, ratio {r / p:.3f}")
    from kvproof.checker.logs.eventlog import EventLog
    from kvproof.spec.sglang.record import write_event

    with tempfile.TemporaryDirectory() as tmp:  # the writer alone: one line appended and flushed
        log = EventLog(os.path.join(tmp, "emit.jsonl"), args.scenario)
        t0 = time.perf_counter()
        for i in range(10_000):
            write_event(log, "kv_transfer_write", "prefill", 0, i % 8, "R0", 0, layer=0, chunk=0, page=i % 64)
        emit = (time.perf_counter() - t0) / 10_000
        log.close()
    steps = sum(len(x) for x in runs) * args.rounds
    print(f"{args.scenario}: {args.rounds} x {len(runs)} sequences, {steps:,} steps, {events:,} events logged; "
          f"plain {plain:.2f} s, recorded {recorded:.2f} s: ratio {recorded / plain:.3f}, "
          f"{(recorded - plain) / max(events, 1) * 1e6:,.0f} us per event; one event line alone {emit * 1e6:.1f} us")


if __name__ == "__main__":
    main()
