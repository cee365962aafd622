"""The SGLang spec with the release deadline ``T`` and the write-latency bound ``W`` left
symbolic: the common ground of :mod:`.theorems` and :mod:`.timeout_lemmas`.

:func:`parametric_spec` builds ``timeout-bounded-latency`` with an engine proxy whose
``timeout`` and ``write_latency_bound`` are Z3 integer terms; the spec compares against them
through the ops facade, so nothing is re-encoded.  :func:`int_system` reads its actions with Z3
integer terms (:class:`~kvproof.checker.symbolic.z3ops.Z3Ops`) with symbolic upper bounds for the
``hold`` and ``wr`` fields.
"""

from __future__ import annotations

from typing import Any

import z3

from kvproof.checker.symbolic.z3ops import Z3Ops, state_vars
from kvproof.model.scenario import builtin
from kvproof.spec.sglang.config import Engine
from kvproof.spec.sglang.protocol import PdProtocol

__all__ = ["parametric_spec", "int_system"]


class _SymbolicEngine:
    """The scenario's engine flags, with ``timeout`` and ``write_latency_bound`` as Z3 terms."""

    def __init__(self, engine: Engine, timeout: Any, bound: Any):
        self._engine, self.timeout, self.write_latency_bound = engine, timeout, bound

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def parametric_spec(T, W) -> PdProtocol:
    """``timeout-bounded-latency`` with ``timeout = T`` and ``write_latency_bound = W`` (Z3 terms)."""
    spec = builtin("timeout-bounded-latency").build()
    spec.e = _SymbolicEngine(spec.e, T, W)
    return spec


def int_system(spec: PdProtocol, T, W):
    """(pre vars, typed(xs) builder, steps as (inst, guard, next) over pre) with symbolic
    upper bounds for the ``hold`` and ``wr`` fields."""
    pre = state_vars(spec, "pre")
    layout = spec.layout
    steps = []
    for inst in spec.instances:
        ops = Z3Ops(pre)
        if spec.run_action(inst, ops) is False:  # ruled out by the configuration
            continue
        guard = z3.simplify(z3.And(*ops.guard)) if ops.guard else z3.BoolVal(True)
        if z3.is_false(guard):
            continue
        steps.append((inst, guard, ops.next))

    sentinels = dict(layout.sentinel_slots())

    def typed(xs):
        parts = []
        for f in layout.fields:
            base = layout.base[f.name]
            for k in range(f.width):
                if base + k in sentinels:
                    continue
                hi = {"hold": T + 1, "wr": W + 3}.get(f.name, f.values.size)
                parts += [xs[base + k] >= 0, xs[base + k] < hi]
        for slot, value in sentinels.items():
            parts.append(xs[slot] == value)
        return z3.And(*parts)

    return pre, typed, steps
