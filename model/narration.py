"""How a protocol tells its traces: the vocabulary of narration, shared by every protocol.

A spec may narrate its concrete steps and states through the optional methods of
:class:`~.framework.Spec` (:meth:`~.framework.Spec.story`, :meth:`~.framework.Spec.lanes`,
:meth:`~.framework.Spec.messages`, :meth:`~.framework.Spec.page_maps`,
:meth:`~.framework.Spec.page_timelines`); the renderers of :mod:`kvproof.checker.report` draw
what they return and know nothing of any protocol.  These are the things returned:

* :class:`Note` - a remark on a step ("decode R1 reads p1 holding R0's KV"), ``hazard`` or not;
* :class:`Lane` and :class:`Message` - the participants of a sequence diagram and the arrows of a
  step between them;
* :class:`PageMap` - a table of one resource pool after a step (owner and content per page);
* :class:`PageTimeline` - one page through a whole trace: its events and its cell per step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

__all__ = ["Note", "Lane", "Message", "Cell", "PageMap", "PageEvent", "PageCell", "PageTimeline", "rename"]


def rename(text: str, names: Mapping[str, str]) -> str:
    """``text`` with each label of ``names`` that stands as a word replaced by its name (see
    :meth:`~.framework.Spec.display_names`): ``R0's KV`` reads ``R0@room0's KV``; ``R10``,
    ``PR0`` and an already named ``R0@room0`` are left alone."""
    if not names or not text:
        return text
    words = "|".join(re.escape(w) for w in sorted(names, key=len, reverse=True))
    return re.sub(rf"(?<![\w@])({words})(?![\w@])", lambda m: names[m.group(1)], text)


@dataclass(frozen=True)
class Note:
    """One remark on a step; ``level`` is ``info`` or ``hazard`` (rendered highlighted)."""

    level: str
    text: str


@dataclass(frozen=True)
class Lane:
    """One participant of a sequence diagram: ``key`` in data, ``title`` on screen."""

    key: str
    title: str


@dataclass(frozen=True)
class Message:
    """One arrow (or note) of a step.

    ``kind`` is ``request``, ``message``, ``write``, ``read``, ``reserve``, ``release``,
    ``lost`` (a message that never arrives), ``note`` (on one lane: ``src == dst``) or ``tick``
    (across every lane: ``src`` and ``dst`` are ``None``).  ``hazard`` marks an isolation
    failure; ``violation`` the hazards of a counterexample's last step.
    """

    step: int
    src: str | None
    dst: str | None
    text: str
    kind: str
    hazard: bool = False
    violation: bool = False

    @property
    def violating_read(self) -> bool:
        """This is the read after which the claim fails."""
        return self.violation and self.kind == "read"


@dataclass(frozen=True)
class Cell:
    """One cell of a :class:`PageMap`; ``hazard`` highlights it (and a ``!`` mark in its text
    keeps that visible without colour)."""

    text: str
    hazard: bool = False


@dataclass(frozen=True)
class PageMap:
    """One pool after a step: a title, a column per page, and labelled rows of cells."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Cell, ...]], ...]


@dataclass(frozen=True)
class PageEvent:
    """Something that happened to a page at ``step``; ``hazard`` when it breaks isolation."""

    step: int
    text: str
    hazard: bool = False


@dataclass(frozen=True)
class PageCell:
    """A page after one step: its owner and content labels; ``foreign`` when it is owned and
    holds another request's data."""

    owner: str
    content: str
    foreign: bool


@dataclass(frozen=True)
class PageTimeline:
    """One page through a trace: ``cells[k]`` is the page after step ``k`` (0 = initial)."""

    page: str
    pool: str
    events: tuple[PageEvent, ...]
    cells: tuple[PageCell, ...] = field(default_factory=tuple)

    def sentence(self) -> str:
        """The page's story in one line: ``p3: R1 reserved → released by timeout → ...``."""
        return f"{self.page}: " + " → ".join(e.text for e in self.events)

    @property
    def hazard(self) -> bool:
        """Some event of this page breaks isolation."""
        return any(e.hazard for e in self.events)
