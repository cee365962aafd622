"""Fuzzing every input kvproof reads, through the command line's ``main()``, in-process.

Scenario TOML files, ITF traces, proof certificates, engine variant files and command lines:
valid files mutated (the catalogue's TOMLs, committed traces and certificates, the example
variants), so that cases get past the first parser, and plain garbage.  Every case must end
with an exit code in {0, 1, 2, 3, 4} - never a traceback, never ``SystemExit`` - and an exit 3
with exactly one line on stderr; no temporary file may be left behind.

The default run has a few hundred cases (a few seconds); the thorough tier
(``pytest --thorough -m thorough tests/test_fuzz.py -s``) runs at least 10,000 with a fixed seed
(``KVPROOF_FUZZ_SEED``, default 12) and prints how the cases ended; ``KVPROOF_FUZZ_SCALE``
multiplies its case counts.

Any search a case starts is kept tiny: ``check``/``report`` get ``--max-states 40``, ``bmc``
``--depth 2``, ``simulate`` five requests on two pages; ``prove`` only ever meets scenarios that
fail to load (a proof takes seconds).  Compiled machines are reused between cases with the same
protocol class and configuration (the compiler is deterministic, and what is fuzzed here is the
handling of input), so the thorough tier takes about a minute and a half of CPU.
"""

from __future__ import annotations

import functools
import io
import json
import os
import random
import re
import shutil
import time
import tomllib
import zlib
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from importlib import util as importlib_util
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from kvproof.checker.cli.commands import main
from kvproof.model.machine import Machine

ROOT = Path(__file__).resolve().parents[1]
SEED = int(os.environ.get("KVPROOF_FUZZ_SEED", "12"))
SCALE = float(os.environ.get("KVPROOF_FUZZ_SCALE", "1"))  # the thorough tier's case counts times this
EXIT_CODES = {0, 1, 2, 3, 4}

# cases per input kind: (default tier, thorough tier)
CASES = {"scenario": (70, 2500), "trace": (70, 2500), "certificate": (40, 1000), "variant": (40, 1000),
         "argv": (50, 3000)}
OUTCOMES: Counter = Counter()  # (tier, kind, exit code) -> cases
SECONDS: Counter = Counter()  # (tier, kind, exit code) -> seconds in main()

TINY = ('name = "tiny"\n[sizes]\ndecode_pages = 1\nprefill_pages = 1\ncontext_limit = 1\n'
        '[[requests]]\ntenant = "A"\npages = 1\n[engine]\nrelease_policy = "immediate"\n'
        '[expect]\nno_cross_tenant_read = "verified"\n')
TRACE_SEEDS = ["prefill-abort-unpropagated__requests_end", "prefill-abort-unpropagated__quiescent_holds_nothing",
               "abort-race__no_write_after_release", "sglang-0.5.23-deferral-off__no_write_after_release",
               "ack-before-register__requests_end"]
CERT_SEED = "prefill-abort-unpropagated"  # the smallest committed certificate
CATALOGUE_DEFAULT = ["01-incident.toml", "18-v0.5.22.toml", "26-prefill-abort-propagated.toml",
                     "39-sglang-0.5.23-mooncake.toml"]
TINY_SCENARIO = ('{"name": "%s", "sizes": {"decode_pages": 1, "prefill_pages": 1, "context_limit": 1}, '
                 '"requests": [{"tenant": "A", "pages": 1}], "engine": {"release_policy": "drain_ack"}}')

# words the mutations draw from: names that mean something to the parsers, and edge values
WORDS = ["verified", "violated", "reached", "immediate", "drain_ack", "none", "unbounded", "A", "B", "R0", "R1",
         "p0", "q0", "owner", "no_cross_tenant_read", "requests_end", "decode_abort", "decode_commit", "init",
         "kvproof-trace/1", "counterexample", "lasso", "witness", "sglang-0.5.23",
         "engine.py:E", ":X", ".x:Y", "os:system", "", " ", "\x00", "a" * 300, "ä", "\n", "#bigint"]
