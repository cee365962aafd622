"""What the conformance harness fakes around SGLang's real code, and nothing else: the clock,
the ZMQ transport, the Mooncake transfer engine and the attention-TP collective.

Every fake is driven by the harness one kvproof event at a time: messages are delivered when
the model's event says they arrive, writes land when the model's ``kv_write_lands`` says so,
and time moves only on ``clock_tick``.  A harness thread that does not answer within
:data:`WAIT` seconds is a :class:`HarnessError`, never a hang.
"""

from __future__ import annotations

import ctypes
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = [
    "WAIT", "HarnessError", "FakeClock", "Inbox", "WorkerQueue", "OutSocket", "Write", "Wire",
    "FakeTransferEngine", "Collective", "RankGroup",
]

WAIT = 10.0
"""Seconds a step may wait for a harness thread before it is a harness error."""


class HarnessError(RuntimeError):
    """The harness could not carry out a step (a thread did not answer, a call raised)."""


class FakeClock:
    """``time`` for the SGLang modules: ``time()``, ``monotonic()`` and ``perf_counter()`` read
    one counter that moves only when the harness advances it."""

    def __init__(self, start: float = 1_000_000.0):
        self.now = start

    def time(self) -> float:
        """Wall clock."""
        return self.now

    monotonic = perf_counter = time

    def sleep(self, seconds: float) -> None:
        """Sleeping passes no fake time (no harness thread sleeps on purpose)."""

    def __getattr__(self, name: str) -> Any:  # anything else the modules read from ``time``
        import time

        return getattr(time, name)


class Inbox:
    """A ZMQ PULL socket as a queue: ``recv_multipart`` blocks in the reading thread;
    :meth:`deliver` returns once the thread has processed the frames and is back at recv."""

    def __init__(self, name: str):
        self.name = name
        self.q: queue.Queue = queue.Queue()
        self.calls = 0
        self.cond = threading.Condition()

    def recv_multipart(self) -> list[bytes]:
        """Called by the real thread loop."""
        with self.cond:
            self.calls += 1
            self.cond.notify_all()
        return self.q.get()

    def deliver(self, frames: list[bytes]) -> None:
        """Hand ``frames`` to the thread and wait until it has handled them."""
        with self.cond:
            target = self.calls + 1
            self.q.put(list(frames))
            if not self.cond.wait_for(lambda: self.calls >= target, timeout=WAIT):
                raise HarnessError(f"{self.name} thread did not come back after a message")

    def wait_ready(self) -> None:
        """Wait until the reading thread first reached recv."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.calls >= 1, timeout=WAIT):
                raise HarnessError(f"{self.name} thread did not start")


class WorkerQueue:
    """A transfer worker's queue (``FastQueue``'s interface) that counts the worker's ``get``
    calls, so the harness knows when the worker is back waiting for work."""

    def __init__(self, wire: "Wire"):
        self.q: queue.Queue = queue.Queue()
        self.gets = 0
        self.wire = wire

    def put(self, item: Any) -> None:
        """What ``add_transfer_request`` calls."""
        self.q.put(item)

    def get(self) -> Any:
        """What ``transfer_worker`` blocks on."""
        with self.wire.cond:
            self.gets += 1
            self.wire.cond.notify_all()
        return self.q.get()


class OutSocket:
    """A ZMQ PUSH socket of a decode receiver: frames go to ``deliver`` (a queue of the peer);
    ``on_send`` sees every message as it is sent."""

    def __init__(self, deliver: Callable[[list[bytes]], None], on_send=None):
        self.deliver = deliver
        self.on_send = on_send

    def send_multipart(self, frames: list[bytes]) -> None:
        """Queue the frames for delivery."""
        frames = [bytes(f) for f in frames]
        if self.on_send is not None:
            self.on_send(frames)
        self.deliver(frames)


@dataclass
class Write:
    """One ``batch_transfer_sync`` call the transfer engine has in flight: the prefill rank that
    issued it, the decode rank it writes to, the room (and request instance) the worker was
    sending, and its blocks; ``pages`` are the decode pages it writes (empty for metadata)."""

    prank: int
    drank: int
    room: int
    instance: int
    blocks: list[tuple[int, int, int]]
    pages: list[int]
    aux_slot: int | None = None
    landed: threading.Event = field(default_factory=threading.Event)
    result: int = 0
    returned: bool = False

    @property
    def is_aux(self) -> bool:
        """A metadata (aux) write."""
        return self.aux_slot is not None


class Wire:
    """The shared state of the fake data plane: writes in flight, how many each prefill rank
    issued, and one condition every worker and engine call notifies."""

    def __init__(self, locate: Callable[[int, int, int], tuple[list[int], int | None]], aux_latency: bool):
        self.cond = threading.Condition()
        self.in_flight: list[Write] = []
        self.issued: dict[int, int] = {}
        self.locate = locate
        self.aux_latency = aux_latency
        self.closed = False

    def close(self) -> None:
        """Release every call still waiting and refuse to block new ones (the harness is done;
        no thread may be left waiting, or the interpreter could not exit)."""
        with self.cond:
            self.closed = True
            flying = list(self.in_flight)
            self.cond.notify_all()
        for w in flying:
            w.result = -1
            w.landed.set()

    def land(self, w: Write) -> None:
        """The write's bytes arrive (whoever owns the destination now); its call returns."""
        for src, dst, n in w.blocks:
            ctypes.memmove(dst, src, n)
        with self.cond:
            self.in_flight.remove(w)
            self.cond.notify_all()
        if not w.returned:
            w.landed.set()


