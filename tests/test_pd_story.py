"""Notes that tell a step's story in the engine's terms."""

from kvproof.spec.sglang.state import FREE, WR_FLIGHT

from .conftest import machine_of


def test_a_late_write_into_the_next_owner_is_called_out():
    spec = machine_of("abort-race").spec
    lay = spec.layout
    pre = list(spec.init_state())
    pre[lay.slot("wr", 0, 0, 0)] = WR_FLIGHT
    pre[lay.slot("dest", 0, 0)] = 0
    pre[lay.slot("src", 0, 0)] = 0
    pre[lay.slot("src_content", 0)] = 1
    pre[lay.slot("owner", 0)] = 2
    notes = spec.story(pre, "kv_write_lands", {"req": 0, "stream": 0, "chunk": 0}, pre)
    assert [n.text for n in notes] == ["late write from R0 lands on p0, now reserved by R1"]
    assert notes[0].level == "hazard"


def test_a_release_under_a_write_is_called_out():
    spec = machine_of("abort-race").spec
    lay = spec.layout
    pre = list(spec.init_state())
    pre[lay.slot("wr", 0, 0, 0)] = WR_FLIGHT
    pre[lay.slot("dest", 0, 0)] = 0
    pre[lay.slot("owner", 0)] = 1
    post = list(pre)
    post[lay.slot("owner", 0)] = FREE
    notes = spec.story(pre, "decode_abort", {"req": 0}, post)
    assert [n.text for n in notes] == ["p0 released while R0's chunk 0 write is still in flight"]


def test_content_labels_name_request_and_tenant():
    spec = machine_of("incident").spec
    assert spec.content_label(0) == "nothing written"
    assert spec.content_label(1) == "R0's KV (tenant A)"
    assert spec.content_label(4) == "an earlier request's KV (tenant A)"


def test_admission_notes_for_the_placeholder():
    spec = machine_of("incident").spec
    s = spec.init_state()
    texts = [n.text for n in spec.story(s, "prefill_bootstrap_add", {"req": 1}, s)]
    assert texts and "pending error" in texts[0]
    assert spec.story(s, "prefill_bootstrap_add", {"req": 0}, s) == []