INTS = [-(2**64), -1, 0, 1, 2, 3, 4, 7, 16, 17, 64, 65, 2**31, 2**64]


# -- running one case ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> dict[str, bytes]:
    """The files every case may name, copied into its folder: seed traces, a certificate, a
    scenario, variant files, a text file."""
    files = {"tiny.toml": TINY.encode(), "notes.txt": b"not a kvproof file\n"}
    for i, name in enumerate(TRACE_SEEDS):
        files[f"t{i}.itf.json"] = (ROOT / "traces" / f"{name}.itf.json").read_bytes()
    files["c0.smt2"] = _certificate_seed()
    for i, text in enumerate(_variant_seeds()):
        files[f"v{i}.py"] = text.encode()
    return files


@pytest.fixture(scope="module", autouse=True)
def reuse_compiled_machines():
    """Compile each (protocol class, configuration, claims) once for the whole module."""
    cache: dict = {}
    compile_ = Machine.__post_init__

    def post_init(self):
        cfg = getattr(self.spec, "cfg", None)
        key = (type(self.spec), cfg, tuple(c.name for c in self.claims)) if cfg is not None else None
        if key is None:
            return compile_(self)
        hit = cache.get(key)
        if hit is None:
            compile_(self)
            if len(cache) > 64:
                cache.pop(next(iter(cache)))
            cache[key] = {k: v for k, v in vars(self).items() if k != "spec"}
        else:
            vars(self).update({k: (list(v) if isinstance(v, list) else v) for k, v in hit.items()})

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Machine, "__post_init__", post_init)
        yield


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Path:
    """The folder the cases run in (emptied after each, but for ``out/``)."""
    case = tmp_path_factory.mktemp("fuzz")
    (case / "out").mkdir()
    return case


def run_case(case: Path, pool: dict[str, bytes], tier: str, kind: str, argv: list[str],
             files: dict[str, bytes] | None = None) -> int:
    """Run ``main(argv)`` in ``case`` holding ``files`` and the pool files ``argv`` names (a
    copy each: a case may overwrite them); check how it ended; empty the folder again."""
    for name, data in {**{a: pool[a] for a in argv if a in pool}, **(files or {})}.items():
        (case / name).write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(case)
    start = time.perf_counter()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(cwd)
    SECONDS[tier, kind, code] += time.perf_counter() - start
    text = err.getvalue()
    assert code in EXIT_CODES, (argv, code, text)
    if code == 3:
        line = text
        if text.startswith("usage: kvproof "):  # no command given: the usage first (as argparse and git do), then the one line
            line = text.splitlines(keepends=True)[-1]
            assert line == "kvproof: error: no command given (kvproof --help says what each does)\n", (argv, text)
        assert line.startswith("kvproof: error: ") and line.endswith("\n") and line.count("\n") == 1, (argv, text)
    assert "Traceback" not in text, (argv, text)
    left = [os.path.join(d, f) for d, _, fs in os.walk(case) for f in fs if f.startswith((".tmp-", ".kvproof-probe-"))]
    assert not left, (argv, left)
    for entry in os.scandir(case):  # unlink is cheap, rmdir is not (on ext4 here): keep out/
        if entry.is_dir(follow_symlinks=False):
            if entry.name == "out":
                for inner in os.scandir(entry.path):
                    (shutil.rmtree if inner.is_dir(follow_symlinks=False) else os.unlink)(inner.path)
            else:
                shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    OUTCOMES[tier, kind, code] += 1
    return code


# -- mutations (a hypothesis-drawn random.Random does the fine edits: one draw, not hundreds) --------
_CHARS = [(0x20, 0x7e), (0x00, 0x1f), (0xa0, 0xff), (0x370, 0x3ff), (0x4e00, 0x4e80), (0x1f600, 0x1f64f)]


def rand_text(rnd: random.Random, n: int = 12) -> str:
    """A word kvproof knows, or a few characters from several scripts and the control range."""
    if rnd.random() < 0.5:
        return rnd.choice(WORDS)
    out = []
    for _ in range(rnd.randint(0, n)):
        lo, hi = rnd.choice(_CHARS)
        out.append(chr(rnd.randint(lo, hi)))
    return "".join(out)


