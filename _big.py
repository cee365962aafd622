import time, dataclasses, sys
from kvproof.model.scenario import builtin
from kvproof.spec.sglang.config import Request
from kvproof.spec.sglang.protocol import PdProtocol
from kvproof.spec.sglang.allsizes import link_map
from kvproof.checker.link import check_link
from kvproof.checker.quantified import invariant_of
cfg = builtin("v0.5.22").config
n, D, P = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
reqs = [("AB"[i % 2], 1 + (i % 2)) for i in range(n)]
spec = PdProtocol(dataclasses.replace(cfg, requests=tuple(Request(t,p) for t,p in reqs), decode_pages=D, prefill_pages=P, context_limit=2))
t=time.time(); c=time.process_time()
inv, _ = invariant_of(open("traces/proofs/v0.5.22.allsizes.smt2").read())
rep = check_link(spec, link_map(spec, invariant=inv, source="x"))
print(n, D, P, "proved" if rep.proved else [(r.name, r.verdict) for r in rep.results if r.verdict!="proved"],
      sum(r.instances for r in rep.results if r.kind=="step"), {k: round(v,1) for k,v in rep.seconds.items()}, f"wall {time.time()-t:.1f} cpu {time.process_time()-c:.1f}", len(rep.used))
