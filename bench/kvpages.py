"""The side-by-side benchmark model: ``bench/kvpages.pml`` in kvproof's
spec language, rule for rule.

KV-cache pages in prefill/decode disaggregated serving under admission, client abort, drain ack,
timeout and a bounded clock.  The Promela model's every action is one ``d_step`` guarded by its
first expression and every process loops at one control point, so its reachable state graph is
the graph of its guarded commands; each of them is one action here, with the same guard and
effect.  The Promela bitmasks (``own[r]``, ``infl[r]``, ``freem``) are one flag per page here,
and the Promela scratch variables ``i, k, m`` (0 between steps) are not state: the reachable
states correspond one to one, so the counts agree.  Two things are written differently:

* ``READ(r)`` changes nothing (a self-loop) and asserts that every page ``r`` owns holds ``r``'s
  data; it is enabled exactly when ``phase[r] == RUN``, so its assertion fails in a reachable
  state iff the invariant :meth:`KvPages.decode_reads_only_own_data` does.  It is not an action.
* ``CHECK_OWN()`` is asserted after the only steps that change ownership or the free list
  (``ADMIT``, ``RELEASE``, ``FINISH``) and holds initially, so it fails in a reachable state iff
  the invariant :meth:`KvPages.pages_owned_once` does.

The named variants' verdicts (:data:`VARIANTS`, the Promela header's) and the reference counts
at N=3 D=4 (:data:`REFERENCE`) are pinned by ``tests/test_bench_kvpages.py``; ``bench/bench_spin.py``
measures the model against SPIN and checks the larger reference counts.
The protocol (:data:`KVPAGES`) is registered only by those two, never by the product.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from kvproof.model import Domain, Field, Protocol, Spec, action, invariant

__all__ = ["KvConfig", "KvPages", "KVPAGES", "VARIANTS", "REFERENCE", "variant"]

NEW, QUEUED, PREFILL, RUN, FIN, REJ, GONE = range(7)
PHASES = ("NEW", "QUEUED", "PREFILL", "RUN", "FIN", "REJ", "GONE")


@dataclass(frozen=True)
class KvConfig:
    """The Promela model's ``-D`` parameters, with its defaults (see its header)."""

    N: int = 3  # requests (1..6)
    D: int = 3  # decode pages (1..8)
    CAP: int = 2  # prefill capacity in pages
    OVER: int = 0  # 1: request 0 is over capacity (LEN = CAP + 1)
    LA: int = 2  # prompt lengths of the in-capacity requests, alternating LA, LB, ...
    LB: int = 1
    SEQ: int = 0  # 1: request r arrives only after request r-1 arrived
    ADM: int = 0  # 0 FIX: reject over capacity; 1 BUG: one-token placeholder, pending error
    ABORT: int = 1  # 0 RACE, 1 ACK, 2 TIMEOUT, 3 BOUNDED
    W: int = 1  # BOUNDED: a write lands within W ticks
    H: int = 2  # BOUNDED: decode frees after H ticks since the abort
    PROP: int = 0  # 1: a read may also find a page nobody wrote

    def __post_init__(self) -> None:
        if not 1 <= self.N <= 6 or not 1 <= self.D <= 8:
            raise ValueError(f"N={self.N} D={self.D}: the model takes N in 1..6 and D in 1..8")
        if self.ABORT not in (0, 1, 2, 3) or self.ADM not in (0, 1):
            raise ValueError(f"ABORT={self.ABORT} ADM={self.ADM}: ABORT is 0..3 and ADM 0 or 1")

    def length(self, r: int) -> int:
        """``LEN(r)``: request ``r``'s prompt length in pages."""
        if self.OVER and r == 0:
            return self.CAP + 1
        return self.LA if (r + self.OVER) % 2 == 0 else self.LB


VARIANTS: dict[str, tuple[dict, str]] = {
    "adm_bug": ({"ADM": 1, "ABORT": 1, "OVER": 1}, "violated"),
    "adm_fix": ({"ADM": 0, "ABORT": 1, "OVER": 1}, "holds"),
    "abort_race": ({"ABORT": 0}, "violated"),
    "fix_ack": ({"ABORT": 1}, "holds"),
    "fix_timeout": ({"ABORT": 2}, "violated"),
    "bounded": ({"ABORT": 3, "W": 1, "H": 2}, "holds"),
    "bounded_short": ({"ABORT": 3, "W": 1, "H": 1}, "violated"),
}
"""The header's named variants: the parameters each overrides and its verdict."""

REFERENCE: dict[tuple[str, int, int], int] = {
    ("fix_ack", 3, 4): 35_717,
    ("bounded", 3, 4): 168_288,
    ("fix_ack", 4, 4): 1_549_016,
    ("fix_ack", 4, 6): 6_192_120,
}
"""The header's reachable-state counts, by ``(variant, N, D)``."""


def variant(name: str, **sizes: int) -> KvConfig:
    """The configuration of named variant ``name`` (defaults elsewhere), with ``sizes`` (``N``, ``D``, ...)."""
    return replace(KvConfig(), **VARIANTS[name][0], **sizes)


