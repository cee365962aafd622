"""``kvproof validate --merge OUT LOG...`` (``checker/logs/merge.py``): a prefill log and a decode
log of one run, each unexplained on its own (``validate DIR`` checks them apart), merged by time
into the run's log and checked as one: the same events in the same order as the log they were
split from, each with its origin, and the same verdict and line; the header's ``t0`` (the
recorder's wall clock) puts logs opened at different moments on one clock."""

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from kvproof.checker.cli import main
from kvproof.checker.logs.eventlog import EventLog
from kvproof.checker.logs.merge import merge_logs

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
HAZARD = "examples/validate/vllm-lease-expiry.jsonl"  # flagged at line 6 (no_source_free_while_read)


def run(capsys, *argv):
    code = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _lines(path):
    return [json.loads(x) for x in open(path, encoding="utf-8").read().splitlines() if x.strip()]


def _write(path, header, events):
    path.write_text("".join(json.dumps(x) + "\n" for x in [header, *events]))
    return path


def _split(tmp_path, log, shift=None):
    """``log`` split by actor into ``prefill.jsonl`` and ``decode.jsonl`` (each with the header);
    with ``shift``, headers with ``t0`` where decode's log was opened ``shift`` s after prefill's."""
    header, *events = _lines(log)
    d = tmp_path / "pair"
    d.mkdir()
    out = []
    for actor in ("decode", "prefill"):
        mine = [dict(e) for e in events if e["actor"] == actor]
        h = dict(header)
        if shift is not None:
            h["t0"] = 1_000_000.0 + (shift if actor == "decode" else 0.0)
            for e in mine:
                e["t"] = round(e["t"] - (shift if actor == "decode" else 0.0), 6)
        out.append(_write(d / f"{actor}.jsonl", h, mine))
    return d, out


def _findings(out):
    return [(o["log"], o["line"], o["finding"], o["event"]) for o in map(json.loads, out.splitlines()) if "finding" in o]


def test_a_pair_s_logs_apart_are_unexplained_and_merged_are_the_run_s_log(tmp_path, capsys):
    d, (decode, prefill) = _split(tmp_path, HAZARD)
    code, out, _ = run(capsys, d, "--no-traces", "--json")
    # each log alone: decode's first line (its slot never opened), prefill's lease reaped at line 3
    # (no time passes in the model before decode has the request, which is in the other log)
    assert code == 5
    assert _findings(out) == [(str(decode), 2, "unexplained", "decode_on_new_request"),
                              (str(prefill), 3, "unexplained", "prefill_reap_expired_lease")]
    merged = tmp_path / "merged.jsonl"
    code, out, _ = run(capsys, "--merge", merged, d, "--no-traces", "--json")
    assert code == 1
    assert _findings(out) == [(str(merged), 6, "violation", "decode_start_load_kv")]
    finding = json.loads(out.splitlines()[0])
    assert finding["claims"] == ["no_source_free_while_read"] and finding["raw"]["origin"] == f"{decode}:3"
    code, out, _ = run(capsys, "--merge", merged, d, "--no-traces")
    assert code == 1 and out.splitlines()[0] == f"{merged}: 11 events of 2 logs, merged by time"
    whole = _lines(HAZARD)
    got = _lines(merged)
    assert got[0] == whole[0]
    assert [{k: v for k, v in e.items() if k != "origin"} for e in got[1:]] == whole[1:]
    side = {"decode": decode, "prefill": prefill}
    seen = {"decode": 1, "prefill": 1}
    for e in got[1:]:  # every event's origin is its line in its side's log
        seen[e["actor"]] += 1
        assert e["origin"] == f"{side[e['actor']]}:{seen[e['actor']]}"


