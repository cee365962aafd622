"""The conformance harness's fakes: the clock, inboxes, the worker queue and the collective."""

import threading

import pytest

from kvproof.spec.sglang.conform.fakes import Collective, FakeClock, HarnessError, Inbox, RankGroup, Wire, WorkerQueue


def test_the_clock_moves_only_when_told():
    clock = FakeClock(10.0)
    assert clock.time() == clock.monotonic() == clock.perf_counter() == 10.0
    clock.sleep(5)
    assert clock.time() == 10.0
    clock.now += 15
    assert clock.monotonic() == 25.0


def test_an_inbox_delivers_once_the_thread_is_back_at_recv():
    inbox, seen = Inbox("test"), []

    def loop():
        while True:
            frames = inbox.recv_multipart()
            if frames == [b"stop"]:
                return
            seen.append(frames)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    inbox.wait_ready()
    inbox.deliver([b"a", b"b"])
    assert seen == [[b"a", b"b"]]  # handled before deliver returned
    inbox.q.put([b"stop"])
    t.join(5)


def test_an_inbox_without_its_thread_is_a_harness_error(monkeypatch):
    monkeypatch.setattr("kvproof.spec.sglang.conform.fakes.WAIT", 0.05)
    with pytest.raises(HarnessError, match="did not start"):
        Inbox("idle").wait_ready()


def test_the_worker_queue_counts_gets():
    q = WorkerQueue(Wire(lambda d, a, n: ([], None), aux_latency=False))
    q.put("chunk")
    assert q.get() == "chunk" and q.gets == 1


@pytest.mark.slow  # inner loop: over 2.5 s (the README's test command runs it)
def test_the_collective_combines_every_ranks_flags():
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    group = Collective(2)
    flags = [torch.tensor([1, 0, 1]), torch.tensor([0, 0, 1])]
    maxed = [t.clone() for t in flags]
    mined = [t.clone() for t in flags]

    def run(rank):
        group.all_reduce(maxed[rank], op=dist.ReduceOp.MAX, group=RankGroup(rank))
        group.all_reduce(mined[rank], op=dist.ReduceOp.MIN, group=RankGroup(rank))

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert [t.tolist() for t in maxed] == [[1, 0, 1]] * 2
    assert [t.tolist() for t in mined] == [[0, 0, 1]] * 2
    assert group.world_size() == 2