def rand_value(rnd: random.Random, json_ok: bool, depth: int = 0):
    """A random value of the file's data model (JSON, or TOML: no null)."""
    kind = rnd.choice(["int", "int", "bool", "text", "text", "float", "list", "dict"] +
                      (["null", "bigint"] if json_ok else []))
    if kind in ("list", "dict") and depth < 2:
        items = [rand_value(rnd, json_ok, depth + 1) for _ in range(rnd.randint(0, 3))]
        return items if kind == "list" else {rand_text(rnd): v for v in items}
    if kind == "int" or kind in ("list", "dict"):
        return rnd.choice(INTS)
    if kind == "bool":
        return rnd.random() < 0.5
    if kind == "float":
        return rnd.choice([0.5, -1.0, 1e308, 3.0])
    if kind == "null":
        return None
    if kind == "bigint":
        return {"#bigint": str(rnd.choice(INTS))}
    return rand_text(rnd)


def mutate_tree(rnd: random.Random, tree, json_ok: bool):
    """The tree with one node replaced, removed, duplicated, added to, or given another type."""
    path, node = [], tree
    while isinstance(node, (dict, list)) and node and rnd.random() < 0.8:
        k = rnd.choice(list(node) if isinstance(node, dict) else range(len(node)))
        path.append((node, k))
        node = node[k]
    op = rnd.choice(["replace", "delete", "duplicate", "add", "type"])
    if not path:
        return rand_value(rnd, json_ok) if op == "replace" else tree
    parent, k = path[-1]
    if op == "replace":
        parent[k] = rand_value(rnd, json_ok)
    elif op == "delete":
        del parent[k]
    elif op == "duplicate" and isinstance(parent, list):
        parent.insert(k, parent[k])
    elif op == "add" and isinstance(parent, dict):
        parent[rand_text(rnd)] = rand_value(rnd, json_ok)
    else:  # the same content as another type
        parent[k] = rnd.choice([str(node), [node], {"v": node}])
    return tree


def mutate_text(rnd: random.Random, text: str, numbers: bool = True) -> str:
    """``text`` after one to three line- or character-level edits."""
    for _ in range(rnd.randint(1, 3)):
        lines = text.split("\n")
        i = rnd.randrange(len(lines))
        op = rnd.choice(["delete_line", "duplicate_line", "swap_lines", "replace_line", "insert", "truncate", "flip",
                         "replace_string"] + (["replace_number"] * 2 if numbers else []))
        if op == "delete_line":
            del lines[i]
        elif op == "duplicate_line":
            lines.insert(i, lines[i])
        elif op == "swap_lines":
            j = rnd.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "replace_line":
            lines[i] = rand_text(rnd, 30) if rnd.random() < 0.5 else rnd.choice(lines)
        elif op == "replace_number":
            nums = list(re.finditer(r"-?\d+", lines[i]))
            if nums:
                m = rnd.choice(nums)
                lines[i] = lines[i][:m.start()] + str(rnd.choice(INTS)) + lines[i][m.end():]
        elif op == "replace_string":
            strs = list(re.finditer(r'"[^"\n]*"', lines[i]))
            if strs:
                m = rnd.choice(strs)
                lines[i] = lines[i][:m.start()] + json.dumps(rand_text(rnd)) + lines[i][m.end():]
        text = "\n".join(lines)
        pos = rnd.randint(0, len(text))
        if op == "insert":
            text = text[:pos] + rand_text(rnd, 8) + text[pos:]
        elif op == "truncate":
            text = text[:pos]
        elif op == "flip" and text:
            pos = min(pos, len(text) - 1)
            text = text[:pos] + rand_text(rnd, 1)[:1] + text[pos + 1:]
    return text


