"""Scenario files: the catalogue, validation errors in one line, user variants."""

import textwrap

import pytest

from kvproof.model.registry import trust_variant
from kvproof.model.scenario import ScenarioError, builtin, builtin_names, builtins, load_scenario, parse_scenario

GOOD = {
    "name": "mine",
    "sizes": {"decode_pages": 1, "prefill_pages": 1, "context_limit": 1},
    "requests": [{"tenant": "A", "pages": 1}],
}


def test_the_catalogue_has_every_required_scenario():
    names = builtin_names()
    for required in ["incident", "pr-36988", "pr-38935", "abort-race", "pr-35049-drain-ack",
                     "pr-35049-timeout-unbounded", "timeout-bounded-latency", "receipt-ack",
                     "failure-before-pr-41404", "pr-41404", "source-reuse", "source-held",
                     "checksum-supported", "checksum-unsupported", "v0.5.22"]:
        assert required in names
    assert len(names) == len(set(names))


def test_every_builtin_lists_every_invariant_and_at_least_one_witness():
    for sc in builtins():
        spec = sc.build()
        invariants = {c.name for c in spec.claims if c.kind == "invariant"}
        assert invariants <= set(sc.expect), sc.name
        assert any(c.kind == "witness" and c.name in sc.expect for c in spec.claims), sc.name


def test_v0_5_22_expects_every_safety_invariant_verified():
    sc = builtin("v0.5.22")
    kinds = {c.name: c.kind for c in sc.build().claims}
    # every one but release_justified: its deadline is safe by timing, not by a drain proof
    assert all(v == ("reached" if kinds[c] == "witness" else "verified") for c, v in sc.expect.items()
               if c != "release_justified")
    assert sc.expect["release_justified"] == "violated"


@pytest.mark.parametrize("patch,message", [
    ({"name": "has space"}, "name: expected 1..64 letters, digits, '.', '_' or '-'"),
    ({"sizes": {"decode_pages": 0, "prefill_pages": 1, "context_limit": 1}}, "[sizes].decode_pages: expected a whole number in 1..64, got 0"),
    ({"sizes": {"decode_pages": 1, "prefill_pages": 1, "context_limit": 1, "gpus": 8}}, "[sizes].gpus: expected one of"),
    ({"requests": [{"tenant": "A", "pages": 2}]}, "requests[0].pages: expected a whole number in 1..1 (context_limit), got 2"),
    ({"requests": [{"tenant": "A"}]}, "requests[0]: expected a table with tenant and pages (and optionally room, prefill_instance)"),
    ({"requests": [{"tenant": "A", "pages": 1, "room": -1}]}, "requests[0].room: expected a whole number in 0..31"),
    ({"engine": {"release_policy": "sometimes"}}, "[engine].release_policy: expected one of immediate, drain_ack, drain_ack_or_timeout, got 'sometimes'"),
    ({"engine": {"warp_drive": True}}, "[engine].warp_drive: expected one of"),
    ({"engine": {"checksum": "yes"}}, "[engine].checksum: expected true or false, got 'yes'"),
    ({"engine": {"timeout": 0}}, "[engine].timeout: expected a whole number in 1..16, got 0"),
    ({"engine": {"request_streams": True}}, "engine.request_streams: needs ordered_arrivals = false"),
    ({"expect": {"no_cross_tenant_read": "maybe"}}, '[expect].no_cross_tenant_read: expected "verified" or "violated"'),
    ({"colour": "blue"}, "colour: expected one of the keys"),
])
def test_bad_scenarios_get_one_line_naming_file_and_key(patch, message):
    data = {**GOOD, **patch}
    with pytest.raises(ScenarioError) as e:
        parse_scenario(data, "my.toml")
    text = str(e.value)
    assert text.startswith("my.toml: ") and message in text and "\n" not in text


def test_unknown_claim_in_expect_is_caught_when_built():
    sc = parse_scenario({**GOOD, "expect": {"no_such_claim": "verified"}}, "my.toml")
    with pytest.raises(ScenarioError, match=r"\[expect\].no_such_claim: no such claim"):
        sc.build()


