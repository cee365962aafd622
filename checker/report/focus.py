"""Following one page, one request or one field through a long trace (``show --only``).

A :class:`Focus` is a set of tokens: a field name (``owner``, ``wr``), an index label (a request
``R1``, a page ``p3``: whatever labels the protocol's fields give their indices), or a field element (``owner[p3]``).  A changed
field matches when its name, one of its indices, or its old or new value is a token, so
``--only p3`` also shows ``dest[R1, chunk 0]: none → p3`` (the page being handed to R1).  A
note or a message matches when it mentions a token as a word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvproof.checker.traces import Trace

__all__ = ["Focus", "FocusError"]


class FocusError(ValueError):
    """A token that names nothing in the trace (one line, for exit code 3)."""


@dataclass(frozen=True)
class Focus:
    """The tokens to follow; an empty focus matches everything."""

    tokens: tuple[str, ...] = ()

    @classmethod
    def of(cls, trace: Trace, tokens: list[str] | None) -> "Focus":
        """Validate ``tokens`` against ``trace``'s fields and index labels."""
        tokens = [t for t in (tokens or []) if t]
        known = _vocabulary(trace)
        for t in tokens:
            base = t.split("[", 1)[0]
            if t not in known and base not in known:
                raise FocusError(f"--only {t}: not a field or an index label of this trace "
                                 f"(fields: {', '.join(f.name for f in trace.machine.spec.layout.fields)}; "
                                 f"labels: {_label_ranges(trace)})")
        return cls(tuple(tokens))

    def __bool__(self) -> bool:
        return bool(self.tokens)

    def change(self, name: str, old, new) -> bool:
        """The change ``name: old → new`` concerns a token."""
        if not self.tokens:
            return True
        base, _, rest = name.partition("[")
        indices = [i.strip() for i in rest.rstrip("]").split(",")] if rest else []
        words = {name, base, str(old), str(new), *indices}
        return any(t in words for t in self.tokens)

    def text(self, text: str, names: dict[str, str] | None = None) -> bool:
        """``text`` mentions a token as a word, or the name renderings show for it (``names``,
        the step's :attr:`~kvproof.checker.traces.Trace.names`: ``R0`` is ``R0@room0``)."""
        if not self.tokens:
            return True
        words = [*self.tokens, *[names[t] for t in self.tokens if t in (names or {})]]
        return any(re.search(rf"(?<![\w\[]){re.escape(t)}(?![\w\]@])", text) for t in words)


def _vocabulary(trace: Trace) -> set[str]:
    spec = trace.machine.spec
    words = {f.name for f in spec.layout.fields}
    for f in spec.layout.fields:
        for d in f.dims:
            if d.labels:
                words.update(d.labels)
    return words


def _label_ranges(trace: Trace) -> str:
    """``R0..R2 (req), p0..p3 (page)``: the first and last label of every labelled index domain."""
    seen, out = set(), []
    for f in trace.machine.spec.layout.fields:
        for d in f.dims:
            if d.labels and d.name not in seen:
                seen.add(d.name)
                out.append(f"{d.labels[0]}..{d.labels[-1]} ({d.name})" if len(d.labels) > 1 else f"{d.labels[0]} ({d.name})")
    return ", ".join(out) or "none"
