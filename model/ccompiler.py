"""Compile a spec into C: the native backend's successor and claim functions.

:class:`COps` is the fourth interpretation of the operations facade: like
:class:`~kvproof.model.compiler.CodegenOps` (whose constant folding, static ranges and
binding it inherits) its values are source text, but C source.  :func:`c_source` runs every
action instance and claim through it once and returns one C translation unit with these entry
points over *packed* states (``width`` bytes each, one byte per slot, states back to back):

* ``kv_expand``: expands a run of states, writing every successor and ``position *
  n_actions + action id`` per successor, and flags the states with no successor;
* ``kv_hits``: per state, the bitmask of the ``always`` claims that hit (as
  :func:`~kvproof.model.compiler.compile_hits`);
* ``kv_qhits``: the same for the ``quiescent`` claims;
* ``kv_pending``: per state, the bitmask of a liveness claim's obligations still pending there
  (as :func:`~kvproof.model.compiler.compile_pending`; a claim of at most 64 obligations);
* ``kv_keys``: a 64-bit fingerprint per state;
* ``kv_insert`` / ``kv_rehash``: an open-addressing visited set of those fingerprints (and, in
  exact mode, of the states themselves, packed, kept in discovery order), filled a batch of
  candidates at a time with their table slots prefetched;
* ``kv_prep`` / ``kv_insert_shard`` / ``kv_number_shard``: the same visited set split in shards
  by key, each shard's table filled by its own thread (``--workers`` with the native backend),
  numbering the new states in the same order;
* ``kv_pack`` / ``kv_unpack``: states to and from that packed form (each slot in as many bits as
  the largest value it can hold: its initial value or a write's static bound).

A run-time range check that fails (a write or an index outside its field's codes) stops the
call and reports which check and what value; :func:`c_source` returns the checks' messages so
the caller raises the same :class:`~kvproof.model.compiler.RangeCheckFailed` as the Python
engine.  Nothing here compiles or loads C: that is :mod:`kvproof.checker.explicit.native`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from kvproof.model.compiler import CodegenOps, E, _c, _Emitter, _value_sizes
from kvproof.model.framework import Claim, Spec

__all__ = ["COps", "CSource", "c_source", "MAX_CLAIMS"]

MAX_CLAIMS = 64  # claim bits fit one uint64 per state

_PRELUDE = """\
#include <stdint.h>
#include <string.h>
#define True 1
#define False 0
static inline int kmin(int a, int b) { return a < b ? a : b; }
static inline int kmax(int a, int b) { return a < b ? b : a; }
static inline int kclamp(int i, int n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }
"""

_LEVEL = """\
int64_t kv_expand(const uint8_t *in, int64_t n, int64_t start, uint8_t *out, int64_t cap,
                  int64_t *codes, uint8_t *quiet, int64_t *produced, int64_t *err) {
    int64_t made = 0, j;
    for (j = start; j < n; j++) {
        if (made + MAX_SUCC > cap) break;
        int k = expand1(in + (size_t)j * W, out + (size_t)made * W, codes + made, j * N_ACTIONS, err);
        if (k < 0) { produced[0] = made; return -1 - j; }
        quiet[j] = k == 0;
        made += k;
    }
    produced[0] = made;
    return j;
}

int64_t kv_hits(const uint8_t *in, int64_t n, uint64_t *masks, int64_t *err) {
    for (int64_t j = 0; j < n; j++) {
        masks[j] = hits1(in + (size_t)j * W, err);
        if (err[0]) return -1 - j;
    }
    return n;
}

int64_t kv_qhits(const uint8_t *in, int64_t n, uint64_t *masks, int64_t *err) {
    for (int64_t j = 0; j < n; j++) {
        masks[j] = qhits1(in + (size_t)j * W, err);
        if (err[0]) return -1 - j;
    }
    return n;
}

static inline uint64_t kmix(uint64_t x) {
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    x ^= x >> 31; return x;
}

