"""The SPIN benchmark model, ``bench/kvpages.py``, against ``kvpages.pml``'s header (issue 17):
the named variants' verdicts and the reference reachable-state counts, on the Python engine and
on the native backend; and the protocol runs through ``kvproof check`` once registered."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from kvproof.checker.cli import main
from kvproof.checker.explicit.search import explore
from kvproof.model.machine import Machine
from kvproof.model.registry import register, unregister

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load():
    spec = importlib.util.spec_from_file_location("kvpages", BENCH / "kvpages.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kvpages", mod)
    spec.loader.exec_module(mod)
    return mod


kv = _load()

# States at the header's default sizes (N=3 D=3), every variant explored to the end (the search
# does not stop at the first violation); for the variants that hold SPIN 6.5.2 stores the same
# number (`spin -a` + `pan`: 1,830, 16,391, 67,412).
DEFAULT_STATES = {"adm_bug": 7_668, "adm_fix": 1_830, "abort_race": 22_799, "fix_ack": 16_391,
                  "fix_timeout": 133_969, "bounded": 67_412, "bounded_short": 84_726}


def machine(backend, cfg):
    """A compiled model of ``cfg`` for ``backend`` (``python`` or ``native``)."""
    spec = kv.KvPages(cfg)
    if backend == "python":
        return Machine(spec)
    from kvproof.checker.explicit.native import NativeMachine, NativeUnavailable, c_compiler
    if c_compiler() is None:
        pytest.skip("no C compiler")
    try:
        return NativeMachine(spec)
    except NativeUnavailable as e:  # pragma: no cover - depends on the machine
        pytest.skip(str(e))


def verdicts(m, e):
    """``{claim: 'violated' | 'holds'}`` of a finished search."""
    return {c.name: ("violated" if i in e.hit_at else "holds") for i, c in enumerate(m.claims)}


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("name", list(kv.VARIANTS))
def test_named_variants_get_the_headers_verdicts(backend, name):
    m = machine(backend, kv.variant(name))
    e = explore(m, visited="exact")
    assert e.complete and e.stats.states == DEFAULT_STATES[name]
    got = verdicts(m, e)
    # every violation of the header is a read of another request's (or nobody's) data
    want = kv.VARIANTS[name][1]
    assert got == {"decode_reads_only_own_data": want, "pages_owned_once": "holds"}


@pytest.mark.slow  # 168,288 states on the Python engine: about 2 s
@pytest.mark.parametrize("backend,visited", [("python", "exact"), ("native", "exact"), ("native", "fingerprint")])
@pytest.mark.parametrize("name", ["fix_ack", "bounded"])
def test_reference_counts_at_n3_d4(backend, name, visited):
    m = machine(backend, kv.variant(name, N=3, D=4))
    e = explore(m, visited=visited)
    assert e.complete and e.stats.states == kv.REFERENCE[(name, 3, 4)]
    assert not e.hit_at


def test_the_sequential_and_weak_read_options():
    # SEQ=1 orders the arrivals: 15,146 states, as SPIN stores; PROP=1 flags only reads of
    # another request's data, so adm_bug's shortest counterexample grows from 5 steps to 13
    assert explore(Machine(kv.KvPages(kv.variant("fix_ack", SEQ=1)))).stats.states == 15_146
    lengths = []
    for prop in (0, 1):
        e = explore(Machine(kv.KvPages(kv.variant("adm_bug", PROP=prop))))
        lengths.append(len(e.path(e.hit_at[0])))
    assert lengths == [5, 13]


@pytest.fixture
def registered():
    register(kv.KVPAGES)
    yield
    unregister("kvpages")


def test_check_runs_it_once_registered(registered, tmp_path, capsys):
    toml = tmp_path / "adm.toml"
    toml.write_text('name = "kv-adm-bug"\ntitle = "placeholder admitted"\nprotocol = "kvpages"\n'
                    '[params]\nADM = 1\nOVER = 1\n[expect]\ndecode_reads_only_own_data = "violated"\n'
                    'pages_owned_once = "verified"\n')
    for backend in ([], ["--backend", "native"]):
        code = main(["check", str(toml), "--no-traces", "--json", *backend])
        out, err = capsys.readouterr()
        assert code == 0, err
        sc = json.loads(out)["scenarios"][0]
        assert sc["stats"]["states"] == DEFAULT_STATES["adm_bug"]
        assert [r["verdict"] for r in sc["results"]] == ["violated", "verified"]
    toml.write_text('name = "kv-bad"\ntitle = "bad"\nprotocol = "kvpages"\n[params]\nABORT = 7\n')
    code = main(["check", str(toml), "--no-traces"])
    captured = capsys.readouterr()
    assert code == 3 and "Traceback" not in captured.err + captured.out


def _bench_script():
    spec = importlib.util.spec_from_file_location("bench_spin", BENCH / "bench_spin.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_benchmark_fails_loudly_when_the_counts_disagree(monkeypatch, capsys):
    bench = _bench_script()
    counts = iter([35_717, 35_716])  # the second engine stores one state fewer
    monkeypatch.setattr(bench, "kvproof_once", lambda *a: {"states": next(counts), "compile": 0.1,
                                                           "search": 1.0, "rss": 2**20})
    code = bench.main(["--sizes", "3x4", "--repeat", "1", "--no-spin", "--engines", "python-exact,native-exact"])
    captured = capsys.readouterr()
    assert code == 1 and "THE STATE COUNTS DISAGREE at N=3 D=4" in captured.err


def test_the_benchmark_says_how_to_get_spin_and_runs_without_it(monkeypatch, capsys):
    from kvproof.checker.explicit.native import c_compiler
    if c_compiler() is None:
        pytest.skip("no C compiler")
    bench = _bench_script()
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    monkeypatch.setattr(bench, "spin_once", lambda *a: pytest.fail("SPIN run without spin"))
    code = bench.main(["--sizes", "3x4", "--repeat", "1", "--engines", "spin-dfs,native-exact"])
    out = capsys.readouterr().out
    assert code == 0 and "apt-get install spin" in out
    assert "| native-exact | 35,717 |" in out and "spin-dfs |" not in out


def test_the_benchmark_says_whether_the_native_target_is_met():
    """The target line reads the medians' ratio to SPIN DFS's search CPU: met at or under 0.3x
    past 6 M states, missed (by how much) over it, and not judged under 6 M states."""
    bench = _bench_script()
    runs = {"spin-dfs": [{"search": s} for s in (10.0, 12.0, 30.0)],
            "native-exact": [{"search": s} for s in (4.0, 4.2, 1.0)],
            "native-fingerprint": [{"search": s} for s in (3.0, 3.6, 9.0)]}
    share = bench.ratios(runs)
    assert share == pytest.approx({"native-exact": 4.0 / 12.0, "native-fingerprint": 3.6 / 12.0})
    assert "MET, 0.30x" in bench.verdict(6_192_120, share)
    runs["native-fingerprint"][1]["search"] = 4.2
    assert "MISSED, 0.35x (17% over)" in bench.verdict(6_192_120, bench.ratios(runs))
    assert "under 6,000,000 states" in bench.verdict(1_549_016, share)
    assert "not measured" in bench.verdict(6_192_120, bench.ratios({"native-exact": runs["native-exact"]}))
