"""``kvproof check --checkpoint DIR``: a search killed part way (the Python engine's, or the
native backend's in one thread) resumes from its checkpoint and ends exactly as one never
interrupted; a checkpoint that is not this search's, or not whole, is
refused (one line, exit 3, the file left as it was); a kill while writing keeps the previous one."""

import json
import signal
import subprocess
import sys
import time
from array import array
from pathlib import Path

import pytest

from kvproof.checker.cli.commands import main
from kvproof.checker.explicit import checkpoint as ck
from kvproof.checker.explicit.backends import AutoBackend, NativeBackend, PythonBackend, RayBackend, WorkersBackend
from kvproof.checker.explicit.run import Checker, check_scenario
from kvproof.checker.explicit.search import Limits
from kvproof.model.scenario import builtin

BIG = "v0.5.22"  # about 400,000 states: a few seconds on the Python engine
MEDIUM = "sglang-0.5.23-shared-room-abort"  # about 80,000 states: a second
SMALL = "aux-freed-early"  # about 9,000 states
LIVE = "vllm-pull-reaper-58222"  # about 12,000 states, liveness claims violated: the search keeps the graph


class Killed(BaseException):
    """What the tests raise in place of a kill, right after a checkpoint was written."""


def outcome(report):
    """What an interrupted search must reproduce: counts, completeness, every verdict and the
    actions of every counterexample or witness trace."""
    s = report.stats
    return (s.states, s.transitions, s.depth, s.quiescent, s.represented, report.complete, report.reason,
            [(c.claim, c.verdict, c.depth,
              None if getattr(c.result, "trace", None) is None else
              (tuple(c.result.trace.actions), getattr(c.result.trace, "loop", None)))
             for c in report.claims])


def killed_after(monkeypatch, when):
    """Make the first checkpoint with ``when(saved)`` raise :class:`Killed` once it is on disk
    (the ones before it are skipped: only the last one written counts)."""
    save = ck.Checkpoint.save

    def dying(self, saved):
        if when(saved):
            save(self, saved)
            raise Killed

    monkeypatch.setattr(ck.Checkpoint, "save", dying)


@pytest.mark.parametrize("name, options, kill_at", [
    (SMALL, {}, 2000),
    (LIVE, {}, 3000),  # the graph kept for the liveness claims is checkpointed with the search
    (LIVE, {"limits": Limits(max_states=5000)}, 5000),  # killed after the state limit cut a level
    (LIVE, {"only": ["no_source_free_while_read", "held_pages_are_released"]}, 100),  # the graph goes on
    ("tp2x2", {"symmetry": True}, 100),
    ("tp2x2", {"visited": "fingerprint"}, 1000),
    ("tp2x2", {"only": ["sometimes_partial_acks"]}, 10),  # stops once it hit
    (MEDIUM, {}, 70_000),  # past the switch to the numpy visited set
    pytest.param(MEDIUM, {"visited": "fingerprint"}, 70_000, marks=pytest.mark.thorough),
])
def test_a_search_killed_after_a_checkpoint_resumes_to_the_same_outcome(monkeypatch, tmp_path, name, options,
                                                                          kill_at):
    sc = builtin(name)
    fresh = check_scenario(sc, backend=PythonBackend(), **options)
    with monkeypatch.context() as m:
        killed_after(m, lambda saved: saved.numbers["n_states"] >= kill_at)
        with pytest.raises(Killed):
            check_scenario(sc, backend=PythonBackend(), checkpoint=tmp_path, checkpoint_every=1e-9, **options)
    (left,) = tmp_path.iterdir()
    assert left.name == f"{name}.kvckpt"
    resumed = check_scenario(sc, backend=PythonBackend(), checkpoint=tmp_path, checkpoint_every=3600, **options)
    assert resumed.checkpoint["resumed_from"]["n_states"] >= kill_at
    assert outcome(resumed) == outcome(fresh)
    assert not resumed.checkpoint["kept"] and list(tmp_path.iterdir()) == []  # done: the file is removed


def _native_or_skip():
    from kvproof.checker.explicit.native import c_compiler

    if c_compiler() is None:  # pragma: no cover - every CI image has one
        pytest.skip("no C compiler")
    return NativeBackend()


