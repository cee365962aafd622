import time
from kvproof.model.scenario import builtin
from kvproof.checker.allsizes import prove_by_link
t=time.time()
r = prove_by_link(builtin("v0.5.22"), progress=print)
print(r.verdicts, r.reason, r.exit_code, r.seconds, time.time()-t)
