"""The protocol-neutral half of ``kvproof audit``: reading a launch line and an environment,
checking a scenario family, and printing the settings, the hazards and the verdict.

An engine's audit (each protocol's ``audit`` command, :class:`~kvproof.model.protocol.Protocol`) knows its flags,
variables, releases, scenario family, remedies and what each violated claim means for a
deployment; this module knows none of them.  It gives the engines:

* input: :func:`assignment` (``NAME=VALUE``), :func:`read_env_file`, :func:`parse_engine`
  (``ENGINE==VERSION``), :func:`command_words` (a launch line quoted as one word),
  :func:`take_assignments` (the ``NAME=VALUE`` words in front of a command),
  :func:`split_flags` (flags and their values), :func:`seconds` and :func:`count` (checked
  values), :func:`launch_command` and :func:`environment` (the command's ``--`` and ``--env``
  / ``--env-file`` arguments);
* the records: :class:`Launch`, :class:`SettingsBase` (what every engine's ``Settings``
  records besides its own values), :class:`Member`, :class:`Hazard`, :class:`AuditReport` (the
  exit code);
* checking: :func:`check` and :func:`check_family`;
* output: :func:`header`, :func:`body`, :func:`emit`, :func:`nothing_to_audit` and
  :func:`conclude` (limits, traces, the printed report and the exit code).

Exit codes: 1 exposed; 0 not exposed; 2 cannot decide (a search cut short, a setting the model
does not cover, or a handoff setting kvproof does not know); 3 bad input (raised by the caller's
``bad``, the command line's one-line error).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kvproof.checker.outcome import WORDINGS, Inconclusive, Verified, Violated, exit_code, worded
from kvproof.model.scenario import Scenario

__all__ = ["EXIT_NOT_EXPOSED", "EXIT_EXPOSED", "EXIT_UNDECIDED", "assignment", "read_option_file", "read_env_file", "take_prefix_environment", "parse_engine",
           "command_words", "take_assignments", "split_flags", "seconds", "count", "Launch", "SettingsBase", "Member",
           "Hazard", "Reading", "AuditReport", "check", "check_family", "launch_command", "environment", "header", "body",
           "emit", "nothing_to_audit", "conclude", "reading_lines", "report_json", "summary",
            "nothing_to_audit_json", "reading_json", "undecided_code", "undecided_outcome", "NOT_EXPOSED"]

NOT_EXPOSED = WORDINGS["audit"][Verified]
"""What a deployment is expected to be: the audit's outcomes are judged against it."""

EXIT_NOT_EXPOSED, EXIT_EXPOSED, EXIT_UNDECIDED = (exit_code([(worded("audit", *o), NOT_EXPOSED)])
                                                  for o in ((Verified,), (Violated,), (Inconclusive, "")))
"""The audit's exit codes, from :func:`kvproof.checker.outcome.exit_code` of its outcomes: not
exposed (every claim holds), exposed (a claim is violated), cannot decide (inconclusive); bad
input, 3, is the command line's."""


def undecided_outcome(undecided: Sequence[str]):
    """The outcome of a launch with no KV handoff: not exposed, or cannot decide when something
    given was not read (``undecided``) and could have set one up."""
    if undecided:
        return worded("audit", Inconclusive, "not read, could set up a KV handoff: " + "; ".join(undecided))
    return worded("audit", Verified)


def undecided_code(undecided: Sequence[str]) -> int:
    """The exit code of :func:`undecided_outcome`."""
    return exit_code([(undecided_outcome(undecided), NOT_EXPOSED)])

# -- reading the input ----------------------------------------------------------------------------