static inline uint64_t khash(const uint8_t *s, int n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    int i = 0;
    for (; i + 8 <= n; i += 8) { uint64_t w; memcpy(&w, s + i, 8); h = kmix(h ^ w) + 0x9e3779b97f4a7c15ULL; }
    if (i < n) { uint64_t w = 0; memcpy(&w, s + i, (size_t)(n - i)); h = kmix(h ^ w ^ ((uint64_t)(n - i) << 56)); }
    return kmix(h);
}

/* A 64-bit fingerprint per state: what the fingerprint visited set keys it by (the exact one keys
   a state by the hash of its packed form instead: it packs every state anyway). */
void kv_keys(const uint8_t *in, int64_t n, uint64_t *keys) {
    for (int64_t j = 0; j < n; j++) keys[j] = khash(in + (size_t)j * W, W);
}

/* The visited set: open addressing with linear probing over 64-bit keys (0 marks a free slot).
   Exact mode keeps, per slot, the number of the state in `store` (states in discovery order,
   packed: PW bytes each, see kv_pack) and confirms every key match by comparing the packed
   states; fingerprint mode (`store` NULL) keeps keys only (kv_keys's; 0 read as 1).  -1 when a
   state does not pack.  `pout` (fingerprint mode, may be NULL) gets each new state packed, in
   the order of `fresh`.  `ids` (exact mode, may be NULL) gets every candidate's state number,
   new or already seen: the targets of the edges into them (the state graph liveness needs).
   The candidates go KB at a time: first every key of the batch is computed and its home slot
   prefetched (exact mode: then, for a slot that already holds that key, the stored state it
   names), then the batch is probed in order; a table far larger than the caches then costs
   about one memory latency per batch instead of one per candidate, and the outcome (which
   candidates are new, in which order, where each key lands) is the one-at-a-time loop's. */
#define KB 16
int64_t kv_insert(uint64_t *tkeys, int32_t *tidx, int64_t mask, uint8_t *store, int64_t stored,
                  const uint8_t *cand, int64_t n, int64_t *fresh, uint8_t *pout, int32_t *ids) {
    int64_t m = 0;
    uint8_t p[KB][PW];
    uint64_t ks[KB];
    for (int64_t j0 = 0; j0 < n; j0 += KB) {
        int b = n - j0 < KB ? (int)(n - j0) : KB;
        for (int r = 0; r < b; r++) {
            const uint8_t *c = cand + (size_t)(j0 + r) * W;
            uint64_t k;
            if (store) {
                if (pack1(c, p[r])) return -1;
                k = khash(p[r], PW);
            } else {
                k = khash(c, W);
            }
            if (!k) k = 1;
            ks[r] = k;
            __builtin_prefetch(tkeys + (k & (uint64_t)mask), 1);
            if (store) __builtin_prefetch(tidx + (k & (uint64_t)mask), 1);
        }
        if (store)
            for (int r = 0; r < b; r++) {
                int64_t i = (int64_t)(ks[r] & (uint64_t)mask);
                if (tkeys[i] == ks[r]) __builtin_prefetch(store + (size_t)tidx[i] * PW, 0);
            }
        for (int r = 0; r < b; r++) {
            uint64_t k = ks[r];
            int64_t i = (int64_t)(k & (uint64_t)mask);
            for (;;) {
                uint64_t t = tkeys[i];
                if (t == 0) {
                    tkeys[i] = k;
                    if (store) {
                        tidx[i] = (int32_t)(stored + m);
                        memcpy(store + (size_t)(stored + m) * PW, p[r], PW);
                    } else if (pout && pack1(cand + (size_t)(j0 + r) * W, pout + (size_t)m * PW)) {
                        return -1;
                    }
                    if (ids) ids[j0 + r] = (int32_t)(stored + m);
                    fresh[m++] = j0 + r;
                    break;
                }
                if (t == k && (!store || memcmp(store + (size_t)tidx[i] * PW, p[r], PW) == 0)) {
                    if (ids) ids[j0 + r] = tidx[i];
                    break;
                }
                i = (i + 1) & mask;
            }
        }
    }
    return m;
}

