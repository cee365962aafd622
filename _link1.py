import time, dataclasses, sys
from kvproof.model.scenario import builtin
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.spec.sglang.allsizes import link_map
from kvproof.checker.link import check_link
from kvproof.checker.quantified import invariant_of
cfg = builtin("v0.5.22").config
reqs, D, P = eval(sys.argv[1]) if len(sys.argv)>1 else ((("A",1),("B",2),("B",1)),2,1)
spec = PdProtocol(dataclasses.replace(cfg, requests=tuple(Request(t,p) for t,p in reqs), decode_pages=D, prefill_pages=P, context_limit=2))
t=time.time()
inv, _ = invariant_of(open("traces/proofs/v0.5.22.allsizes.smt2").read())
lm = link_map(spec, invariant=inv, source="v0.5.22.allsizes.smt2")
rep = check_link(spec, lm, progress=print)
for r in rep.results:
    print(r.kind, r.name, r.instances, r.verdict, r.offending, f"{r.seconds:.2f}", len(r.used))
    for l in r.detail: print("    ", l)
print(rep.seconds, time.time()-t, rep.hypotheses, len(rep.used))
for u in sorted(rep.used): print("  ", u[:300])
