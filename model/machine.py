"""The executable reference: a spec instance compiled once and run on concrete states.

A :class:`Machine` is what every engine and tool drives: the initial state, the successor
function, and the claim checks, all over states stored as ``bytes`` (one byte per slot).
:func:`reference_successors` runs the same spec through the plain interpreter instead; the
tests hold the two to the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

from kvproof.model.framework import ActionInstance, Claim, Spec
from kvproof.model.ops import ConcreteOps, Disabled
from kvproof.model.compiler import compile_expand, compile_hits, compile_hits_after, compile_successors

__all__ = ["Machine", "reference_step", "reference_successors", "reference_claim", "reference_hits"]


@dataclass
class Machine:
    """A compiled spec instance.

    ``claims`` are the properties checked; ``hits(s)`` sets bit ``i`` where ``claims[i]`` hits
    in ``s`` (an invariant fails, a witness holds) for the claims checked in every state, and
    ``quiescent_hits(s)`` likewise for those checked only where no action is enabled.
    ``expand(s, base, add_action, add_state)`` is ``successors`` in the form the engine drives
    (see :func:`~kvproof.model.compiler.compile_expand`), and ``hits_after[aid]`` checks only
    the claims action instance ``aid`` can change (see
    :func:`~kvproof.model.compiler.compile_hits_after`).  ``successors`` and ``hits_after`` are
    compiled the first time they are used: a small search needs neither.
    """

    spec: Spec
    claims: list[Claim] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.claims:
            self.claims = list(self.spec.claims)
        always = [c if c.at == "always" else None for c in self.claims]
        quiescent = [c if c.at == "quiescent" else None for c in self.claims]
        self.expand, expand_source = compile_expand(self.spec)
        self.hits, hits_source = compile_hits(self.spec, always)
        self.quiescent_hits, quiescent_source = compile_hits(self.spec, quiescent)
        self._sources = (expand_source, hits_source, quiescent_source)

    @cached_property
    def fingerprint(self) -> str:
        """A digest of what this machine computes: its compiled successor and claim-check
        source, its initial state, its action labels and claim names (equal for equal specs;
        a search's checkpoint is refused by a machine of another one)."""
        import hashlib

        h = hashlib.sha256()
        for part in (*self._sources, self.init.hex(), *(self.label(i.aid) for i in self.instances),
                     *(f"{c.name}:{c.kind}:{c.at}" for c in self.claims)):
            h.update(str(part).encode())
            h.update(b"\0")
        return h.hexdigest()

    @cached_property
    def _compiled_successors(self) -> tuple:
        return compile_successors(self.spec)

    @cached_property
    def successors(self):
        """``successors(s)``: ``[(action id, successor), ...]`` of state ``s`` (compiled on first use)."""
        return self._compiled_successors[0]

    @cached_property
    def successors_source(self) -> str:
        """The Python source of :attr:`successors`."""
        return self._compiled_successors[1]

    @cached_property
    def hits_after(self) -> list:
        """``hits_after[aid](s)``: the claim bits of ``s`` that action instance ``aid`` can change
        (compiled on first use; see :func:`~kvproof.model.compiler.compile_hits_after`)."""
        return compile_hits_after(self.spec, [c if c.at == "always" else None for c in self.claims])

    @cached_property
    def init(self) -> bytes:
        """The initial state."""
        return self.spec.layout.pack(self.spec.init_state())

    @property
    def instances(self) -> list[ActionInstance]:
        """Action instances, indexed by the ids ``successors`` returns."""
        return self.spec.instances

    def step(self, state: bytes, aid: int) -> bytes | None:
        """The successor of ``state`` by action instance ``aid``, or ``None`` if it is disabled
        (by :attr:`expand`, which the search compiled already)."""
        aids: list[int] = []
        succ: list[bytes] = []
        self.expand(state, 0, aids.append, succ.append)
        for a, nxt in zip(aids, succ):
            if a == aid:
                return nxt
        return None

    def run(self, *labels: str, state: bytes | None = None) -> bytes:
        """The state reached from ``state`` (the initial state by default) by the action
        instances with these labels (as :meth:`label` writes them), in order; ``ValueError``
        names the first label that is unknown or not enabled."""
        by_label = {self.label(i.aid): i.aid for i in self.instances}
        state = self.init if state is None else state
        for label in labels:
            if label not in by_label:
                raise ValueError(f"no action instance is labelled {label}")
            nxt = self.step(state, by_label[label])
            if nxt is None:
                raise ValueError(f"{label} is not enabled")
            state = nxt
        return state

    def claim_hits(self, name: str, state: bytes) -> bool:
        """Claim ``name`` hits in ``state``: an invariant fails there, a witness holds there.
        A quiescent claim hits only in a state where no action is enabled."""
        i = [c.name for c in self.claims].index(name)
        if self.claims[i].at == "quiescent":
            return not self.successors(state) and bool(self.quiescent_hits(state) >> i & 1)
        return bool(self.hits(state) >> i & 1)

    def label(self, aid: int) -> str:
        """``name(param=value, ...)`` of an action instance, with labelled values, showing the
        parameters the protocol shows (:meth:`~kvproof.model.framework.Spec.shown_params`)."""
        inst = self.instances[aid]
        shown = set(self.spec.shown_params(inst))
        args = ", ".join(
            f"{p}={self.spec.domain(p).label(v)}"
            for p, v in zip(inst.action.params, inst.args)
            if p in shown
        )
        return f"{inst.name}({args})"


def reference_step(spec: Spec, state: Sequence[int], aid: int) -> tuple[int, ...] | None:
    """The successor of ``state`` by action instance ``aid``, computed by the plain
    interpreter (the definition of the spec's meaning), or ``None`` where it is disabled."""
    ops = ConcreteOps(state)
    try:
        if not spec.run_action(spec.instances[aid], ops):
            return None
    except Disabled:
        return None
    return ops.result()


def reference_successors(spec: Spec, state: Sequence[int]) -> list[tuple[int, tuple[int, ...]]]:
    """Successors computed by the plain interpreter, one action instance at a time."""
    out = []
    for inst in spec.instances:
        nxt = reference_step(spec, state, inst.aid)
        if nxt is not None:
            out.append((inst.aid, nxt))
    return out


def reference_claim(spec: Spec, name: str, state: Sequence[int]) -> Any:
    """A claim's value in ``state`` by the plain interpreter: a truth value (for a liveness
    claim, the list of ``(label, pending)`` obligations)."""
    value = spec.eval_claim(name, ConcreteOps(state))
    if isinstance(value, list):
        return [(label, bool(v)) for label, v in value]
    return bool(value)


def reference_hits(spec: Spec, claim: Claim, state: Sequence[int], enabled: bool | None = None) -> bool:
    """Claim ``claim`` hits in ``state`` by the plain interpreter: an invariant fails, a
    witness holds; a quiescent invariant only where no action is enabled (``enabled`` may
    say whether one is, else it is computed)."""
    truth = reference_claim(spec, claim.name, state)
    if claim.kind == "witness":
        return truth
    if claim.at == "quiescent":
        if enabled is None:
            enabled = bool(reference_successors(spec, state))
        return not enabled and not truth
    return not truth