@pytest.mark.parametrize("name, options, kill_at", [
    ("tp2x2", {}, 10_000),
    ("tp2x2", {"visited": "fingerprint"}, 10_000),
    ("tp2x2", {"symmetry": True}, 100),
    ("tp2x2", {"only": ["sometimes_partial_acks"]}, 10),
])
def test_the_native_backends_search_killed_after_a_checkpoint_resumes_to_the_same_outcome(monkeypatch, tmp_path, name,
                                                                                        options, kill_at):
    backend = _native_or_skip()
    sc = builtin(name)
    fresh = check_scenario(sc, backend=backend, **options)
    with monkeypatch.context() as m:
        killed_after(m, lambda saved: saved.numbers["n_states"] >= kill_at)
        with pytest.raises(Killed):
            check_scenario(sc, backend=backend, checkpoint=tmp_path, checkpoint_every=1e-9, **options)
    resumed = check_scenario(sc, backend=backend, checkpoint=tmp_path, checkpoint_every=3600, **options)
    assert resumed.backend == "native" and resumed.checkpoint["resumed_from"]["n_states"] >= kill_at
    assert outcome(resumed) == outcome(fresh)
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_of_one_engine_is_refused_by_the_other(monkeypatch, tmp_path):
    backend = _native_or_skip()
    sc = builtin("tp2x2")
    with monkeypatch.context() as m:
        killed_after(m, lambda saved: True)
        with pytest.raises(Killed):
            check_scenario(sc, backend=PythonBackend(), checkpoint=tmp_path, checkpoint_every=1e-9)
    with pytest.raises(ck.CheckpointError, match="engine 'python'"):
        check_scenario(sc, backend=backend, checkpoint=tmp_path)
    assert [f.name for f in tmp_path.iterdir()] == ["tp2x2.kvckpt"]


def test_a_search_the_time_limit_stops_keeps_its_checkpoint_and_goes_on_from_it(tmp_path):
    sc = builtin(MEDIUM)
    fresh = check_scenario(sc, backend=PythonBackend())
    first = check_scenario(sc, Limits(max_seconds=0.3), backend=PythonBackend(), checkpoint=tmp_path,
                           checkpoint_every=3600)
    assert not first.complete and first.checkpoint["kept"] and first.checkpoint["written"] == 1
    assert any("is kept: run the check again" in n for n in first.notes)
    again = check_scenario(sc, backend=PythonBackend(), checkpoint=tmp_path)
    assert again.checkpoint["resumed_from"] is not None
    assert any(n.startswith("resumed from its checkpoint") for n in again.notes)
    assert outcome(again) == outcome(fresh)


def _json(path):
    return json.loads(Path(path).read_text())


def _comparable(doc):
    out = []
    for s in doc["scenarios"]:
        stats = {k: s["stats"][k] for k in ("states", "transitions", "depth", "quiescent_states")}
        rows = []
        for r in s["results"]:
            trace = None
            if r["trace"]:
                t = _json(r["trace"])
                trace = [st for st in t["states"]]
            rows.append((r["invariant"], r["verdict"], r["states"], r["depth"], trace))
        out.append((s["name"], s["complete"], s["reason"], stats, rows))
    return out


