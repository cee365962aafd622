"""spec/sglang/README.md's action table stays exact: every action of the protocol (and of the
0.5.23 subclass) is a row, with its parameters, its actor and whether it is fair, and every row
names an action that exists."""

import re
from pathlib import Path

from kvproof.model.scenario import builtin

README = Path(__file__).resolve().parents[1] / "spec" / "sglang" / "README.md"
ROW = re.compile(r"^\| (`[^|]+`(?: / `[^|]+`)*) \| (\w+) \| .* \| (yes|no|no / yes|yes / no) \| .* \|$")


def _rows():
    out = {}
    for line in README.read_text().splitlines():
        m = ROW.match(line)
        if not m:
            continue
        calls = re.findall(r"`(\w+)\(([^)]*)\)`", m.group(1))
        fairs = m.group(3).split(" / ")
        for i, (name, params) in enumerate(calls):
            out[name] = (tuple(p.strip() for p in params.split(",") if p.strip()), m.group(2),
                         fairs[min(i, len(fairs) - 1)] == "yes")
    return out


def test_every_action_is_a_row_with_its_parameters_actor_and_fairness():
    rows = _rows()
    actions = {a.name: a for name in ("v0.5.22", "sglang-0.5.23-mooncake") for a in builtin(name).build().actions}
    assert sorted(rows) == sorted(actions)
    for name, a in actions.items():
        assert rows[name] == (a.params, a.actor, a.fair), name


HELPER_ROW = re.compile(r"^\| (`[^|]+`(?:, `[^|]+`)*) \| [^|]+ \| [^|]+ \|$")


def _helper_rows():
    text = README.read_text().split("## The helper API a variant uses", 1)[1].split("\n## ", 1)[0]
    out = set()
    for line in text.splitlines():
        m = HELPER_ROW.match(line)
        if m:
            out.update(re.findall(r"`(\w+)", m.group(1)))
    return out


def test_the_helper_table_lists_every_public_helper_of_the_protocol_and_nothing_else():
    from kvproof.spec.sglang.protocol import PdProtocol

    structure = ("build_fields", "domain", "codes", "fields_of")  # ConfiguredSpec's: codes and fields_of
    public = {name for name, v in vars(PdProtocol).items()
              if not name.startswith("_") and not hasattr(v, "_kv_action") and name not in structure}
    assert "release_decode" in public and "rank_writes_in_flight" in public
    assert _helper_rows() == public