def test_the_headers_wall_clock_orders_logs_opened_apart(tmp_path, capsys):
    """Decode's log opened 0.004 s after prefill's, its ``t`` counted from then: merged by ``t0 + t``
    it is the run's order (by ``t`` alone it would not be: line 3's reap would come after
    decode's READ); the merged header's ``t0`` is the earlier one."""
    d, (decode, prefill) = _split(tmp_path, HAZARD, shift=0.004)
    assert [e["t"] for e in _lines(decode)[1:3]] == [-0.003, 0.005]
    merged = tmp_path / "merged.jsonl"
    assert merge_logs([str(prefill), str(decode)], str(merged)) == (2, 11)
    got = _lines(merged)
    assert got[0]["t0"] == 1_000_000.0
    assert [e["event"] for e in got[1:]] == [e["event"] for e in _lines(HAZARD)[1:]]
    assert [e["t"] for e in got[1:]] == [e["t"] for e in _lines(HAZARD)[1:]]
    code, out, _ = run(capsys, "--merge", merged, prefill, decode, "--no-traces", "--json")
    assert code == 1 and _findings(out) == [(str(merged), 6, "violation", "decode_start_load_kv")]
    _write(d / "decode.jsonl", _lines(prefill)[0] | {"t0": 999_999.0}, _lines(decode)[1:])
    code, out, _ = run(capsys, "--merge", merged, d, "--no-traces", "--json")
    assert code == 5 and _findings(out)[0][2] == "unexplained"  # decode's clock moved: another order


@given(data=st.data())
@settings(max_examples=25, **SETTINGS)
def test_any_split_of_a_log_merges_back_to_it(tmp_path_factory, data):
    """Events of one log (strictly increasing ``t``) dealt to 2-4 logs in any way, each keeping
    its order: merged, they are the log again (any order of the paths)."""
    header, *events = _lines("examples/validate/vllm-clean.jsonl")
    k = data.draw(st.integers(2, 4))
    owner = data.draw(st.lists(st.integers(0, k - 1), min_size=len(events), max_size=len(events)))
    d = tmp_path_factory.mktemp("split")
    paths = [_write(d / f"p{i}.jsonl", header, [e for e, o in zip(events, owner) if o == i]) for i in range(k)]
    order = data.draw(st.permutations(range(k)))
    merged = d / "merged.jsonl"
    assert merge_logs([str(paths[i]) for i in order], str(merged)) == (k, len(events))
    got = _lines(merged)
    assert got[0] == header
    assert [{x: v for x, v in e.items() if x != "origin"} for e in got[1:]] == events
    for e, o in zip(got[1:], owner):
        assert e["origin"].startswith(f"{paths[o]}:")


def test_logs_that_cannot_be_merged_are_bad_input(tmp_path, capsys):
    d, (decode, prefill) = _split(tmp_path, HAZARD)
    merged = tmp_path / "m.jsonl"
    code, _, err = run(capsys, "--merge", merged, decode)
    assert code == 3 and "--merge: at least two logs to merge, got 1" in err
    other = _write(tmp_path / "other.jsonl", {"v": 1, "log": "kvproof-events", "scenario": "vllm-pull-heartbeat"},
                   _lines(prefill)[1:])
    code, _, err = run(capsys, "--merge", merged, decode, other)
    assert code == 3 and f"{other}:header: scenario: 'vllm-pull-heartbeat', but {decode} has 'vllm-pull-heartbeat-stall'" in err
    clocked = _write(tmp_path / "clocked.jsonl", _lines(prefill)[0] | {"t0": 5.0}, _lines(prefill)[1:])
    code, _, err = run(capsys, "--merge", merged, clocked, decode)
    assert code == 3 and f"{decode}:header: no t0, which the other logs have" in err
    code, _, err = run(capsys, "--merge", merged, "--follow", decode)
    assert code == 3 and "--follow" in err
    code, _, err = run(capsys, "--merge", tmp_path, decode, prefill)
    assert code == 3 and "is a directory" in err


def test_the_recorder_s_header_has_its_wall_clock(tmp_path):
    import time

    before = time.time()
    log = EventLog(tmp_path / "r.jsonl", "vllm-pull-heartbeat", slots=2)
    log.write(event="x")
    log.close()
    header, event = _lines(tmp_path / "r.jsonl")
    assert before <= header["t0"] <= time.time() and header["slots"] == 2 and event["t"] >= 0
