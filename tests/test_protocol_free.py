"""The general layers know no protocol: what a protocol knows (its names, claim names, sizes,
flags and defaults) lives in its own package, and the general layers ask it through
:class:`~kvproof.model.protocol.Protocol`.

The import contract (``.ci/import-contract``) sees imports only; a claim name, a flag or a default
written into ``model/`` or ``checker/`` is invisible to it.  These tests read the installed
sources, so they hold for the package as shipped."""

import re
from importlib import resources

import kvproof

PROTOCOL_WORD = re.compile(r"sglang|vllm|dynamo|minipd", re.IGNORECASE)  # minipd: examples/protocols/

# the one module of model/ and checker/ that may name a protocol, in a docstring example of
# the interface protocols implement
ALLOWED = {"model/protocol.py"}


def _sources(package: str, prefix: str):
    """(path under ``prefix``, text) of every Python source of an installed ``package``."""
    root = resources.files(package)
    stack = [(root, prefix)]
    while stack:
        folder, rel = stack.pop()
        for entry in folder.iterdir():
            if entry.is_dir() and entry.name != "__pycache__":
                stack.append((entry, f"{rel}/{entry.name}"))
            elif entry.name.endswith(".py"):
                yield f"{rel}/{entry.name}", entry.read_text(encoding="utf-8")


def test_model_and_checker_name_no_protocol():
    sources = dict(_sources("kvproof.model", "model")) | dict(_sources("kvproof.checker", "checker"))
    assert len(sources) > 80, sorted(sources)  # really the installed sources, subpackages included
    naming = sorted(path for path, text in sources.items() if PROTOCOL_WORD.search(text))
    assert set(naming) <= ALLOWED, naming
    assert len(naming) <= 2


def test_the_check_would_see_a_protocol_name():
    # the pattern is what a protocol's package is full of: it would catch a copy in the core
    texts = dict(_sources("kvproof.spec", "spec"))
    assert any(PROTOCOL_WORD.search(t) for p, t in texts.items() if p.startswith("spec/sglang/"))
    assert any(PROTOCOL_WORD.search(t) for p, t in texts.items() if p.startswith("spec/vllm/"))
    assert any(PROTOCOL_WORD.search(t) for p, t in texts.items() if p.startswith("spec/dynamo/"))


def test_import_kvproof_exports_no_protocol_class():
    exported = {name: getattr(kvproof, name) for name in kvproof.__all__}
    from_spec = sorted(name for name, value in exported.items()
                       if getattr(value, "__module__", "").startswith("kvproof.spec"))
    assert from_spec == []
    assert "Spec" in exported and "Protocol" in exported  # what a protocol implements stays public


# docstring examples of the interface a protocol implements, which name one claim or action
EXAMPLES = {"model/scenario.py", "model/framework.py"}


def _protocol_words() -> dict[str, str]:
    """Each registered protocol's claim names and its own command-line options (what it adds
    to a general command through ``Protocol.arguments``), mapped to where they come from."""
    import argparse

    from kvproof.model.registry import protocols
    from kvproof.model.scenario import builtins

    words = {}
    seen = set()
    for sc in builtins():
        if sc.family not in seen:
            seen.add(sc.family)
            words |= {c.name: f"{sc.family} claim" for c in sc.build().claims}
    for protocol in protocols():
        for command, add in protocol.arguments.items():
            parser = argparse.ArgumentParser()
            add(parser)
            words |= {o: f"{protocol.name} {command} option" for a in parser._actions for o in a.option_strings
                      if o not in ("-h", "--help")}
    return words


def test_model_and_checker_hold_no_protocols_claim_names_or_options():
    words = _protocol_words()
    assert {"--peer-tp", "--pages", "--slots", "decode_reads_only_own_pages"} <= set(words)  # the check sees them
    sources = dict(_sources("kvproof.model", "model")) | dict(_sources("kvproof.checker", "checker"))
    found = sorted(f"{path}: {word} ({words[word]})" for path, text in sources.items() if path not in EXAMPLES
                   for word in words if re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text))
    assert found == []


def test_the_event_log_writer_knows_no_schemas_keys(tmp_path):
    """``EventLog`` writes the keys it is handed; SGLang's recorder names its schema's own
    (room, rid, gen) in ``write_event``."""
    import json

    from kvproof.checker.logs.eventlog import EventLog
    from kvproof.spec.sglang.record import write_event

    log = EventLog(tmp_path / "log.jsonl", "incident")
    log.write(event="tick", actor="clock")
    write_event(log, "decode_abort", "decode", 0, 2, "R1", 1)
    log.close()
    head, tick, abort = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert head["scenario"] == "incident" and {"room", "rid", "gen"}.isdisjoint(tick)
    assert {k: abort[k] for k in ("event", "actor", "rank", "room", "rid", "gen")} == \
        {"event": "decode_abort", "actor": "decode", "rank": 0, "room": 2, "rid": "R1", "gen": 1}
    assert not hasattr(EventLog, "emit")


def test_the_size_prove_link_names_is_the_protocols_words():
    from kvproof.model.framework import Spec
    from kvproof.model.scenario import builtin

    assert builtin("incident").build().link_size() == "3 requests, 3 decode pages, 2 prefill pages"
    assert builtin("vllm-pull-ttl-expiry").build().link_size() == "2 requests, 2 decode pages, 1 prefill page"
    assert Spec.link_size(None) == "its size"  # a protocol that says nothing