int64_t kv_pack(const uint8_t *in, int64_t n, uint8_t *out) {
    for (int64_t j = 0; j < n; j++)
        if (pack1(in + (size_t)j * W, out + (size_t)j * PW)) return -1 - j;
    return n;
}

void kv_unpack(const uint8_t *in, int64_t n, uint8_t *out) {
    for (int64_t j = 0; j < n; j++) unpack1(in + (size_t)j * PW, out + (size_t)j * W);
}

/* The sharded visited set of several workers (kvproof.checker.explicit.native_workers): the keys of a
   batch of candidates are computed by kv_prep over ranges (in parallel), then each shard's table
   takes the candidates whose key falls to it, in order (kv_insert_shard, one thread per shard:
   the tables are disjoint), flagging the first occurrences; kv_number_shard then gives each new
   state its number (the position of its flag among all flags: discovery order, as kv_insert).
   Until then a table slot holds -1 - j for candidate j (its packed form is pk[j]). */
int64_t kv_prep(const uint8_t *cand, int64_t lo, int64_t hi, uint8_t *pk, uint64_t *keys, uint8_t *shard,
                int64_t nshards, int64_t *counts) {
    for (int64_t j = lo; j < hi; j++) {
        const uint8_t *c = cand + (size_t)j * W;
        uint64_t k;
        if (pk) {
            if (pack1(c, pk + (size_t)j * PW)) return -1 - j;
            k = khash(pk + (size_t)j * PW, PW);
        } else {
            k = khash(c, W);
        }
        if (!k) k = 1;
        keys[j] = k;
        shard[j] = (uint8_t)((k >> 40) % (uint64_t)nshards);
        counts[shard[j]]++;
    }
    return hi;
}

int64_t kv_insert_shard(uint64_t *tkeys, int32_t *tidx, int64_t mask, const uint8_t *store, const uint8_t *pk,
                        const uint64_t *keys, const uint8_t *shard, int64_t n, int64_t s, uint8_t *flags,
                        int64_t *slot) {
    int64_t m = 0, js[KB], j0 = 0;
    while (j0 < n) {  /* this shard's candidates KB at a time, their home slots prefetched, then probed in order */
        int b = 0;
        for (; j0 < n && b < KB; j0++) {
            if (shard[j0] != s) continue;
            js[b++] = j0;
            __builtin_prefetch(tkeys + (keys[j0] & (uint64_t)mask), 1);
            if (pk) __builtin_prefetch(tidx + (keys[j0] & (uint64_t)mask), 1);
        }
        for (int r = 0; r < b; r++) {
            int64_t j = js[r];
            uint64_t k = keys[j];
            int64_t i = (int64_t)(k & (uint64_t)mask);
            for (;;) {
                uint64_t t = tkeys[i];
                if (t == 0) {
                    tkeys[i] = k;
                    if (pk) { tidx[i] = (int32_t)(-1 - j); slot[j] = i; }
                    flags[j] = 1;
                    m++;
                    break;
                }
                if (t == k) {
                    if (!pk) break;
                    int32_t x = tidx[i];
                    const uint8_t *q = x >= 0 ? store + (size_t)x * PW : pk + (size_t)(-1 - (int64_t)x) * PW;
                    if (memcmp(q, pk + (size_t)j * PW, PW) == 0) break;
                }
                i = (i + 1) & mask;
            }
        }
    }
    return m;
}

void kv_number_shard(int32_t *tidx, const int64_t *slot, const uint8_t *shard, const int64_t *fresh, int64_t m,
                     int64_t base, int64_t s, uint8_t *store, const uint8_t *pk) {
    for (int64_t r = 0; r < m; r++) {
        int64_t j = fresh[r];
        if (shard[j] != s) continue;
        tidx[slot[j]] = (int32_t)(base + r);
        memcpy(store + (size_t)(base + r) * PW, pk + (size_t)j * PW, PW);
    }
}

