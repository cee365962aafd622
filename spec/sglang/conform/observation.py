"""What is compared between the model and SGLang's code after every step, in the model's
terms: one :class:`Observation` from each side (:func:`model_observation` reads a model state,
:func:`code_observation` reads the harness's SGLang objects)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from kvproof.spec.sglang.state import D_HELD, OUT_LABELS, READ_LABELS
from kvproof.spec.sglang.conform.wiring import HEAD_BYTES, ROOM_BASE

__all__ = ["Observation", "model_observation", "code_observation"]


@dataclass(frozen=True)
class Observation:
    """One side's state after a step.

    ``held``: request slots in ``_deferred_releases``; ``owner``: decode page -> slot + 1 (0
    free); ``content``: per (shard, page), whose KV it holds (the model's content codes);
    ``outcome`` and ``read`` per slot; ``aborts``: (slot, prefill rank, armed) of every ABORT
    sent so far, sorted; ``acked``: per (slot, prefill rank), decode recorded that rank's drain
    ack for the armed generation; ``aux_owner`` / ``aux_content`` per metadata slot (only with
    aux slots); ``write_after_release``: a page (or slot) was released under an in-flight write.
    """

    held: frozenset[int] = frozenset()
    owner: tuple[int, ...] = ()
    content: tuple[int, ...] = ()
    outcome: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    aborts: tuple[tuple[int, int, bool], ...] = ()
    acked: tuple[int, ...] = ()
    aux_owner: tuple[int, ...] = ()
    aux_content: tuple[int, ...] = ()
    write_after_release: bool = False

    def differences(self, other: "Observation") -> list[str]:
        """What differs, one phrase per field (``self`` is the model, ``other`` the code)."""
        out = []
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                out.append(f"{f.name}: model {_show(f.name, a)}, SGLang {_show(f.name, b)}")
        return out


def _show(name: str, v: Any) -> str:
    if name == "held":
        return "{" + ", ".join(f"R{r}" for r in sorted(v)) + "}"
    if name == "aborts":
        return "[" + ", ".join(f"R{r}->P{pr} {'armed' if g else 'unarmed'}" for r, pr, g in v) + "]"
    if isinstance(v, tuple):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


def model_observation(machine, state: bytes, aborts: tuple, war: bool) -> Observation:
    """The model's state in the harness's terms (``aborts`` and ``war`` carry history)."""
    spec = machine.spec
    lay, k = spec.layout, spec.k

    def get(name, *idx):
        return state[lay.slot(name, *idx)]

    aux_owner = aux_content = ()
    if k.M:
        aux_owner = tuple(get("aux_owner", m) for m in range(k.M))
        aux_content = tuple(get("aux_content", m) for m in range(k.M))
    return Observation(
        held=frozenset(r for r in range(k.R) if get("d_phase", r) == D_HELD),
        owner=tuple(get("owner", p) for p in range(k.D)),
        content=tuple(get("content", u, p) for u in range(k.U) for p in range(k.D)),
        outcome=tuple(OUT_LABELS[get("outcome", r)] for r in range(k.R)),
        read=tuple(READ_LABELS[get("read", r)] for r in range(k.R)),
        aborts=tuple(sorted(aborts)),
        acked=tuple(get("acked", r, pr) for r in range(k.R) for pr in range(k.PR)),
        aux_owner=aux_owner, aux_content=aux_content, write_after_release=war,
    )


def code_observation(h) -> Observation:
    """What harness ``h``'s SGLang objects did, in the model's terms; disagreements between
    ranks that the model cannot show go to ``h.problems``."""
    for d, dr in enumerate(h.dranks):
        with h.wire.cond:
            for w in h.wire.in_flight:
                if w.drank != d:
                    continue
                if any(dr.owner[p] != h.tag(w.instance) for p in w.pages):
                    h.write_after_release = True
                if w.is_aux and h.aux_holder[d][w.aux_slot] != h.tag(w.instance):
                    h.write_after_release = True
    held_by_rank = [frozenset(h.instances[h.instance_of(e[0].req)].slot for e in dr.tq._deferred_releases)
                    for dr in h.dranks]
    if len(set(held_by_rank)) > 1:
        h.problems.append("decode ranks hold different requests in _deferred_releases")
    if len({tuple(dr.owner) for dr in h.dranks}) > 1:
        h.problems.append("decode ranks' page tables differ")
    content = []
    for u in range(h.heads):
        dr = h.dranks[u // (h.heads // h.DR)]
        j = u % dr.heads
        content += [_code_of_tag(h, int(dr.k_pool[p, j * HEAD_BYTES])) for p in range(h.D)]
    current = [h.instances[i] for i in h.current]
    aux_owner = aux_content = ()
    if h.M:
        aux_owner = tuple(_slot_of_tag(h, t) for t in h.aux_holder[0][: h.M])
        rooms = h.dranks[0].meta.bootstrap_room[: h.M, 0].tolist()
        aux_content = tuple(0 if room == 0 else int(room) - ROOM_BASE + 1 for room in rooms)
    return Observation(
        held=held_by_rank[0], owner=tuple(_slot_of_tag(h, t) for t in h.dranks[0].owner),
        content=tuple(content), outcome=tuple(x.outcome for x in current), read=tuple(x.read for x in current),
        aborts=_aborts(h), acked=_acked(h), aux_owner=aux_owner, aux_content=aux_content,
        write_after_release=h.write_after_release,
    )


def _code_of_tag(h, tag: int) -> int:
    """The model's content code of a tag: the slot's current request, or ``old:<tenant>``."""
    if tag == 0:
        return 0
    x = h.instances[tag - 1]
    return x.slot + 1 if h.current[x.slot] == tag - 1 else 1 + h.R + x.tenant


def _slot_of_tag(h, tag: int) -> int:
    return 0 if tag == 0 else h.instances[tag - 1].slot + 1


def _linked(h, pr: int, d: int) -> bool:
    g = min(h.PR, h.DR)
    return pr % g == d % g


def _acked(h) -> tuple[int, ...]:
    """Per (slot, prefill rank): every decode rank linked to it recorded its drain ack for the
    generation it armed for the slot's current request."""
    out = []
    for r in range(h.R):
        i = h.current[r]
        for pr in range(h.PR):
            marks = []
            for dr in h.dranks:
                if not _linked(h, pr, dr.rank):
                    continue
                state = dr.mgr._deferred_abort_ack_tracker.get(h.room(r))
                marks.append(state is not None and h.armed.get((i, dr.rank)) == state.generation
                             and pr in state.prefill_ranks)
            if any(marks) and not all(marks):
                h.problems.append(f"R{r}: only some decode ranks recorded P{pr}'s ack")
            out.append(int(bool(marks) and all(marks)))
    return tuple(out)


def _aborts(h) -> tuple[tuple[int, int, bool], ...]:
    """(slot, prefill rank, armed) of every ABORT sent, one per request and prefill rank
    however many decode ranks sent it; every linked decode rank must have sent it."""
    seen: dict[tuple[int, int], tuple[set, bool]] = {}
    for i, pr, d, g in h.abort_log:
        ds, armed = seen.get((i, pr), (set(), False))
        seen[(i, pr)] = (ds | {d}, armed or g is not None)
    out = []
    for (i, pr), (ds, armed) in seen.items():
        linked = {d for d in range(h.DR) if _linked(h, pr, d)}
        if ds != linked:
            h.problems.append(f"R{h.instances[i].slot}: ABORT to P{pr} from decode ranks {sorted(ds)}, "
                              f"expected {sorted(linked)}")
        out.append((h.instances[i].slot, pr, armed))
    return tuple(sorted(out))