def garbage(rnd: random.Random) -> bytes:
    """Bytes no parser wants: binary, text, or nesting deeper than any recursion limit."""
    kind = rnd.choice(["binary", "text", "deep_json", "deep_toml", "empty"])
    if kind == "binary":
        return rnd.randbytes(rnd.randint(1, 64))
    if kind == "text":
        return _encode(rand_text(rnd, 64))
    depth = rnd.choice([10, 900, 5_000, 100_000])
    if kind == "deep_json":
        return ("[" * depth + "]" * depth).encode()
    if kind == "deep_toml":
        return ("a = " + "[" * depth + "]" * depth + "\n").encode()
    return b""


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


RANDOMS = st.randoms(use_true_random=True)


# -- seeds -------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _catalogue(tier: str) -> list[str]:
    files = sorted((ROOT / "spec" / "scenarios").glob("*.toml"))
    if tier == "default":
        files = [f for f in files if f.name in CATALOGUE_DEFAULT]
    return [f.read_text() for f in files] + [TINY, (ROOT / "examples" / "variant" / "early_release.toml").read_text()]


def _certificate_seed() -> bytes:
    """The smallest committed certificate, its scenario's title and description made short (an
    edit in their long text would leave a certificate that reads, and costs a solver run)."""
    lines = (ROOT / "traces" / "proofs" / f"{CERT_SEED}.smt2").read_text().split("\n")
    i = _scenario_line(lines)
    stored = json.loads(lines[i].split(": ", 1)[1])
    stored.update(title="t", description="")
    lines[i] = f"; scenario: {json.dumps(stored, sort_keys=True)}"
    return "\n".join(lines).encode()


def _scenario_line(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith("; scenario: "))


@functools.lru_cache(maxsize=None)
def _variant_seeds() -> list[str]:
    """The example variants with a one-request SCENARIO (cheap to compile), and one that calls
    ``super()`` from an override."""
    ioc = (ROOT / "examples" / "variant" / "in_order_completion.py").read_text()
    ioc = ioc[:ioc.index("SCENARIO = {")] + "SCENARIO = " + TINY_SCENARIO % "ioc" + "\n"
    early = (ROOT / "examples" / "variant" / "early_release.py").read_text() + "\nSCENARIO = " + \
        TINY_SCENARIO % "early" + "\n"
    sup = ("from kvproof.spec.sglang.protocol import PdProtocol\n\n\nclass Undo(PdProtocol):\n"
           "    def decode_abort(self, s, n, r):\n        super().decode_abort(s, n, r)\n"
           "        n.outcome[r] = s.outcome[r]\n\n\nSCENARIO = " + TINY_SCENARIO % "undo" + "\n")
    return [ioc, early, sup]


# -- the inputs ------------------------------------------------------------------------------------
# Each case is drawn as (how the input is made, which command reads it, a random.Random for the
# fine edits): hypothesis shrinks the first two; the third is one draw however many edits it makes.
SCENARIO_HOW = ["text", "text", "tree", "tree", "garbage"]
SCENARIO_COMMANDS = ["check", "check", "check", "check", "report", "simulate"]


def _scenario_case(rnd, how, command, case, pool, tier):
    seeds = _catalogue(tier)
    source = rnd.choice(seeds)
    if how == "text":
        # numbers change configurations (each a new compile): only in the small seeds
        raw = _encode(mutate_text(rnd, source, numbers=len(source) < 400))
    elif how == "tree":
        tree = mutate_tree(rnd, tomllib.loads(rnd.choice([TINY, TINY, source])), json_ok=False)
        raw = tomli_w.dumps(tree).encode() if isinstance(tree, dict) else _encode(str(tree))
    else:
        raw = garbage(rnd)
    if command == "check":
        # the verdict table takes 40 ms to draw: most checks print JSON or nothing
        argv = ["check", "s.toml", "--max-states", "40", "--no-traces",
                *rnd.choice([["--quiet"], ["--quiet"], ["--quiet"], ["--json"], []])]
        extras = [["--invariant", "no_cross_tenant_read"], ["--invariant", "requests_end"], ["--symmetry"],
                  ["--visited", "fingerprint"], ["--max-depth", "3"], ["--write-expected", "e.toml"],
                  ["--junit", "j.xml"], ["--sarif", "s.sarif"], ["--html", "h.html"], ["--variant", "v1.py"]]
        argv += [a for e in rnd.sample(extras, rnd.choice([0, 0, 1, 2, 3])) for a in e]
    elif command == "report":
        argv = ["report", "s.toml", "-o", "r.html", "--max-states", "40", "--quiet"]
    else:
        argv = ["simulate", "s.toml", "--requests", "5", "--pages", "2", "--slots", "2", "--no-traces"]
    run_case(case, pool, tier, "scenario", argv, {"s.toml": raw})


