import time, z3, dataclasses
from kvproof.checker.quantified import invariant_of
from kvproof.spec.sglang.allsizes import SglangAllSizes
t=time.time()
text=open("traces/proofs/v0.5.22.allsizes.smt2").read()
inv, claims = invariant_of(text)
print(len(inv), time.time()-t)
system = SglangAllSizes(2,1)
st = system.state()
sorts = {n: s for n, s in system.sorts.items()}
decls = {}
for sym in (*system.symbols, *system.rigid):
    f = system.function(sym)
    decls[sym.name] = f if sym.args else f.decl()
for n, s in system.constants:
    decls[n] = z3.Const(n, system.sort(s)).decl()
for name, consts in []:
    for c, label in zip(consts, system.enums[name]):
        decls[label] = c.decl()
t=time.time()
term = z3.parse_smt2_string(f"(assert {inv})", sorts=sorts, decls=decls)[0]
print("parse", time.time()-t, term.decl().name(), term.num_args())
kinds = {}
for a in term.children():
    k = "forall" if z3.is_quantifier(a) else a.decl().name()
    kinds[k] = kinds.get(k,0)+1
print(kinds)
qs=[a for a in term.children() if z3.is_quantifier(a)]
import collections
print(collections.Counter(q.num_vars() for q in qs))
print(qs[0])