void kv_rehash(const uint64_t *okeys, const int32_t *oidx, int64_t ocap, uint64_t *nkeys, int32_t *nidx,
               int64_t nmask) {
    for (int64_t i = 0; i < ocap; i++) {
        uint64_t k = okeys[i];
        if (!k) continue;
        int64_t at = (int64_t)(k & (uint64_t)nmask);
        while (nkeys[at]) at = (at + 1) & nmask;
        nkeys[at] = k;
        if (oidx) nidx[at] = oidx[i];
    }
}
"""

class _CEmitter(_Emitter):
    """Lines of one C function: ``open`` starts a block, ``reset`` closes every open block."""

    def reset(self) -> None:
        while self.depth > self.base_depth:
            self.depth -= 1
            self.line("}")

    def discard(self, mark: int) -> None:
        """Drop every line from ``mark`` on (an action that is never enabled), blocks included."""
        del self.lines[mark:]
        self.depth = self.base_depth

    def bind(self, src: str) -> str:
        self.n += 1
        name = f"v{self.n}"
        self.line(f"int {name} = {src};")
        return name


class COps(CodegenOps):
    """Emits C source for guards, effects and claims: the Python emitter's folding and ranges,
    with C's operators, and every index that its static range does not settle clamped (the
    run-time check that reports it runs before any write)."""

    AND, OR, NOT = " && ", " || ", "!"
    ITE = "({c} ? {a} : {b})"
    MIN, MAX = "kmin", "kmax"

    def lookup(self, table, idx):
        idx = _c(idx)
        if idx.const is not None:
            return _c(table[idx.const])
        name = self.em.table(tuple(int(v) for v in table))
        at = idx.src
        if idx.lo < 0 or idx.hi >= len(table):
            self.checks.append((idx.src, len(table), "a table index"))
            at = f"kclamp({idx.src}, {len(table)})"
        return self._bind(f"{name}[{at}]", min(table), max(table))

    def read_at(self, base, size, idx):
        idx = _c(idx)
        if idx.const is not None or not (idx.lo < 0 or idx.hi >= size):
            return super().read_at(base, size, idx)
        self.footprint.update(range(base, base + size))
        self.checks.append((idx.src, size, "an index"))
        hi = max(self._hi_of_slot(base + k) for k in range(size))
        return self._bind(f"s[{base} + kclamp({idx.src}, {size})]", 0, hi)

    def require(self, cond):
        cond = _c(cond)
        if self.dead or cond.const is True:
            return
        if cond.const is not None:
            self.dead = True
            return
        self.em.open(f"if ({cond.src}) {{")


@dataclass
class CSource:
    """A spec compiled to C: the source, the messages of its run-time checks (check ``k`` is
    reported as ``k + 1``), and the shape of its states."""

    text: str
    checks: list[str]
    width: int
    n_actions: int
    max_successors: int
    packed_width: int = 0
    """Bytes of a state packed (every slot in as many bits as its largest value needs): how the
    exact visited set stores states."""
    obligations: dict = None  # type: ignore[assignment]
    """Per liveness claim compiled to ``kv_pending`` (its index among the claims): its
    obligations' labels, bit ``i`` of a mask being the ``i``-th."""


def _emit_checks(em: _CEmitter, ops: COps, where: str, messages: list[str], fail: str) -> None:
    for src, size, what in ops.checks:
        messages.append(f"{where}: {what}")
        k = len(messages)
        em.line(f"if (!(0 <= ({src}) && ({src}) < {size})) {{ err[0] = {k}; err[1] = ({src}); {fail} }}")
    ops.checks.clear()