def assignment(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (the value may be quoted) -> (name, value); ``ValueError`` otherwise."""
    name, sep, value = text.partition("=")
    if not sep or not _is_name(name):
        raise ValueError(text)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    elif value[:1] in ("'", '"'):
        raise ValueError(text)
    return name, value


def _is_name(word: str) -> bool:
    return bool(word) and (word[0].isalpha() or word[0] == "_") and all(c.isalnum() or c == "_" for c in word)


class _Unreadable(Exception):
    """A file an option names that cannot be read as text (:func:`read_option_file`)."""


def read_option_file(path: str | Path, flag: str, expected: str, bad) -> str:
    """The UTF-8 text of the file that option ``flag`` names
    (:func:`kvproof.model.files.read_user_text`); a file that cannot be read, or is not UTF-8
    text, is one line of bad input (``bad``) naming the option, the file and what was
    ``expected``."""
    from kvproof.model.files import read_user_text

    try:
        return read_user_text(Path(path), _Unreadable, expected)
    except _Unreadable as e:
        raise bad(f"{flag} {e}") from None


def read_env_file(path: str, bad) -> dict[str, str]:
    """``NAME=VALUE`` lines (``export`` in front, quotes around the value, blank lines and
    ``#`` comments allowed); a line that is none of these is one line of bad input naming the
    file and line."""
    text = read_option_file(path, "--env-file", "an environment file (NAME=VALUE lines)", bad)
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].strip()
        try:
            name, value = assignment(line)
        except ValueError:
            shown = raw if len(raw) <= 60 else raw[:57] + "..."
            raise bad(f"{path}:{n}: expected NAME=VALUE, got {shown!r}") from None
        out[name] = value
    return out


def parse_engine(text: str, engine: str, releases: Mapping[str, Any], example: str, bad) -> Any:
    """``ENGINE==VERSION`` -> ``releases[VERSION]`` when ENGINE is ``engine``; anything else is
    bad input naming the known ``engine==VERSION`` (``example``: a version for the message)."""
    known = ", ".join(f"{engine}=={v}" for v in releases)
    name, sep, version = text.partition("==")
    if not sep or not name or not version:
        raise bad(f"{text}: expected ENGINE==VERSION, e.g. {engine}=={example} (known: {known})")
    if name.strip().lower() != engine or version.strip() not in releases:
        raise bad(f"{text}: unknown engine version; known: {known}")
    return releases[version.strip()]


def command_words(command: Sequence[str], bad) -> list[str]:
    """The launch command's words; a whole line quoted as one word is split as a shell would
    (unbalanced quotes are bad input)."""
    words = list(command)
    if len(words) == 1 and " " in words[0].strip():
        try:
            words = shlex.split(words[0])
        except ValueError as e:
            raise bad(f"the launch command: {e}") from None
    return words


def take_assignments(words: list[str]) -> dict[str, str]:
    """Remove the leading ``NAME=VALUE`` words of ``words`` (up to the first word that is not
    one) and return them, in order."""
    env: dict[str, str] = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        try:
            name, value = assignment(words[0])
        except ValueError:
            break
        env[name] = value
        words.pop(0)
    return env


def take_prefix_environment(words: list[str]) -> dict[str, str]:
    """Remove a launch command's environment prefix from ``words`` and return it: leading
    ``NAME=VALUE`` words, then any number of ``env NAME=VALUE ...`` groups (``A=1 env B=2 env
    C=3 engine serve``), later assignments overriding earlier ones, as a shell would."""
    env = take_assignments(words)
    while words and words[0] == "env":
        words.pop(0)
        env.update(take_assignments(words))
    return env


def split_flags(words: Sequence[str], boolean_flags: Sequence[str], joined: str = "-") -> list[tuple[str, str | None]]:
    """A program's arguments as (flag, value) pairs: ``--flag=value`` (for flags starting with
    ``joined``), ``--flag value``, or ``(flag, None)`` for a flag of ``boolean_flags``, one
    followed by another ``--`` flag, or the last word; a positional word is ``("", word)``."""
    flags: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-") or w == "-":
            flags.append(("", w))  # a positional word: listed as unknown
            i += 1
            continue
        name, sep, value = w.partition("=") if w.startswith(joined) else (w, "", "")
        if sep:
            flags.append((name, value))
            i += 1
        elif name in boolean_flags or i + 1 >= len(words) or words[i + 1].startswith("--"):
            flags.append((name, None))
            i += 1
        else:
            flags.append((name, words[i + 1]))
            i += 2
    return flags


def seconds(name: str, value: Any, bad) -> float:
    """A duration in seconds, finite and > 0 (from a variable's text or a JSON value; a JSON
    boolean is refused); anything else is bad input naming ``name=value``."""
    if isinstance(value, bool):
        raise bad(f"{name}={value}: expected a number of seconds > 0")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise bad(f"{name}={value}: expected a number of seconds") from None
    if not v > 0 or v == float("inf"):
        raise bad(f"{name}={value}: expected a number of seconds > 0")
    return v


def count(flag: str, value: str | None, bad) -> int:
    """A flag's whole number >= 1 (a parallel size); anything else is bad input."""
    try:
        v = int(value or "")
    except ValueError:
        raise bad(f"{flag} {value}: expected a whole number >= 1") from None
    if v < 1:
        raise bad(f"{flag} {value}: expected a whole number >= 1")
    return v


@dataclass
class Reading:
    """A launch line as the engine's own parser read it (or the flag table generated from it)."""

    values: dict[str, Any]
    """Destination -> value, as parsed, for every setting that differs from the parser's default
    (from the command line or a config file it merged)."""
    passthrough: list[str]
    """Words the engine's parser did not take: a wrapper's own flags, listed as such."""
    config_files: list[str]
    """Config files the parser merged."""
    unread: list[str]
    """What was given and is not read (kvproof cannot tell what it sets): a clean verdict cannot be
    claimed while there is any."""
    how: str
    """Which parser read the line (the installed engine's, or a generated table's)."""
    notes: list[str] = field(default_factory=list)
    """What the reader says about its own reading (e.g. a table of another version)."""
    launcher: str = ""
    """The launch command recognised (the engine's own server command, or a wrapper that passes its
    arguments through)."""
    options: dict[str, str] = field(default_factory=dict)
    """Destination -> the option that sets it (its first long spelling), to show a setting as a flag."""

    def shown(self, dest: str) -> str:
        """A setting as a flag and its value (``--tp-size 2``; a flag alone when its value is true)."""
        flag = self.options.get(dest, dest)
        v = self.values.get(dest)
        return flag if v is True else f"{flag} {v if isinstance(v, str) else _json_text(v)}"


def _json_text(v: Any) -> str:
    import json

    try:
        return json.dumps(v, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(v)


@dataclass
class Launch:
    """A launch command split into its environment prefix, its flags (name, value; name ``""``
    for a positional word) and the program."""

    env: dict[str, str]
    flags: list[tuple[str, str | None]]
    program: str


@dataclass
class SettingsBase:
    """What every engine's reading of a deployment records besides its own values (an engine's
    ``Settings`` subclasses it and adds them)."""

    release: Any
    """The release audited: the engine's ``Release``, with ``version`` and ``basis`` (why it is
    modelled so)."""
    source: dict[str, str] = field(default_factory=dict, kw_only=True)
    """Setting name -> ``command``, ``--env``, ``--env-file``, ``default``, ``assumed``."""
    unknown: list[str] = field(default_factory=list, kw_only=True)
    """Flags, keys and variables kvproof does not know, as given."""
    abstracted: list[str] = field(default_factory=list, kw_only=True)
    """Known flags whose values the model abstracts."""
    inert: list[str] = field(default_factory=list, kw_only=True)
    """Known flags, keys and variables with no part in the KV lifecycle."""
    unmodelled: list[str] = field(default_factory=list, kw_only=True)
    """Settings the model does not cover: the search ran on the nearest modelled configuration,
    so a clean result cannot be claimed."""


# -- the family and its checks --------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """One scenario of the family and the trigger it exercises."""

    key: str
    trigger: str
    scenario: Scenario


@dataclass
class Hazard:
    """A claim violated in one member of the family, with its shortest trace."""

    claim: str
    member: Member
    depth: int
    trace: Any
    trace_path: Path | None = None
    remedies: list[str] = field(default_factory=list)
    """The candidate changes that remove it when re-checked, as printed."""
    also: list[str] = field(default_factory=list)
    """Other members' triggers where the same claim is violated (an engine that keeps one
    hazard per claim)."""


@dataclass
class AuditReport:
    """What the audit found."""

    settings: SettingsBase
    members: list[Member]
    states: dict[str, int]
    hazards: list[Hazard]
    cut_short: list[str]
    lifecycle_prefixes: tuple[str, ...] = ()
    """Names that belong to the KV handoff: one of these that kvproof does not know makes a
    clean verdict undecidable."""

    @property
    def outcome(self):
        """What the audit found, in its own words (:data:`~kvproof.checker.outcome.WORDINGS`):
        cannot decide when the checked model is not the deployment (a setting it does not
        cover, an unknown handoff setting); else exposed when a hazard was found (a violation
        found stands even if another search was cut short); else cannot decide when a search
        was cut short; else not exposed."""
        if self.settings.unmodelled or self.undecided_unknown():  # the model checked is not the deployment
            return worded("audit", Inconclusive, "the model checked is not the deployment")
        if self.hazards:
            return worded("audit", Violated, self.hazards[0].trace)
        if self.cut_short:
            return worded("audit", Inconclusive, "a limit cut a search short")
        return worded("audit", Verified)

    @property
    def exit_code(self) -> int:
        """The exit code of :attr:`outcome` against :data:`NOT_EXPOSED` (1 exposed, 2 cannot
        decide, 0 not exposed)."""
        return exit_code([(self.outcome, NOT_EXPOSED)])

    def undecided_unknown(self) -> list[str]:
        """Unknown names that belong to the KV handoff (they could change the verdict)."""
        return [u for u in self.settings.unknown if u.startswith(self.lifecycle_prefixes)]


def check(member: Member, claims: Sequence[str], limits):
    """The explicit engine's report on ``claims`` in ``member``'s scenario."""
    from kvproof.checker.explicit.run import check_scenario

    return check_scenario(member.scenario, limits, list(claims))


def check_family(members: Sequence[Member], claims: Sequence[str], limits=None
                 ) -> tuple[dict[str, int], list[str], list[Hazard]]:
    """Check ``claims`` in every member: (states searched per member key, the searches cut
    short, one :class:`Hazard` per violated claim per member, in member then claim order)."""
    from kvproof.checker.explicit.search import Limits

    limits = limits or Limits()
    states: dict[str, int] = {}
    cut: list[str] = []
    found: list[Hazard] = []
    for m in members:
        rep = check(m, claims, limits)
        states[m.key] = rep.stats.states
        if not rep.complete:
            cut.append(f"{m.scenario.name}: {rep.reason}")
        for c in rep.claims:
            if c.verdict == "violated":
                found.append(Hazard(c.claim, m, c.depth or 0, c.result.trace))
    return states, cut, found


# -- the command ----------------------------------------------------------------------------------


def launch_command(args: Any, example: str, bad) -> list[str]:
    """The launch command after ``--`` (``args.launch``); none is bad input showing
    ``example``."""
    command = list(args.launch or [])
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise bad(f"audit: expected the launch command after --, e.g. -- {example}")
    return command


def environment(args: Any, launch: Launch, bad) -> dict[str, tuple[str, str]]:
    """The environment given explicitly, name -> (value, where it came from): ``--env-file``
    files, then ``--env`` items, then the command's prefix, each overriding the one before.
    The process's own environment is never read."""
    env: dict[str, tuple[str, str]] = {}
    for path in args.env_file or []:
        for k, v in read_env_file(path, bad).items():
            env[k] = (v, "--env-file")
    for item in args.env or []:
        try:
            k, v = assignment(item)
        except ValueError:
            raise bad(f"--env {item}: expected NAME=VALUE") from None
        env[k] = (v, "--env")
    for k, v in launch.env.items():
        env[k] = (v, "command")
    return env


def header(engine: str, s: SettingsBase, rows: list[tuple[str, str, str]] | None, where_width: int,
           abstracted_why: str) -> list[str]:
    """The release and its basis, the settings table (``rows``: setting, where from, meaning in
    the model; ``None``: no table), and the known-abstracted, known-inert and unknown names."""
    lines = [f"{engine}=={s.release.version}: {s.release.basis}"]
    if rows is not None:
        lines.append("settings (value, from, in the model):")
        width = max((len(r[0]) for r in rows), default=0)
        for name, where, meaning in rows:
            lines.append(f"  {name:<{width}}  {where:<{where_width}}  {meaning}")
    if s.abstracted:
        lines.append(f"known, abstracted by the model ({abstracted_why}): " + ", ".join(s.abstracted))
    if s.inert:
        lines.append("known, no part in the isolation checks: " + ", ".join(s.inert))
    if s.unknown:
        lines.append(f"not known to kvproof, not modelled ({len(s.unknown)}): " + ", ".join(s.unknown))
    return lines


def body(r: AuditReport, hazards: Mapping[str, str], no_fix: str) -> list[str]:
    """The members checked, each hazard (``hazards``: claim -> what it means for the deployment)
    with its trace and remedies (``no_fix`` where none worked), what is not modelled or was cut
    short, and the verdict."""
    s = r.settings
    lines = ["checked: " + ", ".join(f"{m.scenario.name} ({r.states[m.key]:,} states)" for m in r.members)]
    if r.hazards:
        lines.append(f"exposed to {len(r.hazards)} {'hazard' if len(r.hazards) == 1 else 'hazards'}:")
    for i, h in enumerate(r.hazards, 1):
        where = f", written to {h.trace_path}" if h.trace_path else ""
        lines.append(f"  {i}. {hazards[h.claim]} ({h.claim}), after {h.member.trigger}"
                     + (f" (also after {'; '.join(h.also)})" if h.also else ""))
        lines.append(f"     shortest trace: {h.depth} steps{where}")
        fix = "; or ".join(h.remedies) if h.remedies else no_fix
        lines.append(f"     removed by: {fix}")
    for reason in s.unmodelled:
        lines.append(f"not modelled: {reason}")
    for c in r.cut_short:
        lines.append(f"search cut short: {c}")
    lifecycle = r.undecided_unknown()
    if lifecycle:
        lines.append("unknown handoff settings could change the verdict: " + ", ".join(lifecycle))
    code = r.exit_code
    verdict = r.outcome.verdict
    if code == EXIT_UNDECIDED and r.hazards:
        verdict += f" (the model checked is exposed to {len(r.hazards)})"
    elif code == EXIT_UNDECIDED and r.cut_short and not s.unmodelled and not lifecycle:
        verdict += " (inconclusive: a limit cut a search short)"
    if code == EXIT_NOT_EXPOSED and s.unknown:
        verdict += " (assuming the flags kvproof does not know leave the KV handoff alone)"
    lines.append(f"verdict: {verdict}")
    return lines


def emit(out: Any, lines: list[str]) -> None:
    """Print ``lines`` on the console ``out`` as they are (no markup, no highlighting, no
    wrapping)."""
    for line in lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)


def nothing_to_audit(out: Any, lines: list[str], why: str, engine: str = "", release: Any = None,
                     undecided: Sequence[str] = ()) -> int:
    """Print the header ``lines`` and ``why`` the launch has no KV handoff, then the closing line;
    exit 0, or 2 when something given was not read (``undecided``: a config file, a wrapper's
    flags) and could have set one up."""
    from kvproof.checker.outcome import Summary

    found = undecided_outcome(undecided)
    extra = [f"not read, could set up a KV handoff: {u}" for u in undecided]
    emit(out, [*lines, why, *extra, f"verdict: {found.verdict}"])
    return _nothing_summary(engine, release, undecided).print(out)


def _nothing_summary(engine: str, release: Any, undecided: Sequence[str]):
    """The closing line of a launch with no KV handoff."""
    from kvproof.checker.outcome import Summary

    found = undecided_outcome(undecided)
    return Summary("audit", f"{engine}=={getattr(release, 'version', '')}, no KV handoff", 0, 0,
                   int(bool(undecided)), undecided_code(undecided), found.verdict, found.verdict)


def reading_lines(r: Reading) -> list[str]:
    """How the line was read: the launcher, the parser (the engine's own or its generated table),
    config files merged, the reader's notes, and words a wrapper's parser kept for itself."""
    lines = [f"read: {r.launcher} by {r.how}"]
    if r.config_files:
        lines.append("config files merged by the parser: " + ", ".join(r.config_files))
    lines += [f"note: {n}" for n in r.notes]
    if r.passthrough:
        lines.append("not taken by the engine's parser (the launcher's own): " + " ".join(r.passthrough))
    return lines


def report_json(engine: str, r: AuditReport, reading: Reading | None, rows: list[tuple[str, str, str]] | None,
                hazards: Mapping[str, str], no_fix: str) -> dict[str, Any]:
    """The audit as one JSON object: the engine, how the line was read, the settings read (the
    parser's values and the model's mapping), what is unknown, abstracted, inert or not
    modelled, the members checked, each claim's verdict per member, the hazards with their
    traces and remedies, and the verdict."""
    s = r.settings
    found = {(h.member.key, h.claim) for h in r.hazards}
    claim_words = WORDINGS["audit claim"]
    also = {(m.key, h.claim) for h in r.hazards for m in r.members if m.trigger in h.also}
    return {
        "engine": f"{engine}=={s.release.version}", "basis": s.release.basis,
        "reading": None if reading is None else reading_json(reading),
        "settings": [{"setting": a, "from": b, "in_model": c} for a, b, c in (rows or [])],
        "unknown": list(s.unknown), "handoff_unknown": r.undecided_unknown(), "abstracted": list(s.abstracted),
        "inert": list(s.inert), "unmodelled": list(s.unmodelled),
        "members": [{"key": m.key, "scenario": m.scenario.name, "trigger": m.trigger, "states": r.states.get(m.key)}
                    for m in r.members],
        "claims": [{"member": m.key, "claim": c,
                    "verdict": claim_words[Violated] if (m.key, c) in found or (m.key, c) in also else
                    (claim_words[Inconclusive] if any(x.startswith(m.scenario.name + ":") for x in r.cut_short)
                     else claim_words[Verified])}
                   for m in r.members for c in hazards],
        "hazards": [{"claim": h.claim, "meaning": hazards[h.claim], "member": h.member.key, "trigger": h.member.trigger,
                     "also_after": h.also, "depth": h.depth, "trace": str(h.trace_path) if h.trace_path else None,
                     "remedies": h.remedies or [], "no_remedy": None if h.remedies else no_fix} for h in r.hazards],
        "cut_short": list(r.cut_short),
    }


def reading_json(reading: Reading) -> dict[str, Any]:
    """How a line was read, as JSON (the ``reading`` object of ``audit --json``)."""
    return {"launcher": reading.launcher, "parser": reading.how,
            "values": {k: _plain(v) for k, v in reading.values.items()}, "config_files": reading.config_files,
            "passthrough": reading.passthrough, "notes": reading.notes}


def _plain(v: Any) -> Any:
    import json

    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return str(v)


def summary(engine: str, r: AuditReport, claims: int):
    """The closing line every command prints: the members and claims checked, how many hold
    (matched), are violated (mismatched) or were cut short (inconclusive), and the verdict."""
    from kvproof.checker.outcome import Summary, plural

    checked = len(r.members) * claims
    violated = len({(h.member.key, h.claim) for h in r.hazards}) + sum(len(h.also) for h in r.hazards)
    cut = len(r.cut_short) * claims
    meaning = r.outcome.verdict
    return Summary("audit", f"{engine}=={r.settings.release.version}, {plural(len(r.members), 'scenario')}, "
                            f"{plural(checked, 'claim')} (explicit search)",
                   max(0, checked - violated - cut), violated, cut, r.exit_code, meaning, meaning)


def conclude(args: Any, out: Any, lines: list[str], audit: Callable[[Any], AuditReport],
             hazards: Mapping[str, str], no_fix: str, engine: str = "", reading: Reading | None = None,
             rows: list[tuple[str, str, str]] | None = None, extra: Mapping[str, Any] | None = None) -> int:
    """Run ``audit(limits)`` with the command's limits (``args.max_states``,
    ``args.max_seconds``), write each hazard's trace to ``args.traces`` unless
    ``args.no_traces``, print the header ``lines``, the :func:`body` and the closing
    :func:`summary` line (with ``args.json``: one JSON object, :func:`report_json`, with the
    summary and ``extra``'s keys in it); return the exit code."""

    from kvproof.checker.explicit.search import Limits
    from kvproof.checker.traces import write_trace

    budget = getattr(args, "budget", None)  # --max-seconds: the command's budget (kvproof.checker.budget)
    limits = budget.limits(args.max_states) if budget is not None else Limits(args.max_states)
    report = audit(limits)
    if not args.no_traces:
        for h in report.hazards:
            h.trace_path = write_trace(h.trace, args.traces)
    done = summary(engine, report, len(hazards))
    if getattr(args, "json", False):
        return done.end(out, {**report_json(engine, report, reading, rows, hazards, no_fix), **(extra or {})})
    emit(out, [*lines, *body(report, hazards, no_fix)])
    return done.end(out)


def nothing_to_audit_json(args: Any, engine: str, release: Any, reading: Reading | None, why: str,
                          undecided: Sequence[str] = ()) -> bool:
    """With ``args.json``, print the JSON of a launch with no KV handoff (exit 0; 2 with
    ``undecided``) and say so."""
    if not getattr(args, "json", False):
        return False
    _nothing_summary(engine, release, undecided).end(None, {
        "engine": f"{engine}=={release.version}", "reading": None if reading is None else reading_json(reading),
        "hazards": [], "why": why, "not_read": list(undecided)})
    return True