@pytest.mark.parametrize("name", [MEDIUM, pytest.param(BIG, marks=pytest.mark.thorough)])
def test_kill_9_after_the_first_checkpoint_then_resume_gives_a_fresh_runs_json(tmp_path, name):
    kvproof = [sys.executable, "-m", "kvproof", "check", name, "--backend", "python", "--json"]
    fresh = subprocess.run([*kvproof, "--traces", str(tmp_path / "t0")], capture_output=True, text=True,
                           timeout=300)
    folder = tmp_path / "ck"
    argv = [*kvproof, "--traces", str(tmp_path / "t1"), "--checkpoint", str(folder), "--checkpoint-every", "0.05"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    file = folder / f"{name}.kvckpt"
    deadline = time.monotonic() + 120
    while not file.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL and file.exists()  # killed part way, a checkpoint written
    resumed = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert fresh.returncode == resumed.returncode, resumed.stderr
    doc = json.loads(resumed.stdout)
    assert doc["scenarios"][0]["checkpoint"]["resumed_from"] is not None
    assert _comparable(doc) == _comparable(json.loads(fresh.stdout))
    assert list(folder.iterdir()) == []  # the finished search removed its checkpoint (and no temporary file is left)


def _checkpoint_of(monkeypatch, tmp_path, name=SMALL):
    """A checkpoint of ``name`` in ``tmp_path/ck`` (the search killed after its first one, as
    ``kvproof check NAME`` would search it)."""
    folder = tmp_path / "ck"
    with monkeypatch.context() as m:
        killed_after(m, lambda saved: True)
        with pytest.raises(Killed):
            check_scenario(builtin(name), backend=PythonBackend(), checkpoint=folder, checkpoint_every=1e-9)
    return folder, folder / f"{name}.kvckpt"


def _refused(capsys, tmp_path, folder, *more):
    traces = tmp_path / "traces"
    code = main(["check", SMALL, "--checkpoint", str(folder), "--traces", str(traces), *more])
    _, err = capsys.readouterr()
    assert code == 3 and err.count("\n") == 1 and err.startswith("kvproof: error:"), err
    assert not traces.exists()  # refused before any search
    return err


@pytest.mark.parametrize("spoil, message", [
    (lambda data: data[: len(data) // 2], "truncated"),
    (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "corrupted"),
    (lambda data: data[:40], "truncated"),
    (lambda data: b"PK\x03\x04" + data[4:], "does not start as one"),
    (lambda data: data + b"\0", "padded"),
])
def test_a_truncated_or_corrupted_checkpoint_is_refused_and_left_alone(monkeypatch, capsys, tmp_path, spoil,
                                                                        message):
    folder, file = _checkpoint_of(monkeypatch, tmp_path)
    bad = spoil(file.read_bytes())
    file.write_bytes(bad)
    err = _refused(capsys, tmp_path, folder)
    assert message in err and str(file) in err
    assert file.read_bytes() == bad and [f.name for f in folder.iterdir()] == [file.name]


def test_a_checkpoint_of_another_scenario_or_search_is_refused(monkeypatch, capsys, tmp_path):
    folder, file = _checkpoint_of(monkeypatch, tmp_path, "tp2x2")
    file.rename(folder / f"{SMALL}.kvckpt")
    assert "its scenario is 'tp2x2'" in _refused(capsys, tmp_path, folder)
    (folder / f"{SMALL}.kvckpt").unlink()
    folder, file = _checkpoint_of(monkeypatch, tmp_path)
    data = file.read_bytes()
    err = _refused(capsys, tmp_path, folder, "--max-states", "500")
    assert "max_states None (now 500)" in err
    err = _refused(capsys, tmp_path, folder, "--visited", "fingerprint")
    assert "visited 'exact' (now 'fingerprint')" in err
    assert file.read_bytes() == data
    code = main(["check", SMALL, "--checkpoint", str(folder), "--no-traces", "--quiet"])  # the same search: resumed
    assert code == 0 and list(folder.iterdir()) == []


def test_a_checkpoint_of_another_spec_or_kvproof_version_is_refused(monkeypatch, tmp_path):
    import kvproof

    sc = builtin(SMALL)
    saved = ck.Saved([b"\0"], [b"\0"], array("i", [-1]), array("i", [-1]),
                     dict(lo=0, n_states=1, depth=0, hit_at={}))
    ck.Checkpoint(tmp_path, sc.name, "spec-a", {}).save(saved)
    assert ck.Checkpoint(tmp_path, sc.name, "spec-a", {}).load().frontier == [b"\0"]
    with pytest.raises(ck.CheckpointError, match="compiles differently"):
        ck.Checkpoint(tmp_path, sc.name, "spec-b", {}).load()
    monkeypatch.setattr(kvproof, "__version__", "9.9.9")
    with pytest.raises(ck.CheckpointError, match="kvproof version"):
        ck.Checkpoint(tmp_path, sc.name, "spec-a", {}).validate()


def test_the_spec_fingerprint_tells_specs_apart():
    from kvproof.model.machine import Machine

    a, b = Machine(builtin(SMALL).build()), Machine(builtin("tp2x2").build())
    assert a.fingerprint == Machine(builtin(SMALL).build()).fingerprint != b.fingerprint


def test_the_default_backend_checkpoints_past_its_probe_and_removes_a_stale_checkpoint(monkeypatch, tmp_path):
    _native_or_skip()
    sc = builtin("tp2x2")  # no liveness claim, past the default's probe: the native backend searches it
    fresh = Checker(sc).check()
    with monkeypatch.context() as m:
        killed_after(m, lambda saved: saved.numbers["n_states"] >= 25_000)
        with pytest.raises(Killed):
            Checker(sc).with_checkpoint(tmp_path, 1e-9).check()
    report = Checker(sc).with_checkpoint(tmp_path, 3600).check()
    assert report.backend == "native" and report.checkpoint["resumed_from"]["n_states"] >= 25_000
    assert outcome(report) == outcome(fresh) and list(tmp_path.iterdir()) == []
    # a checkpoint left of a search that now ends within the probe is removed, not kept for later
    small = builtin(SMALL)
    with monkeypatch.context() as m:
        killed_after(m, lambda saved: True)
        with pytest.raises(Killed):
            check_scenario(small, backend=PythonBackend(), checkpoint=tmp_path, checkpoint_every=1e-9)
    assert (tmp_path / f"{SMALL}.kvckpt").exists()
    report = Checker(small).with_checkpoint(tmp_path).check()
    assert report.backend == "python" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("backend", [NativeBackend(2), WorkersBackend(2), RayBackend(2), AutoBackend(2)])
def test_a_backend_that_cannot_checkpoint_refuses(tmp_path, backend):
    with pytest.raises(ck.CheckpointError, match="cannot checkpoint its search"):
        check_scenario(builtin(SMALL), backend=backend, checkpoint=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_command_line_refuses_checkpoint_where_it_cannot_be_kept(capsys, tmp_path):
    for more, message in ((["--backend", "native", "--workers", "2"], "native backend with 2 workers cannot checkpoint"),
                          (["--workers", "2"], "with 2 workers cannot checkpoint"),
                          (["--engine", "bmc"], "use --engine explicit")):
        assert message in _refused(capsys, tmp_path, tmp_path / "ck", *more)
    (tmp_path / "file").write_text("")
    assert "not a folder" in _refused(capsys, tmp_path, tmp_path / "file")
    code = main(["check", SMALL, "--checkpoint-every", "1"])
    assert code == 3 and "needs --checkpoint" in capsys.readouterr().err


_DIE_WHILE_WRITING = """
import os, sys
from array import array
from kvproof.checker.explicit import checkpoint as ck
c = ck.Checkpoint(sys.argv[1], "s", "spec", {})
c.save(ck.Saved([b"old"], [b"old"], array("i", [-1]), array("i", [-1]), dict(lo=0, n_states=1, depth=0, hit_at={})))
def die(f, chunks):
    f.write(chunks[0])
    f.write(bytes(chunks[1])[:10])
    f.flush()
    os._exit(9)  # killed part way through writing the next checkpoint
ck._write = die
c.save(ck.Saved([b"new"], [b"new"], array("i", [-1]), array("i", [-1]), dict(lo=0, n_states=1, depth=0, hit_at={})))
"""


def test_a_kill_while_writing_leaves_the_previous_checkpoint_whole(tmp_path):
    p = subprocess.run([sys.executable, "-c", _DIE_WHILE_WRITING, str(tmp_path)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 9, p.stderr
    names = sorted(f.name for f in tmp_path.iterdir())
    assert names[-1] == "s.kvckpt" and len(names) == 2 and names[0].startswith(".tmp-s-")  # the dead write's
    c = ck.Checkpoint(tmp_path, "s", "spec", {})
    assert c.load().frontier == [b"old"]
    c.finish()
    assert list(tmp_path.iterdir()) == []  # the ended search removes its file and the dead writer's


def test_an_interrupted_write_in_process_leaves_no_temporary_file(monkeypatch, tmp_path):
    c = ck.Checkpoint(tmp_path, "s", "spec", {})
    c.save(ck.Saved([b"old"], [b"old"], array("i", [-1]), array("i", [-1]),
                    dict(lo=0, n_states=1, depth=0, hit_at={})))

    def interrupted(f, chunks):
        f.write(chunks[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(ck, "_write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        c.save(ck.Saved([b"new"], [b"new"], array("i", [-1]), array("i", [-1]),
                        dict(lo=0, n_states=1, depth=0, hit_at={})))
    assert [f.name for f in tmp_path.iterdir()] == ["s.kvckpt"]
    assert c.load().frontier == [b"old"]