def _hits_function(spec: Spec, claims: Sequence[Claim | None], name: str, tables: dict, messages: list[str]) -> list[str]:
    em = _CEmitter(tables)
    em.line("uint64_t h = 0;")
    for i, claim in enumerate(claims):
        if claim is None:
            continue
        em.reset()
        ops = COps(em, _value_sizes(spec))
        value = _c(spec.eval_claim(claim.name, ops))
        _emit_checks(em, ops, claim.name, messages, "return 0;")
        if value.const is not None:
            if bool(value.const) == (claim.kind == "witness"):
                em.line(f"h |= {1 << i}ULL;")
            continue
        test = value.src if claim.kind == "witness" else f"!{value.src}"
        em.open(f"if ({test}) {{")
        em.line(f"h |= {1 << i}ULL;")
    em.reset()
    em.line("return h;")
    return [f"static uint64_t {name}(const uint8_t *s, int64_t *err) {{"] + em.lines + ["}"]


def _pending_functions(spec: Spec, claims: Sequence[Claim], tables: dict,
                       messages: list[str]) -> tuple[list[str], dict[int, list[str]]]:
    """``kv_pending(claim, in, n, masks, err)``: per state, the obligations of liveness claim
    number ``claim`` pending there, as :func:`~kvproof.model.compiler.compile_pending` gives
    them (-2: that claim is not compiled: not liveness, or more than 64 obligations); and each
    compiled claim's labels."""
    lines: list[str] = []
    labels: dict[int, list[str]] = {}
    for i, claim in enumerate(claims):
        if claim.kind != "liveness":
            continue
        em = _CEmitter(tables)
        em.line("uint64_t h = 0;")
        ops = COps(em, _value_sizes(spec))
        obligations = spec.eval_claim(claim.name, ops)
        if len(obligations) > 64:
            continue
        _emit_checks(em, ops, claim.name, messages, "return 0;")
        for k, (label, value) in enumerate(obligations):
            em.reset()
            value = _c(value)
            if value.const is not None:
                if value.const:
                    em.line(f"h |= {1 << k}ULL;")
                continue
            em.open(f"if ({value.src}) {{")
            em.line(f"h |= {1 << k}ULL;")
        em.reset()
        em.line("return h;")
        labels[i] = [label for label, _ in obligations]
        lines += [f"static uint64_t pend{i}(const uint8_t *s, int64_t *err) {{"] + em.lines + ["}"]
    lines += ["int64_t kv_pending(int64_t claim, const uint8_t *in, int64_t n, uint64_t *masks, int64_t *err) {",
              "    uint64_t (*f)(const uint8_t *, int64_t *);",
              "    switch (claim) {"]
    lines += [f"    case {i}: f = pend{i}; break;" for i in labels]
    lines += ["    default: return -2;", "    }",
              "    for (int64_t j = 0; j < n; j++) {",
              "        masks[j] = f(in + (size_t)j * W, err);",
              "        if (err[0]) return -1 - j;",
              "    }",
              "    return n;", "}"]
    return lines, labels


def _slots_of(spec: Spec, slot: str) -> range:
    """The slots a write to ``slot`` (a number, or ``"base + index"``) may change: that slot, or
    every slot of the field holding ``base``."""
    head = slot.split(" + ", 1)
    at = int(head[0])
    if len(head) == 1:
        return range(at, at + 1)
    for f in spec.layout.fields:
        base = spec.layout.base[f.name]
        if base <= at < base + f.width:
            return range(base, base + f.width)
    return range(0, spec.layout.size)  # pragma: no cover - a base outside every field