def test_malformed_toml_and_missing_files(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed\n")
    with pytest.raises(ScenarioError, match="bad.toml: malformed TOML"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.toml")
    with pytest.raises(ScenarioError, match="unknown scenario 'nope'"):
        builtin("nope")


def test_unlisted_invariants_default_to_verified():
    sc = parse_scenario(GOOD, "my.toml")
    spec = sc.build()
    exp = sc.expectations(spec)
    assert exp["no_cross_tenant_read"] == "verified"
    assert "sometimes_request_succeeds" not in exp  # witnesses are checked only when listed


def test_a_variant_protocol_is_loaded_from_a_file(tmp_path):
    (tmp_path / "engine.py").write_text(textwrap.dedent('''
        from kvproof.spec.sglang.protocol import PdProtocol

        class NoDrainWait(PdProtocol):
            def decode_release_deferred(self, s, n, r):
                o = s.ops
                s.require(o.eq(s.d_phase[r], 3))
                n.d_phase[r] = 4
                self.release_decode(s, n, r)
    '''))
    (tmp_path / "mine.toml").write_text(textwrap.dedent('''
        name = "mine"
        protocol = "engine.py:NoDrainWait"
        [sizes]
        decode_pages = 1
        prefill_pages = 2
        context_limit = 1
        [[requests]]
        tenant = "A"
        pages = 1
        [[requests]]
        tenant = "B"
        pages = 1
        [engine]
        release_policy = "drain_ack"
        [expect]
        no_write_after_release = "violated"
        default = "verified"
    '''))
    trust_variant(tmp_path / "engine.py")  # what --variant engine.py does
    sc = load_scenario(tmp_path / "mine.toml")
    assert type(sc.build()).__name__ == "NoDrainWait"
    (tmp_path / "broken.toml").write_text((tmp_path / "mine.toml").read_text().replace("NoDrainWait", "Missing"))
    with pytest.raises(ScenarioError, match=r"Missing is not a PdProtocol or VllmPd or DynamoPd subclass of the variant file .*engine.py "
                                            r"\(it defines: NoDrainWait\)"):
        load_scenario(tmp_path / "broken.toml")


def test_to_data_round_trips():
    for sc in builtins():
        again = parse_scenario(sc.to_data(), "again")
        assert again.config == sc.config and again.expect == sc.expect and again.name == sc.name


def test_the_readme_variant_example_checks_as_documented():
    from pathlib import Path

    from kvproof.checker.explicit.run import check_scenario

    root = Path(__file__).resolve().parents[1]
    trust_variant(root / "examples" / "variant" / "early_release.py")
    sc = load_scenario(root / "examples" / "variant" / "early_release.toml")
    rep = check_scenario(sc)
    assert all(c.matches for c in rep.claims)
    assert {c.claim: c.verdict for c in rep.claims}["no_write_after_release"] == "violated"
    lines = (root / "examples" / "variant" / "early_release.py").read_text().splitlines()
    assert len(lines) < 14  # issue 13: shorter than the 14 lines it took before widen and operators
    assert "with s.widen(" in "\n".join(lines) and not any("self._" in x for x in lines)


def test_a_variant_file_is_a_scenario_with_its_own_protocol(tmp_path):
    from pathlib import Path

    from kvproof.checker.explicit.run import check_scenario
    from kvproof.model.scenario import load_variant

    root = Path(__file__).resolve().parents[1]
    path = root / "examples" / "variant" / "in_order_completion.py"
    assert len(path.read_text().splitlines()) < 25  # issue 13: shorter than the 25 lines it took
    assert "self._" not in path.read_text() and "def _" not in path.read_text()  # public helpers only
    sc = load_variant(path)
    assert sc.name == "in-order-completion" and sc.protocol.endswith(":InOrderCompletion")
    rep = check_scenario(sc)
    assert all(c.matches for c in rep.claims)
    # the same engine without the override is safe: the hazard is the override's
    from kvproof.spec.sglang.protocol import PdProtocol

    assert type(sc.build()).__mro__[1] is PdProtocol
    base = check_scenario(parse_scenario({k: v for k, v in sc.to_data().items() if k not in ("protocol", "expect")},
                                         "base"))
    assert {c.claim: c.verdict for c in base.claims}["no_write_after_release"] == "verified"


def test_bad_variant_files_are_one_line_errors(tmp_path):
    from kvproof.model.scenario import load_variant

    (tmp_path / "none.py").write_text("SCENARIO = {}\n")
    with pytest.raises(ScenarioError, match="exactly one PdProtocol or VllmPd or DynamoPd subclass"):
        load_variant(tmp_path / "none.py")
    (tmp_path / "boom.py").write_text("x = 1\nraise RuntimeError('nope')\n")
    with pytest.raises(ScenarioError, match="boom.py:2: the variant failed to load: RuntimeError: nope"):
        load_variant(tmp_path / "boom.py")
    (tmp_path / "syntax.py").write_text("x = 1\ndef (\n")
    with pytest.raises(ScenarioError, match="syntax.py:2: the variant failed to load: SyntaxError"):
        load_variant(tmp_path / "syntax.py")
    (tmp_path / "notpy.txt").write_text("SCENARIO = {}\n")
    with pytest.raises(ScenarioError, match=r"notpy.txt: expected a Python file \(.py\)"):
        load_variant(tmp_path / "notpy.txt")
    (tmp_path / "noscen.py").write_text("from kvproof.spec.sglang.protocol import PdProtocol\nclass V(PdProtocol):\n    pass\n")
    with pytest.raises(ScenarioError, match="SCENARIO: expected a dict"):
        load_variant(tmp_path / "noscen.py")
    with pytest.raises(ScenarioError, match="no such variant file"):
        load_variant(tmp_path / "missing.py")


def test_optional_sizes_default_and_are_checked():
    sc = parse_scenario(GOOD, "my.toml")
    assert (sc.config.prefill_ranks, sc.config.decode_ranks, sc.config.aux_slots) == (1, 1, 0)
    with pytest.raises(ScenarioError, match=r"\[sizes\].prefill_ranks: expected a whole number in 1..4, got 9"):
        parse_scenario({**GOOD, "sizes": {**GOOD["sizes"], "prefill_ranks": 9}}, "my.toml")
    with pytest.raises(ScenarioError, match="sizes.decode_ranks: one of prefill_ranks and decode_ranks must divide"):
        parse_scenario({**GOOD, "sizes": {**GOOD["sizes"], "prefill_ranks": 3, "decode_ranks": 2}}, "my.toml")
    with pytest.raises(ScenarioError, match=r'\[engine\].waiting_timeout: expected a whole number in 1..16 or "none"'):
        parse_scenario({**GOOD, "engine": {"waiting_timeout": -1}}, "my.toml")


@pytest.mark.parametrize("patch,message", [
    ({"engine": {"relase_policy": "drain_ack"}}, "[engine].relase_policy: expected one of"),
    ({"sizes": {"decode_pages": 1, "prefill_pages": 1, "context_limits": 1}}, "[sizes].context_limits: expected one of"),
    ({"requests": [{"tenant": "A", "pages": 1, "teannt": "B"}]}, "requests[0].teannt: expected only tenant, pages, room and prefill_instance in a request"),
    ({"titel": "x"}, "titel: expected one of the keys"),
])
def test_near_misses_get_a_suggestion(patch, message):
    with pytest.raises(ScenarioError) as e:
        parse_scenario({**GOOD, **patch}, "my.toml")
    text = str(e.value)
    assert text.startswith("my.toml: ") and message in text and "; did you mean " in text and "\n" not in text


def test_an_unknown_claim_names_the_near_miss():
    sc = parse_scenario({**GOOD, "expect": {"no_cross_tenant_reads": "verified"}}, "my.toml")
    with pytest.raises(ScenarioError, match=r"\[expect\].no_cross_tenant_reads: no such claim in the protocol; "
                                            r"expected one of its claims \(kvproof list --claims\); "
                                            r"did you mean no_cross_tenant_read\?"):
        sc.build()


def test_a_far_miss_gets_no_suggestion():
    with pytest.raises(ScenarioError) as e:
        parse_scenario({**GOOD, "engine": {"warp_drive": True}}, "my.toml")
    assert "did you mean" not in str(e.value)


def test_a_file_that_is_not_utf8(tmp_path):
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b"\xff\xfe name")
    with pytest.raises(ScenarioError, match=r"bin.toml: not UTF-8 text \(byte 0\): expected a TOML scenario file"):
        load_scenario(bad)


def test_a_protocol_can_be_an_importable_module():
    from kvproof.model.scenario import builtin

    sc = builtin("sglang-0.5.23-mooncake")
    assert sc.protocol == "sglang-0.5.23"
    assert type(sc.build()).__name__ == "Sglang0523"


@pytest.mark.parametrize("word,read_as", [("reached", "reached"), ("unreachable", "unreachable"),
                                          ("verified", "reached"), ("violated", "unreachable")])
def test_a_witness_reads_reached_or_unreachable_and_the_old_words_are_synonyms(word, read_as):
    base = builtin("abort-race").to_data()
    sc = parse_scenario({**base, "expect": {**base["expect"], "sometimes_abort_mid_transfer": word}}, "mine.toml")
    assert sc.expectations(sc.build())["sometimes_abort_mid_transfer"] == read_as


def test_the_witness_words_are_refused_for_an_invariant():
    base = builtin("abort-race").to_data()
    sc = parse_scenario({**base, "expect": {**base["expect"], "no_cross_tenant_read": "reached"}}, "mine.toml")
    with pytest.raises(ScenarioError, match=r'^mine.toml: \[expect\].no_cross_tenant_read: expected "verified" or '
                                            r'"violated" \(it is not a witness\), got \'reached\'$'):
        sc.build()
    with pytest.raises(ScenarioError, match="a witness: \"reached\" or \"unreachable\""):
        parse_scenario({**base, "expect": {"no_cross_tenant_read": "holds"}}, "mine.toml")


def test_the_catalogue_uses_the_witness_words():
    for sc in builtins():
        kinds = {c.name: c.kind for c in sc.build().claims}
        for claim, word in sc.expect.items():
            assert word in (("reached", "unreachable") if kinds[claim] == "witness" else ("verified", "violated"))


def test_a_protocol_that_is_not_built_in_is_refused_and_not_imported(tmp_path, monkeypatch):
    # problem 5: a module on the path that runs code when imported
    (tmp_path / "evil_engine.py").write_text(
        f"open({str(tmp_path / 'RAN')!r}, 'w').close()\n"
        "from kvproof.spec.sglang.protocol import PdProtocol\nclass E(PdProtocol):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for ref in ("evil_engine:E", "kvproof.no_such_module:X", "os:system"):
        with pytest.raises(ScenarioError, match=f"x.toml: protocol: '{ref}' is not a built-in protocol "
                                                r"\(built in: sglang, sglang-0.5.23, vllm, vllm-stream, vllm-prefix-cache, vllm-multi-connector, dynamo\); "
                                                "nothing was imported"):
            parse_scenario({**GOOD, "protocol": ref}, "x.toml")
    assert not (tmp_path / "RAN").exists()
    import sys
    assert "evil_engine" not in sys.modules


def test_a_scenario_file_naming_a_variant_file_runs_it_only_once_trusted(tmp_path):
    (tmp_path / "engine.py").write_text(
        f"open({str(tmp_path / 'RAN')!r}, 'w').close()\n"
        "from kvproof.spec.sglang.protocol import PdProtocol\nclass E(PdProtocol):\n    pass\n")
    body = "\n".join(f"{k} = {v}" for k, v in GOOD["sizes"].items())
    (tmp_path / "mine.toml").write_text(f'name = "mine"\nprotocol = "engine.py:E"\n[sizes]\n{body}\n'
                                        '[[requests]]\ntenant = "A"\npages = 1\n[expect]\ndefault = "verified"\n')
    with pytest.raises(ScenarioError) as e:
        load_scenario(tmp_path / "mine.toml")
    assert str(e.value).startswith(f"{tmp_path / 'mine.toml'}: protocol: '{tmp_path / 'engine.py'}:E' is an engine "
                                   "variant, and a variant file is code: nothing was run; pass the file with "
                                   "--variant engine.py to trust it")
    assert not (tmp_path / "RAN").exists()
    trust_variant(tmp_path / "engine.py")
    assert (tmp_path / "RAN").exists()
    assert type(load_scenario(tmp_path / "mine.toml").build()).__name__ == "E"


@pytest.mark.parametrize("protocol,message", [
    (":X", "protocol: expected 'file.py:ClassName' or one of sglang, sglang-0.5.23, vllm, vllm-stream, vllm-prefix-cache, vllm-multi-connector, dynamo, got ':X'"),
    (".x:Y", "protocol: '.x:Y' is not a built-in protocol"),
    ("x.py:", "protocol: expected 'file.py:ClassName'"),
    ("a\x00b.py:C", "protocol: expected 'file.py:ClassName'"),
    (42, "protocol: expected a string 'file.py:ClassName' or a built-in protocol, got 42"),
])
def test_malformed_protocols_are_one_line(protocol, message):
    # problem 6: ":X" and ".x:Y" were tracebacks (ValueError, TypeError from importlib)
    with pytest.raises(ScenarioError) as e:
        parse_scenario({**GOOD, "protocol": protocol}, "x.toml")
    assert str(e.value).startswith("x.toml: ") and message in str(e.value)


@pytest.mark.parametrize("name", ["a\x00b", "a" * 65, "a" * 300, ".hidden", "-x", "a/b", "naïve", ""])
def test_scenario_names_are_checked_when_read(name):
    # problem 6: a NUL byte or a 300-character name failed only when traces were written
    with pytest.raises(ScenarioError, match="name: expected 1..64 letters, digits"):
        parse_scenario({**GOOD, "name": name}, "x.toml")
    assert parse_scenario({**GOOD, "name": "a" * 64}, "x.toml").name == "a" * 64


def test_deeply_nested_toml_is_one_line(tmp_path):
    # problem 6: RecursionError
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ScenarioError, match="deep.toml: malformed TOML: nested too deeply"):
        load_scenario(deep)


def test_a_nul_byte_in_a_scenario_path_is_one_line():
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario("a\x00b.toml")


def test_an_installation_without_protocols_is_one_line_never_an_empty_pass(monkeypatch, capsys):
    """No kvproof.protocols entry point found (a checkout on sys.path without the package's
    metadata): check would have checked nothing and exited 0, list raised a traceback."""
    from kvproof.checker.cli.commands import _parser, main
    from kvproof.model import registry

    monkeypatch.setattr(registry, "_registered", {})
    monkeypatch.setattr(registry, "_loaded", True)
    _parser.cache_clear()  # the parser (built once per process) carries the protocols' own options
    try:
        for argv in (["list"], ["check"], ["check", "--no-traces"]):
            assert main(argv) == 3, argv
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "the catalogue is empty: no protocol is registered" in err
    finally:
        _parser.cache_clear()  # a later test in this process must not get the parser without them


def test_a_builtin_read_from_its_own_file_is_the_catalogues():
    """``builtin(name)`` reads only the scenario's file: it gives what the whole catalogue gives."""
    from kvproof.model.scenario import _builtin_file

    for sc in builtins():
        own = _builtin_file(sc.name)
        assert own is not None and own == sc, sc.name
        assert builtin(sc.name) == sc
    assert _builtin_file("no-such-scenario") is None
    with pytest.raises(ScenarioError):
        builtin("no-such-scenario")


_STRICT = ('name = "strict"\n[sizes]\ndecode_pages = 1\nprefill_pages = 2\ncontext_limit = 1\n'
           '[[requests]]\ntenant = "A"\npages = 1\n[[requests]]\ntenant = "B"\npages = 1\n'
           '[engine]\nrelease_policy = "immediate"\n[expect]\nno_cross_tenant_read = "violated"\n')


def test_a_file_that_leaves_an_invariant_out_of_expect_is_refused_in_one_line(tmp_path, capsys):
    from kvproof.checker.cli.commands import main

    f = tmp_path / "strict.toml"
    f.write_text(_STRICT)
    assert main(["check", str(f), "--no-traces"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    import tomllib
    loose = parse_scenario(tomllib.loads(_STRICT), "x")  # built in code: not strict
    first = next(c.name for c in loose.build().claims if c.kind == "invariant" and c.name != "no_cross_tenant_read")
    assert err == [f"kvproof: error: {f}: [expect].{first}: missing (and 9 more); give every invariant an "
                   'expected verdict ("verified" or "violated"), or the verdict of those left out: default = "verified"']
    # the same data built in code (a trace's stored scenario) keeps the old reading
    assert loose.expectations(loose.build())[first] == "verified"


def test_an_explicit_default_gives_the_unlisted_invariants_their_verdict(tmp_path, capsys):
    from kvproof.checker.cli.commands import main

    f = tmp_path / "strict.toml"
    f.write_text(_STRICT + 'default = "verified"\n')
    sc = load_scenario(f)
    exp = sc.expectations(sc.build())
    assert exp["no_cross_tenant_read"] == "violated" and exp["exclusive_ownership"] == "verified"
    assert parse_scenario(sc.to_data(), "again").default == "verified"  # traces keep it
    # immediate release also breaks no_write_after_release, which the default expects to hold: exit 1
    assert main(["check", str(f), "--no-traces"]) == 1
    f.write_text(_STRICT + 'default = "violated"\n')
    assert load_scenario(f).expectations(load_scenario(f).build())["exclusive_ownership"] == "violated"
    f.write_text(_STRICT + 'default = "reached"\n')
    capsys.readouterr()
    assert main(["check", str(f), "--no-traces"]) == 3
    assert capsys.readouterr().err.strip() == (f'kvproof: error: {f}: [expect].default: expected "verified" or '
                                               "\"violated\" (the verdict of every invariant not listed), got 'reached'")