@functools.lru_cache(maxsize=None)
def _json_of(text: str) -> str:
    return json.dumps(json.loads(text))  # compact: mutated copies are parsed from this


TRACE_HOW = ["tree", "tree", "tree", "text", "garbage"]
# rendering a whole trace takes tens of milliseconds: most shows render one step, or JSON
TRACE_COMMANDS = ["show", "show", "show", "replay", "replay", "diff", "conform", "show_variant"]
SHOW_OPTIONS = [[], ["--format", "json"], ["--format", "json", "--step", "2"], ["--format", "mermaid"],
                ["--step", "1"], ["--step", "1"], ["--step", "2"], ["--step", "99"], ["--only", "p0", "--step", "1"],
                ["--only", "R1", "owner", "--format", "json"], ["--only", "zz"]]


def _trace_case(rnd, how, command, case, pool, tier):
    seed_name = f"t{rnd.randrange(len(TRACE_SEEDS))}.itf.json"
    source = pool[seed_name].decode()
    if how == "tree":
        raw = json.dumps(mutate_tree(rnd, json.loads(_json_of(source)), json_ok=True), default=str).encode()
    elif how == "text":
        raw = _encode(mutate_text(rnd, source))
    else:
        raw = garbage(rnd)
    if command == "show":
        argv = ["show", "x.itf.json", *rnd.choice(SHOW_OPTIONS)]
    elif command == "replay":
        argv = ["replay", "x.itf.json"]
    elif command == "diff":
        argv = ["diff", "x.itf.json", rnd.choice(["x.itf.json", seed_name, "t0.itf.json"])]
    elif command == "conform" and importlib_util.find_spec("sglang") is None:  # reads, then no engine: exit 3
        argv = ["conform", "x.itf.json"]
    else:
        argv = ["show", "--variant", "v0.py", "x.itf.json", "--step", "1"]
    run_case(case, pool, tier, "trace", argv, {"x.itf.json": raw})


# the solver runs on every certificate that still reads (a third of a second): most edits go
# where reading is decided - the first line, the stored scenario, the obligation markers
CERTIFICATE_HOW = ["magic", "magic", "scenario_text", "scenario_text", "scenario_text", "scenario_tree", "markers",
                   "markers", "garbage", "garbage", "anywhere"]


def mutate_line(rnd: random.Random, line: str) -> str:
    """``line`` with characters inserted, removed or replaced somewhere (never unchanged)."""
    pos = rnd.randrange(len(line) + 1)
    op = rnd.choice(["insert", "delete", "replace", "truncate"])
    if op == "insert" or not line:
        return line[:pos] + (rand_text(rnd, 6) or "{") + line[pos:]
    pos = min(pos, len(line) - 1)
    if op == "delete":
        return line[:pos] + line[pos + rnd.randint(1, 8):]
    if op == "replace":
        new = rand_text(rnd, 1)[:1] or "}"
        return line[:pos] + (new if new != line[pos] else "\x01") + line[pos + 1:]
    return line[:pos]