class KvPages(Spec):
    """KV pages under admission, abort, drain ack, timeout and a bounded clock (``kvpages.pml``)."""

    def __init__(self, cfg: KvConfig):
        self.cfg = cfg
        self.req = Domain("req", cfg.N, tuple(f"r{i}" for i in range(cfg.N)))
        self.page = Domain("page", cfg.D, tuple(f"p{i}" for i in range(cfg.D)))
        self.maxlen = max(cfg.length(r) for r in range(cfg.N))

    def build_fields(self):
        """The Promela globals, bitmasks as one flag per page; ``content`` code ``N`` is ``ZERO``."""
        c, req, page, flag = self.cfg, self.req, self.page, Domain("flag", 2)
        out = [Field("phase", (req,), Domain("phase", 7, PHASES)),
               Field("ab", (req,), flag), Field("perr", (req,), flag),
               Field("nis", (req,), Domain("nis", self.maxlen + 1)),
               Field("own", (req, page), flag), Field("infl", (req, page), flag),
               Field("content", (page,), Domain("content", c.N + 1, (*req.labels, "ZERO")), init=c.N),
               Field("free", (page,), flag, init=1)]
        if c.ABORT != 0:
            out.append(Field("drained", (req,), flag))
        if c.ABORT == 2:
            out.append(Field("tmo", (req,), flag))
        if c.ABORT == 3:
            out += [Field("age", (req, page), Domain("age", c.W + 1)), Field("tmr", (req,), Domain("tmr", c.H + 1))]
        return out

    def domain(self, name):
        """The parameter domains: ``req`` and ``page``."""
        return {"req": self.req, "page": self.page}[name]

    def lpf(self, s, r):
        """``LPF(r)``: the pages prefill believes it must write (1 for a placeholder)."""
        n = self.cfg.length(r)
        if self.cfg.ADM == 1 and n > self.cfg.CAP:
            return s.ops.ite(s.perr[r] == 1, 1, n)
        return n

    def no_write_in_flight(self, s, r):
        """``infl[r] == 0``."""
        return s.ops.all_(s.infl[r, p] == 0 for p in range(self.cfg.D))

    def may_free(self, s, r):
        """``MAY_FREE(r)``: the release policy while r is still transferring."""
        a = self.cfg.ABORT
        if a == 1:
            return s.drained[r] == 1
        if a == 2:
            return (s.drained[r] == 1) | (s.tmo[r] == 1)
        return (s.drained[r] == 1) | (s.tmr[r] >= self.cfg.H)

    def free_pages(self, s, n, r):
        """``freem |= own[r]; own[r] = 0``."""
        for p in range(self.cfg.D):
            n.free[p] = s.ops.ite(s.own[r, p] == 1, 1, s.free[p])
            n.own[r, p] = 0

    @action("client", "req")
    def arrive(self, s, n, r):
        """``ARRIVE(r)``: over capacity, FIX rejects it, BUG queues a placeholder with a pending error."""
        s.require(s.phase[r] == NEW)
        if self.cfg.SEQ and r > 0:
            s.require(s.phase[r - 1] != NEW)
        if self.cfg.length(r) > self.cfg.CAP and self.cfg.ADM == 0:
            n.phase[r] = REJ
        else:
            if self.cfg.length(r) > self.cfg.CAP:
                n.perr[r] = 1
            n.phase[r] = QUEUED

    @action("client", "req")
    def client_abort(self, s, n, r):
        """``CLIENT_ABORT(r)``: before it is over; a queued request just leaves."""
        s.require((s.ab[r] == 0) & s.ops.is_in(s.phase[r], (QUEUED, PREFILL, RUN)))
        n.ab[r] = 1
        n.phase[r] = s.ops.ite(s.phase[r] == QUEUED, GONE, s.phase[r])

    @action("decode", "req")
    def admit(self, s, n, r):
        """``ADMIT(r)``: reserve LEN(r) pages, lowest free first (never looks at ``perr``)."""
        o, need = s.ops, self.cfg.length(r)
        s.require((s.phase[r] == QUEUED) & (o.count(s.free[p] == 1 for p in range(self.cfg.D)) >= need))
        for p in range(self.cfg.D):
            take = s.free[p] == 1
            if p:
                take = take & (o.count(s.free[q] == 1 for q in range(p)) < need)
            n.free[p] = o.ite(take, 0, s.free[p])
            n.own[r, p] = o.ite(take, 1, s.own[r, p])
        n.phase[r] = PREFILL

    @action("prefill", "req", "page")
    def issue(self, s, n, r, p):
        """``ISSUE(r)``: the write of r's next reserved page in page order, ``p``, goes in flight
        (not after the abort)."""
        o = s.ops
        s.require((s.phase[r] == PREFILL) & (s.ab[r] == 0) & (s.nis[r] < self.lpf(s, r)) & (s.own[r, p] == 1))
        if p:
            s.require(o.count(s.own[r, q] == 1 for q in range(p)) == s.nis[r])
        else:
            s.require(s.nis[r] == 0)
        n.infl[r, p] = 1
        if self.cfg.ABORT == 3:
            n.age[r, p] = 0
        n.nis[r] = s.nis[r] + 1

    @action("fabric", "req", "page")
    def land(self, s, n, r, p):
        """``LAND(r, p)``: an in-flight write lands, whoever owns the page now."""
        s.require(s.infl[r, p] == 1)
        n.content[p] = r
        n.infl[r, p] = 0
        if self.cfg.ABORT == 3:
            n.age[r, p] = 0

    @action("prefill", "req")
    def done(self, s, n, r):
        """``DONE(r)``: every write issued and landed: decode runs."""
        s.require((s.phase[r] == PREFILL) & (s.ab[r] == 0) & (s.nis[r] == self.lpf(s, r)) & self.no_write_in_flight(s, r))
        n.phase[r] = RUN

    @action("prefill", "req")
    def ack(self, s, n, r):
        """``ACK(r)`` (ABORT != 0): the drain ack once none of r's writes is in flight."""
        s.require((self.cfg.ABORT != 0) & (s.phase[r] == PREFILL) & (s.ab[r] == 1) & self.no_write_in_flight(s, r))
        if self.cfg.ABORT != 0:
            s.require(s.drained[r] == 0)
            n.drained[r] = 1

    @action("decode", "req")
    def timeout(self, s, n, r):
        """``TIMEOUT(r)`` (ABORT == 2): the hold timeout fires, any time after the abort."""
        s.require((self.cfg.ABORT == 2) & (s.phase[r] == PREFILL) & (s.ab[r] == 1))
        if self.cfg.ABORT == 2:
            s.require(s.tmo[r] == 0)
            n.tmo[r] = 1

    @action("decode", "req")
    def release(self, s, n, r):
        """``RELEASE(r)``: an aborted r's pages go back (while transferring, if MAY_FREE)."""
        if self.cfg.ABORT == 0:
            s.require((s.ab[r] == 1) & ((s.phase[r] == RUN) | (s.phase[r] == PREFILL)))
        else:
            s.require((s.ab[r] == 1) & ((s.phase[r] == RUN) | ((s.phase[r] == PREFILL) & self.may_free(s, r))))
        self.free_pages(s, n, r)
        n.phase[r] = GONE
        if self.cfg.ABORT == 3:
            n.tmr[r] = 0

    @action("decode", "req")
    def finish(self, s, n, r):
        """``FINISH(r)``: r finishes normally and frees its pages."""
        s.require((s.phase[r] == RUN) & (s.ab[r] == 0))
        self.free_pages(s, n, r)
        n.phase[r] = FIN

    @action("clock")
    def tick(self, s, n):
        """``TICK`` (ABORT == 3): not while a write has been in flight W ticks; ages in-flight
        writes and the hold timers of aborted, transferring requests."""
        c, o = self.cfg, s.ops
        s.require(c.ABORT == 3)
        if c.ABORT != 3:
            return
        s.require(o.all_(s.age[r, p] < c.W for r in range(c.N) for p in range(c.D)))
        for r in range(c.N):
            for p in range(c.D):
                n.age[r, p] = o.ite(s.infl[r, p] == 1, s.age[r, p] + 1, s.age[r, p])
            n.tmr[r] = o.ite((s.phase[r] == PREFILL) & (s.ab[r] == 1) & (s.tmr[r] < c.H), s.tmr[r] + 1, s.tmr[r])

    @invariant
    def decode_reads_only_own_data(self, s):
        """Safety 1 (``READ``'s assertion): a running request's pages hold its data (with PROP=1,
        or nobody's)."""
        c, o = self.cfg, s.ops
        conds = []
        for r in range(c.N):
            for p in range(c.D):
                good = s.content[p] == r
                if c.PROP:
                    good = good | (s.content[p] == c.N)
                conds.append(o.implies((s.phase[r] == RUN) & (s.own[r, p] == 1), good))
        return o.all_(conds)

    @invariant
    def pages_owned_once(self, s):
        """Safety 2 (``CHECK_OWN``): no page owned by two requests, no owned page on the free list."""
        c, o = self.cfg, s.ops
        return o.all_(o.count(s.own[r, p] == 1 for r in range(c.N)) + s.free[p] <= 1 for p in range(c.D))


_KEYS = tuple(f.name for f in fields(KvConfig))


def _parse(data, fail):
    params = data.get("params", {})
    for key, value in params.items():
        if key not in _KEYS:
            raise fail(f"[params].{key}", "one of " + ", ".join(_KEYS), key)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 8:
            raise fail(f"[params].{key}", "a whole number in 0..8", value)
    try:
        return KvConfig(**params)
    except ValueError as e:
        raise fail("[params]", str(e), params) from None


def _data(cfg: KvConfig):
    return {"params": {k: getattr(cfg, k) for k in _KEYS}}


KVPAGES = Protocol(
    name="kvpages",
    title="KV pages under admission, abort, drain ack and timeout (the SPIN benchmark)",
    specs={"kvpages": lambda: KvPages},
    config_keys=("params",),
    parse_config=_parse,
    config_data=_data,
)
"""The benchmark protocol; ``bench/bench_spin.py`` and its test register it."""
