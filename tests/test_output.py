"""What the command line prints into a pipe or a CI log: plain aligned columns with every cell
in full at any ``COLUMNS``, a compact row per scenario, trace files in one line."""

import json

from kvproof.checker.cli.commands import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _verdicts(capsys, *names):
    code, out, _ = run(capsys, "check", *names, "--no-traces", "--json")
    assert code == 0
    return json.loads(out)["scenarios"]


def test_check_piped_at_80_columns_cuts_no_cell(capsys, monkeypatch):
    """``kvproof check … | cat`` with ``COLUMNS=80``: one scenario's claim rows are wider than 80
    columns and are printed whole (each row's cells are the ``--json`` document's values, in
    full); several scenarios get a row each, whole too.  Rich's own table cut these rows to
    ``violat…`` and dropped the state and depth columns."""
    names = ("vllm-pull-ttl-expiry", "abort-race")
    doc = {s["name"]: s for s in _verdicts(capsys, *names)}
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "check", names[0], "--no-traces")  # capsys: stdout is not a terminal
    assert code == 0 and "…" not in out and "\x1b[" not in out
    rows = out.splitlines()[2:2 + len(doc[names[0]]["results"])]
    assert max(map(len, rows)) > 80  # the test would not notice a cut otherwise
    for n, (row, want) in enumerate(zip(rows, doc[names[0]]["results"])):
        assert row.split()[:-1] == [names[0]] * (n == 0) + [
            want["invariant"], want["expected"], want["verdict"], f"{want['states']:,}", str(want["depth"])]
    code, out, _ = run(capsys, "check", *names, "--no-traces")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["scenario", "claims", "found", "states", "depth", "seconds"]
    for line, name in zip(lines[2:4], names):
        s = doc[name]
        assert line.split()[:6] == [name, str(len(s["results"])), "as", "expected", f"{s['stats']['states']:,}",
                                    str(s["stats"]["depth"])]
    assert lines[4].startswith("kvproof check: 2 scenarios") and len(lines) == 5


def test_one_trace_is_named_and_many_are_counted(capsys, monkeypatch, tmp_path):
    """A run that writes one trace names it (``kvproof show`` takes that path); one that writes
    several says how many and where, in one line; ``--verbose`` lists them."""
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "check", "incident", "--invariant", "no_cross_tenant_read")
    assert code == 0 and "1 trace written: traces/incident__no_cross_tenant_read.itf.json" in out.splitlines()
    code, out, _ = run(capsys, "check", "incident", "abort-race")
    written = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert code == 0 and f"{len(written)} traces written to traces/" in out.splitlines()
    assert not any(name in out for name in written)
    code, out, _ = run(capsys, "check", "incident", "abort-race", "--verbose")
    assert all(f"  traces/{name}" in out.splitlines() for name in written)


def test_a_mistyped_option_gets_a_suggestion_and_a_bare_kvproof_its_usage(capsys):
    """``--max-staets`` is refused in one line naming the option meant (as a misspelt command
    or scenario name is), exit 3; a bare ``kvproof`` is a usage error: the usage on stderr, then
    one line, exit 3, nothing on stdout."""
    code, out, err = run(capsys, "check", "incident", "--max-staets", "3")
    assert code == 3 and not out
    assert err == "kvproof: error: kvproof check: unrecognized argument: --max-staets; did you mean --max-states?\n"
    code, _, err = run(capsys, "prove", "incident", "--no-such-thing")
    assert code == 3 and err.endswith("kvproof prove: unrecognized argument: --no-such-thing\n")  # nothing close
    code, out, err = run(capsys)
    assert code == 3 and not out and err.startswith("usage: kvproof ")
    assert err.splitlines()[-1] == "kvproof: error: no command given (kvproof --help says what each does)"