def _certificate_case(rnd, how, command, case, pool, tier):
    lines = pool["c0.smt2"].decode().split("\n")
    out = list(lines)
    if how == "magic":
        out[0] = mutate_line(rnd, out[0])
    elif how == "scenario_text":
        i = _scenario_line(lines)
        out[i] = mutate_line(rnd, out[i])
    elif how == "scenario_tree":
        i = _scenario_line(lines)
        stored = mutate_tree(rnd, json.loads(lines[i].split(": ", 1)[1]), json_ok=True)
        out[i] = f"; scenario: {json.dumps(stored, default=str)}"
    elif how == "markers":
        marks = [i for i, line in enumerate(lines) if line.startswith(("; obligation", "(assert"))]
        i = rnd.choice(marks)
        edit = rnd.choice(["delete", "garbage"])
        if edit == "delete":
            del out[i]
        elif edit == "duplicate":
            out.insert(i, out[i])
        else:
            out[i] = rand_text(rnd, 20)
    elif how == "anywhere":
        out = mutate_text(rnd, "\n".join(lines)).split("\n")
    raw = garbage(rnd) if how == "garbage" else _encode("\n".join(out))
    run_case(case, pool, tier, "certificate", ["certify", "x.smt2"], {"x.smt2": raw})


_PY_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|[-+*/<>=!]=?|[()\[\],.:]")
_PY_WORDS = ["s", "n", "r", "o", "pr", "self", "super", "PdProtocol", "SCENARIO", "None", "True", "1", "0", "-1",
             "eq", "ne", "ge", "ops", "require", "D_HELD", "WR_FLIGHT", "decode_abort", "release_decode", "(", ")",
             ":", ",", "[", "]", "return", "not", "and", "if", "else", "for", "in", "lambda"]
VARIANT_HOW = ["token", "token", "token", "lines", "garbage"]
VARIANT_COMMANDS = ["check", "check_json", "show"]


def _variant_case(rnd, how, command, case, pool, tier):
    source = pool[f"v{rnd.randrange(len(_variant_seeds()))}.py"].decode()
    if how == "token":
        for _ in range(rnd.randint(1, 2)):
            tokens = list(_PY_TOKEN.finditer(source))
            m = rnd.choice(tokens)
            word = rnd.choice(_PY_WORDS) if rnd.random() < 0.5 else rnd.choice(tokens).group()
            source = source[:m.start()] + word + source[m.end():]
        raw = _encode(source)
    elif how == "lines":
        raw = _encode(mutate_text(rnd, source))
    else:
        raw = garbage(rnd)
    name = f"w{zlib.crc32(raw):08x}.py"  # a new file (and module) per content
    argv = {"check": ["check", "--variant", name, "--max-states", "30", "--no-traces", "--quiet"],
            "check_json": ["check", "--variant", name, "--max-states", "30", "--no-traces", "--json"],
            "show": ["show", "--variant", name, "t1.itf.json", "--step", "1"]}[command]
    run_case(case, pool, tier, "variant", argv, {name: raw})


COMMANDS = ["list", "check", "check", "report", "show", "diff", "replay", "simulate", "conform", "completion",
            "prove", "certify", "frobnicate", "", "-h", "--help"]
FLAGS = ["--claims", "--variant", "--invariant", "--max-states", "--max-seconds", "--max-depth", "--json", "--traces",
         "--no-traces", "--write-expected", "--quiet", "--junit", "--sarif", "--html", "--visited", "--symmetry",
         "--workers", "--backend", "--ray-address", "--engine", "--depth", "-o", "--output", "--step", "--format",
         "--only", "--requests", "--pages", "--slots", "--seed", "--fault-weight", "--trace-limit", "--random",
         "--refute-depth", "--lemma-seconds", "--induction-seconds", "--template-arity", "--max-k",
         "--certificates", "--no-certificates", "--show-invariant", "--help", "--max-state", "--jsn", "-x", "--",
         "--=", "---"]
VALUES = ["0", "1", "2", "3", "-1", "40", "1e9", "nan", "inf", "-0", "0.01", "x", "", "\x00", "a" * 300, " ", "-",
          "tiny.toml", "abort-race", "prefill-abort-unpropagated", "nope", "t0.itf.json", "t2.itf.json", "c0.smt2",
          "v0.py", "v1.py", "notes.txt", "out", "out/o.html", "/proc/kvproof/x", "traces", "sglang-0.5.23-*", "*",
          "no_cross_tenant_read", "bash", "zsh", "json", "mermaid", "text", "fingerprint", "exact", "bmc", "both",
          "explicit", "process", "ray", "p0", "R1", "owner", "sglang==0.5.23", "..", "."]