class FakeTransferEngine:
    """``MooncakeTransferEngine`` of one prefill rank, as far as the worker uses it:
    ``batch_transfer_sync`` copies bytes between CPU tensors with ``memmove``.  KV writes (and
    metadata writes when the model has aux slots) block until the harness lands them; other
    metadata writes land at once.  ``sending`` is the (room, instance) the worker is sending."""

    def __init__(self, wire: Wire, prank: int, session_of: Callable[[str], int]):
        self.wire = wire
        self.prank = prank
        self.session_of = session_of
        self.sending: tuple[int, int] = (0, 0)

    def get_session_id(self) -> str:
        """This prefill rank's own session id (not used for routing)."""
        return f"prefill-rank-{self.prank}:0"

    def batch_transfer_sync(self, session_id, src_addrs, dst_addrs, lengths) -> int:
        """One synchronous transfer call."""
        drank = self.session_of(session_id)
        blocks = list(zip(src_addrs, dst_addrs, lengths))
        pages: list[int] = []
        aux = None
        for _, dst, n in blocks:
            found, slot = self.wire.locate(drank, dst, n)
            pages += found
            aux = slot if slot is not None else aux
        if not pages and (aux is None or not self.wire.aux_latency):
            for src, dst, n in blocks:
                ctypes.memmove(dst, src, n)
            return 0
        room, instance = self.sending
        w = Write(self.prank, drank, room, instance, blocks, sorted(set(pages)), aux if not pages else None)
        with self.wire.cond:
            if self.wire.closed:
                return -1
            self.wire.in_flight.append(w)
            self.wire.issued[self.prank] = self.wire.issued.get(self.prank, 0) + 1
            self.wire.cond.notify_all()
        while not w.landed.wait(1.0):
            if self.wire.closed:
                w.result = -1
                break
        w.returned = True
        return w.result


class Collective:
    """The attention-TP group of the decode ranks: ``all_reduce`` really combines every rank's
    flags (each rank's call runs in its own thread and meets the others at a barrier)."""

    def __init__(self, size: int):
        self.size = size
        self.barrier = threading.Barrier(size)
        self.slots: list[Any] = [None] * size

    def all_reduce(self, tensor, op=None, group=None, **_kw) -> None:
        """``torch.distributed.all_reduce`` over ``group`` (a :class:`RankGroup`), MAX, MIN or SUM."""
        import torch
        import torch.distributed as dist

        rank = group.rank
        self.slots[rank] = tensor.clone()
        try:
            self.barrier.wait(timeout=WAIT)
            stacked = torch.stack(self.slots)
            if op == dist.ReduceOp.MAX:
                out = stacked.max(dim=0).values
            elif op == dist.ReduceOp.MIN:
                out = stacked.min(dim=0).values
            else:
                out = stacked.sum(dim=0)
            self.barrier.wait(timeout=WAIT)
        except threading.BrokenBarrierError:
            raise HarnessError("the decode ranks' collective did not meet (different call sequences)") from None
        tensor.copy_(out)

    def world_size(self, group=None) -> int:
        """``torch.distributed.get_world_size``."""
        return self.size


@dataclass(frozen=True)
class RankGroup:
    """One decode rank's handle on the :class:`Collective` (its ``gloo_group``)."""

    rank: int
