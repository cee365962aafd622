"""Counterexamples to induction: why a proof method stopped, told as a state, an action and the
conjunct it breaks.

When ``kvproof prove`` cannot close an induction within its budget, the last counterexample Z3
gave is kept (:class:`~.kinduction.InductionCounterexample` for k-induction,
:class:`~.lemmas.BlockCounterexample` for the inductive invariant) and turned into an
:class:`InductionFailure`: the state the breaking step starts from, every value of it, the
action instance, what that action changes, the invariant (or lemma) the step breaks, and a few
values of the state that no reachable state shows together — why Z3 could take that step,
though no run of the engine can.  :func:`render_failure` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kvproof.checker.states import named_values, slot_names, state_changes

__all__ = ["InductionFailure", "from_block", "from_k_induction", "render_failure"]


@dataclass(frozen=True)
class InductionFailure:
    """One method's last counterexample to induction, in the spec's names.

    ``method`` is ``inductive invariant`` or ``k-induction``; ``state`` is the state the
    breaking step starts from (all its values, by ``field[index]``); ``action`` the action
    instance's label (``None`` when ``state`` itself breaks an invariant); ``changes`` what the
    action changes, ``(field[index], old, new)``; ``breaks`` the conjunct that fails after it
    (invariant names, or a lemma); ``unreachable`` a few values of ``state`` that no reachable
    state shows together; ``path`` the actions of the simple path before the breaking step
    (k-induction: the states on it satisfy the invariants too)."""

    method: str
    state: dict[str, Any]
    action: str | None
    changes: list[tuple[str, Any, Any]]
    breaks: list[str]
    unreachable: list[str]
    path: list[str]

    def to_json(self) -> dict[str, Any]:
        """A plain-data form for ``--json``."""
        return {"method": self.method, "state": dict(self.state),
                "action": self.action, "changes": [list(c) for c in self.changes],
                "breaks": self.breaks, "unreachable": self.unreachable, "path": self.path}


Generalise = Callable[[bytes], Sequence[tuple[int, int]]]


def _core(layout, state: bytes, generalise: Generalise | None) -> list[str]:
    if generalise is None:
        return []
    names, values = slot_names(layout), named_values(layout, state)
    return [f"{names[slot]} = {values[names[slot]]}" for slot, _ in generalise(state)]


def from_k_induction(machine, cti, generalise: Generalise | None = None) -> InductionFailure:
    """The k-induction step's counterexample ``cti``
    (:class:`~.kinduction.InductionCounterexample`) as the step into its last state."""
    layout = machine.spec.layout
    pre, post = cti.states[-2], cti.states[-1]
    return InductionFailure(
        "k-induction", named_values(layout, pre), machine.label(cti.actions[-1]),
        state_changes(layout, pre, post), list(cti.broken), _core(layout, pre, generalise),
        [machine.label(a) for a in cti.actions[:-1]])


def from_block(machine, cti, broken: Sequence[str], lemma_text: str | None,
               generalise: Generalise | None = None) -> InductionFailure:
    """The lemma loop's last counterexample ``cti`` (:class:`~.lemmas.BlockCounterexample`):
    a state breaking the invariants ``broken``, or a step out of the lemma ``lemma_text``."""
    layout = machine.spec.layout
    if cti.action is None:
        return InductionFailure("inductive invariant", named_values(layout, cti.state), None, [],
                                list(broken), _core(layout, cti.state, generalise), [])
    return InductionFailure(
        "inductive invariant", named_values(layout, cti.state), machine.label(cti.action),
        state_changes(layout, cti.state, cti.next_state), [lemma_text or "the lemmas"],
        _core(layout, cti.state, generalise), [])


def _by_field(values: dict[str, Any]) -> list[tuple[str, str]]:
    rows: dict[str, list[str]] = {}
    for name, label in values.items():
        field, _, index = name.partition("[")
        rows.setdefault(field, []).append(f"{index[:-1]}: {label}" if index else str(label))
    return [(field, "  ".join(cells)) for field, cells in rows.items()]


def render_failure(scenario: str, failure: InductionFailure) -> Group:
    """``failure`` as plain lines: the step, the conjunct it breaks, the state it starts from
    (one line per field), and what makes that state unreachable."""
    head = Text(f"{scenario}: {failure.method}: counterexample to induction", style="yellow")
    lines: list[Any] = [head]
    if failure.path:
        lines.append(Text(f"  after {len(failure.path)} step(s) that keep the invariants: "
                          + ", ".join(failure.path)))
    if failure.action is None:
        lines.append(Text("  this state breaks " + ", ".join(failure.breaks), style="bold"))
    else:
        lines.append(Text(f"  {failure.action} from this state breaks " + ", ".join(failure.breaks),
                          style="bold"))
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
    table.add_column(style="dim")
    table.add_column(overflow="fold")
    for field, cells in _by_field(failure.state):
        table.add_row(field, cells)
    lines.append(Padding(table, (0, 0, 0, 4), expand=False))
    if failure.changes:
        lines.append(Text("  the step changes: " + ", ".join(f"{n} {a} → {b}" for n, a, b in failure.changes)))
    if failure.unreachable:
        lines.append(Text("  no reachable state has: " + " ∧ ".join(failure.unreachable)))
    return Group(*lines)