TOKENS = FLAGS + VALUES
ARGV_HOW = ["tokens", "tokens", "tokens", "words"]


def _argv_case(rnd, how, command, case, pool, tier):
    rest = [rnd.choice(TOKENS) if how == "tokens" or rnd.random() < 0.5 else rand_text(rnd, 6)
            for _ in range(rnd.randint(0, 7))]
    # keep every search tiny; never a proof (prove only meets a scenario that does not exist)
    if command in ("check", "report"):
        rest = ["tiny.toml", *rest, "--max-states", "40"]
        if command == "check" and "--engine" in rest:
            rest += ["--depth", "2"]
        if "--json" not in rest and rnd.random() < 0.7:
            rest.append("--quiet")  # the table costs more than the search
    elif command == "simulate":
        rest = [*rest, "--requests", "5", "--pages", "2", "--slots", "2"]
    elif command == "prove":
        rest = ["no-such-scenario", *[t for t in rest if t != "--theorems"]]
    run_case(case, pool, tier, "argv", [command, *rest] if command else rest)


KINDS = {"scenario": (_scenario_case, SCENARIO_HOW, SCENARIO_COMMANDS),
         "trace": (_trace_case, TRACE_HOW, TRACE_COMMANDS),
         "certificate": (_certificate_case, CERTIFICATE_HOW, ["certify"]),
         "variant": (_variant_case, VARIANT_HOW, VARIANT_COMMANDS),
         "argv": (_argv_case, ARGV_HOW, COMMANDS)}
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture,
           HealthCheck.filter_too_much]


class _Quiet:
    """A fixture value whose repr is short (hypothesis prints the arguments of a failing case)."""

    def __init__(self, name: str, value):
        self.name, self.value = name, value

    def __repr__(self) -> str:
        return self.name


def _fuzz(kind: str, tier: str):
    n = CASES[kind][0] if tier == "default" else round(CASES[kind][1] * SCALE)
    make, how, commands = KINDS[kind]

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=_HEALTH, print_blob=True)
    @given(how=st.sampled_from(how), command=st.sampled_from(commands), rnd=RANDOMS)
    def cases(sandbox, pool, how, command, rnd):
        make(rnd, how, command, sandbox.value, pool.value, tier)

    run = cases if tier == "default" else seed(SEED)(cases)
    return lambda sandbox, pool: run(_Quiet("sandbox", sandbox), _Quiet("pool", pool))


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # a mutated variant file, compiled
@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.slow) if k == "argv" else k for k in KINDS])  # argv: ~9 s
def test_fuzz_every_input(kind, sandbox, pool):
    """A few hundred cases in all (each kind's share of CASES), new ones every run."""
    before = sum(v for (t, k, _), v in OUTCOMES.items() if t == "default" and k == kind)
    _fuzz(kind, "default")(sandbox, pool)
    assert sum(v for (t, k, _), v in OUTCOMES.items() if t == "default" and k == kind) - before >= CASES[kind][0]


@pytest.mark.thorough
@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@pytest.mark.parametrize("kind", list(KINDS))
def test_fuzz_every_input_thoroughly(kind, sandbox, pool):
    """At least 10,000 cases in all, from a fixed seed; prints how they ended."""
    _fuzz(kind, "slow")(sandbox, pool)
    done = {code: v for (t, k, code), v in OUTCOMES.items() if t == "slow" and k == kind}
    assert sum(done.values()) >= round(CASES[kind][1] * SCALE)
    seconds = sum(v for (t, k, _), v in SECONDS.items() if t == "slow" and k == kind)
    print(f"\nfuzz {kind}: {sum(done.values())} cases, exit codes {dict(sorted(done.items()))}, "
          f"{seconds:.1f} s in main()")
