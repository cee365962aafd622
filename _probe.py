import dataclasses
from kvproof.model.scenario import builtin
from kvproof.checker.transition import TransitionSystem
spec = builtin("v0.5.22").build()
ts = TransitionSystem(spec)
sent = dict(spec.layout.sentinel_slots())
for st in ts.steps:
    inst = spec.instances[st.aid]
    if inst.name == "kv_write_lands":
        for sl in sent:
            print(inst.args, sl, st.next[sl], sl in st.writes)
        break
