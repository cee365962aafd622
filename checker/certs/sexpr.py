"""SMT-LIB text read into terms: the lexer and parser of every certificate, with stated limits.

A certificate is data from a user, so it is read here into terms before anything else looks at
it, and only the subset of SMT-LIB 2.6 that kvproof writes is accepted: parentheses, simple
symbols, ``|quoted symbols|`` on one line, numerals, and whole-line ``;`` comments between
commands.  String literals, keywords (``:named``), hexadecimal, binary and decimal literals,
comments inside a command, an unbalanced parenthesis, a term nested deeper than
:data:`MAX_DEPTH` or a script of more than :data:`MAX_NODES` symbols and lists are refused with
one line (:class:`SexprError`) naming the line and column, before any term is built past the
limit.  The parser is iterative, so a 300,000-deep term costs nothing but its refusal.

Terms are plain Python values: a symbol or numeral is a ``str`` (as written, ``|x|`` keeps its
bars), a list is a ``tuple`` of terms.  :func:`render` writes a term back as one line, the way
kvproof's writers write it, so a script rebuilt from parsed terms is the text the writer wrote,
never the file's raw text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Union

__all__ = ["Term", "Command", "Comment", "Item", "SexprError", "parse_script", "render", "free_symbols",
           "MAX_DEPTH", "MAX_NODES", "MAX_CHARS"]

Term = Union[str, tuple]
"""A symbol or numeral (``str``) or a list of terms (``tuple``)."""

MAX_DEPTH = 256
"""The deepest nesting accepted (the committed certificates nest at most 20 deep)."""
MAX_NODES = 4_000_000
"""The most symbols, numerals and lists a script may hold (the largest committed certificate,
all sizes of v0.5.22, holds about 120,000)."""
MAX_CHARS = 64 * 1024 * 1024
"""The longest script accepted, in characters (the largest committed one is 0.6 million)."""

_TOKEN = re.compile(r"[()]|\|[^|\\\n\r]*\||;[^\n]*|[^\s()|;]+|\S")  # whitespace falls between tokens
_ATOM = re.compile(r"(?:0|[1-9][0-9]*)|[A-Za-z~!@$%^&*_+=<>.?/\-][A-Za-z0-9~!@$%^&*_+=<>.?/\-]*|\|[^|\\\n\r]*\|")

_WHAT = {'"': "a string literal", ":": "a keyword", "#": "a hexadecimal or binary literal",
         "|": "an unterminated or multi-line |quoted symbol|", "\\": "a backslash"}


class SexprError(ValueError):
    """Text that is not a script of the accepted SMT-LIB subset (one line: what and where)."""


@dataclass(frozen=True)
class Command:
    """A top-level term (an SMT-LIB command) and the line it starts on (1-based)."""

    term: tuple
    line: int

    @property
    def head(self) -> str:
        """The command's name (``assert``, ``declare-fun`` …), or ``""`` for an empty list or
        a list that starts with a list."""
        return self.term[0] if self.term and isinstance(self.term[0], str) else ""


@dataclass(frozen=True)
class Comment:
    """A whole-line comment between commands: its text without the ``;`` and one space, and its
    line."""

    text: str
    line: int


Item = Union[Command, Comment]
"""What a script is a sequence of."""


def parse_script(text: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> list[Item]:
    """The commands and comments of ``text`` in order; :class:`SexprError` (one line naming the
    line and column) for anything outside the accepted subset or past a limit."""
    if len(text) > MAX_CHARS:
        raise SexprError(f"longer than {MAX_CHARS:,} characters")
    items: list[Item] = []
    stack: list[list] = []
    starts: list[tuple[int, int]] = []  # (line, token) where each open list began
    nodes = 0
    atoms: dict[str, bool] = {}  # each distinct atom checked once
    findall = _TOKEN.findall
    lineno = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        for k, tok in enumerate(findall(line)):
            c = tok[0]
            if c == "(":
                if len(stack) >= max_depth:
                    raise SexprError(f"{_where(line, lineno, k)}: a term nested more than {max_depth} deep")
                nodes += 1
                stack.append([])
                starts.append((lineno, k))
            elif c == ")":
                if not stack:
                    raise SexprError(f"{_where(line, lineno, k)}: an unbalanced ')'")
                done = tuple(stack.pop())
                start = starts.pop()
                if stack:
                    stack[-1].append(done)
                else:
                    items.append(Command(done, start[0]))
            elif c == ";":
                if stack:
                    raise SexprError(f"{_where(line, lineno, k)}: a comment inside a command")
                if k:
                    raise SexprError(f"{_where(line, lineno, k)}: a comment after a command on the same line")
                body = tok[1:]
                items.append(Comment(body[1:] if body.startswith(" ") else body, lineno))
            else:  # a symbol, a quoted symbol or a numeral
                ok = atoms.get(tok)
                if ok is None:
                    ok = atoms[tok] = _ATOM.fullmatch(tok) is not None
                if not ok:
                    what = _WHAT.get(c) or next((_WHAT[x] for x in tok if x in _WHAT), None) or f"the token {tok[:40]!r}"
                    raise SexprError(f"{_where(line, lineno, k)}: {what}, which kvproof never writes")
                if not stack:
                    raise SexprError(f"{_where(line, lineno, k)}: {tok[:40]!r} outside any command")
                nodes += 1
                stack[-1].append(tok)
            if nodes > max_nodes:
                raise SexprError(f"{_where(line, lineno, k)}: more than {max_nodes:,} symbols and lists")
    if stack:
        line_no, k = starts[-1]
        raise SexprError(f"{_where(text.split(chr(10))[line_no - 1], line_no, k)}: an unbalanced '(' "
                         "(the command is never closed)")
    return items


def _where(line: str, lineno: int, k: int) -> str:
    """``line N, column C`` of the ``k``-th token of ``line``."""
    for i, m in enumerate(_TOKEN.finditer(line)):
        if i == k:
            return f"line {lineno}, column {m.start() + 1}"
    return f"line {lineno}"


def render(term: Term) -> str:
    """``term`` as one line of SMT-LIB text, one space between the items of a list."""
    if isinstance(term, str):
        return term
    out: list[str] = []
    stack: list[Iterator | str] = [iter((term,))]
    while stack:
        top = stack[-1]
        if isinstance(top, str):
            out.append(stack.pop())
            continue
        nxt = next(top, None)
        if nxt is None:
            stack.pop()
            continue
        if out and out[-1] != "(":
            out.append(" ")
        if isinstance(nxt, str):
            out.append(nxt)
        else:
            out.append("(")
            stack.append(")")
            stack.append(iter(nxt))
    return "".join(out)


_BINDERS = ("forall", "exists")


def free_symbols(term: Term) -> set[str]:
    """The symbols ``term`` mentions outside the variables its ``forall``, ``exists`` and
    ``let`` bind (numerals and the sorts named in a binder's variable list left out)."""
    out: set[str] = set()
    stack: list[tuple[Term, frozenset]] = [(term, frozenset())]
    while stack:
        t, bound = stack.pop()
        if isinstance(t, str):
            if t not in bound and not t[0].isdigit():
                out.add(t)
            continue
        if len(t) == 3 and t[0] in _BINDERS and isinstance(t[1], tuple):
            names = [v[0] for v in t[1] if isinstance(v, tuple) and v and isinstance(v[0], str)]
            stack.append((t[2], bound | frozenset(names)))
            continue
        if len(t) == 3 and t[0] == "let" and isinstance(t[1], tuple):
            names = []
            for v in t[1]:
                if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
                    names.append(v[0])
                    stack.append((v[1], bound))  # let binds in parallel: values see the outer scope
                else:
                    stack.append((v, bound))
            stack.append((t[2], bound | frozenset(names)))
            continue
        stack.extend((c, bound) for c in t)
    return out