def _pack_functions(bits: list[int]) -> tuple[list[str], int]:
    """``pack1`` (a state's slots, ``bits[i]`` bits each, back to back in ``PW`` bytes; nonzero
    when a slot does not fit) and ``unpack1``, straight-line over 64-bit words held in
    registers; and ``PW``."""
    total = max(1, (sum(min(b, 8) for b in bits) + 7) // 8)
    words = (total + 7) // 8
    pack = ["static inline int pack1(const uint8_t *s, uint8_t *p) {", "    unsigned ov = 0;",
            f"    uint64_t a[{words}] = {{0}};"]
    unpack = ["static inline void unpack1(const uint8_t *p, uint8_t *s) {", f"    uint64_t a[{words}] = {{0}};",
              f"    memcpy(a, p, {total});"]
    pos = 0
    for i, b in enumerate(bits):
        b = min(b, 8)
        if b < 8:
            pack.append(f"    ov |= s[{i}] >> {b};")
        if b == 0:
            unpack.append(f"    s[{i}] = 0;")
            continue
        w, off = pos >> 6, pos & 63
        pack.append(f"    a[{w}] |= (uint64_t)s[{i}] << {off};")
        value = f"(a[{w}] >> {off})"
        if off + b > 64:
            pack.append(f"    a[{w + 1}] |= (uint64_t)s[{i}] >> {64 - off};")
            value = f"((a[{w}] >> {off}) | (a[{w + 1}] << {64 - off}))"
        unpack.append(f"    s[{i}] = (uint8_t)({value} & {(1 << b) - 1}u);")
        pos += b
    pack += [f"    memcpy(p, a, {total});", "    return ov != 0;", "}"]
    return pack + unpack + ["}"], total


def c_source(spec: Spec, claims: Sequence[Claim]) -> CSource:
    """The C translation unit of ``spec`` with ``claims`` (at most :data:`MAX_CLAIMS`; the
    bits of ``kv_hits``/``kv_qhits`` follow their order)."""
    if len(claims) > MAX_CLAIMS:
        raise ValueError(f"the native backend checks at most {MAX_CLAIMS} claims at once, not {len(claims)}")
    width = spec.layout.size
    tables: dict[tuple, str] = {}
    messages: list[str] = []
    sizes = _value_sizes(spec)
    em = _CEmitter(tables)
    em.line("int n = 0; uint8_t *t;")
    live = 0
    slot_hi = list(spec.init_state())  # the largest value each slot can hold: the initial one or a write's bound
    for inst in spec.instances:
        em.reset()
        mark = len(em.lines)
        em.line("/* " + re.sub(r"[^\w(), ]", "_", f"{inst.name}{inst.args}") + " */")
        ops = COps(em, sizes)
        if not spec.run_action(inst, ops) or ops.dead:
            em.discard(mark)
            continue
        live += 1
        for slot, value in ops.writes:  # a byte holds 0..255: the Python engine's bytearray refuses the rest
            if value.lo < 0 or value.hi > 255:
                ops.checks.append((value.src, 256, "a byte"))
        _emit_checks(em, ops, f"{inst.name}{inst.args}", messages, "return -1;")
        em.line("t = out + (size_t)n * W;")
        em.line("memcpy(t, s, W);")
        for slot, value in ops.writes:
            em.line(f"t[{slot}] = (uint8_t)({value.src});")
            for k in _slots_of(spec, slot):
                slot_hi[k] = max(slot_hi[k], min(value.hi, 255))
        em.line(f"codes[n++] = base + {inst.aid};")
    em.reset()
    em.line("return n;")
    expand1 = (["static int expand1(const uint8_t *s, uint8_t *out, int64_t *codes, int64_t base, int64_t *err) {"]
               + em.lines + ["}"])
    always = [c if c.at == "always" else None for c in claims]
    quiescent = [c if c.at == "quiescent" else None for c in claims]
    hits1 = _hits_function(spec, always, "hits1", tables, messages)
    qhits1 = _hits_function(spec, quiescent, "qhits1", tables, messages)
    pending, obligations = _pending_functions(spec, claims, tables, messages)
    packing, packed = _pack_functions([hi.bit_length() for hi in slot_hi] or [1])
    head = [_PRELUDE, f"#define W {max(width, 1)}", f"#define PW {packed}", f"#define N_ACTIONS {len(spec.instances)}LL",
            f"#define MAX_SUCC {max(live, 1)}"]
    head += [f"static const int {name}[] = {{{', '.join(map(str, values))}}};" for values, name in tables.items()]
    text = "\n".join(head + packing + expand1 + hits1 + qhits1 + [_LEVEL] + pending)
    return CSource(text, messages, width, len(spec.instances), max(live, 1), packed, obligations)
