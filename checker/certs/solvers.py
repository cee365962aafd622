"""A certificate's obligations answered by fresh solver processes, one answer bound to each.

No kvproof encoding code is involved here.  The script a solver runs is rebuilt from the terms
the one reader (:mod:`.reader`) parsed, never the file's text, and before each obligation's
``(check-sat)`` it echoes a marker (``kvproof obligation N``).  A solver's output must be exactly
marker, answer, marker, answer …, one pair per obligation in order, and its process must exit
with status 0 within the time limit: an answer counts only when it follows its own obligation's
marker.  A solver that exits non-zero, crashes, runs out of time, prints an error or anything
else unexpected leaves the obligations it did not answer *not checked*, and then none of its
answers counts: never a pass.  Two solvers run, each in a process of its own:

* **stock z3**: the ``z3`` binary the z3-solver wheel installs beside the Python interpreter
  (or one on ``PATH``); if there is none, a separate Python process that gives the text to z3's
  own SMT-LIB interpreter (``Z3_eval_smtlib2_string``, what the binary runs) and prints its
  answers (:func:`z3_command` says which);
* **cvc5** (the ``cvc5`` wheel has no binary): a separate Python process (``python -I``, so
  nothing from the working directory is imported) in which cvc5's own SMT-LIB parser reads the
  script and executes it command by command.

For a **fixed-size** certificate (:func:`fixed_script`) the script is built so that the
*solvers* enforce what each definition may mention: ``typed`` and ``inv`` are defined as
functions whose only parameters are the pre-state bits, *before* any constant is declared, so an
``inv`` that mentions a post-state bit, the action tag ``action@pre`` or another definition is an
"unknown symbol" error in both solvers; ``init`` and ``safe`` are defined after the pre-state
bits and before the post-state bits and the tag; only ``trans`` sees everything.  ``inv'`` and
``typed'`` are the same functions applied to the post-state bits.  The obligations are the
standard three, whatever the file asserts.  (An invariant over the action tag would stand in
both states of the inductive step, so stock z3 could "prove" an invariant that is only closed
under each action *repeated*.)

For an **all-sizes** certificate (:func:`all_sizes_script`) the script is the file's prelude and
obligations as parsed, which :mod:`kvproof.checker.allsizes.prove` has held, term for term, against
today's parametric model with the file's invariant.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Sequence

from kvproof.checker.certs.limits import ResourceLimit
from kvproof.checker.certs.reader import FIXED_OBLIGATIONS, TAG, Certificate
from kvproof.checker.certs.sexpr import free_symbols, render

__all__ = ["SolverRun", "SolverJob", "Script", "fixed_script", "all_sizes_script", "script_for", "run_solvers",
           "z3_binary", "z3_command", "cvc5_command", "invariant_scope_problems", "MARKER", "NOT_CHECKED", "LOGIC"]

LOGIC = "QF_LIA"  # fixed-size: Booleans and the integer action tag; cvc5 is ~70x slower on the largest under ALL
MARKER = "kvproof obligation"
NOT_CHECKED = "not checked"
ANSWERS = ("sat", "unsat", "unknown")

# The cvc5 process: cvc5's own SMT-LIB parser, command by command, answers on stdout.
_CVC5 = """\
import sys
import cvc5
tm = cvc5.TermManager()
solver = cvc5.Solver(tm)
# quantified obligations: when e-matching is stuck, instantiate with ground terms before answering
# unknown (sound; the ranked all-sizes certificate's prefill_forward step needs it)
solver.setOption('full-saturate-quant', 'true')
if len(sys.argv) > 2 and sys.argv[2] != "0":  # resource units per check-sat (cvc5's rlimit-per)
    solver.setOption('rlimit-per', sys.argv[2])
sm = cvc5.SymbolManager(tm)
parser = cvc5.InputParser(solver, sm)
with open(sys.argv[1], encoding="utf-8") as f:
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, f.read(), "certificate")
try:
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        sys.stdout.write(cmd.invoke(solver, sm))
        sys.stdout.flush()
except Exception as e:
    print("(error " + repr(str(e).splitlines()[0] if str(e) else type(e).__name__) + ")")
    sys.exit(1)
"""

# Without a z3 binary: z3's SMT-LIB interpreter, in a process of its own, on the whole text.
_Z3_EVAL = """\
import sys
import z3
if len(sys.argv) > 2:  # resource units per check-sat (z3's rlimit)
    z3.set_param("rlimit", int(sys.argv[2]))
with open(sys.argv[1], encoding="utf-8") as f:
    text = f.read()
try:
    sys.stdout.write(z3.Z3_eval_smtlib2_string(z3.main_ctx().ref(), text))
except z3.Z3Exception as e:
    print("(error " + repr(str(e)) + ")")
    sys.exit(1)
"""


@dataclass
class SolverRun:
    """One solver's answers: ``answers`` per obligation (``unsat`` is discharged; ``not
    checked`` or ``error`` when no answer of this process counts), ``how`` the process that
    ran (e.g. the binary's path), ``problems`` one line per failure, naming the solver and the
    obligation."""

    solver: str
    how: str
    answers: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Script:
    """A script for the solvers: its text (markers included) and the obligations it asks, in
    order."""

    text: str
    obligations: tuple[str, ...]


def z3_binary() -> str | None:
    """The stock ``z3`` binary: the one the z3-solver wheel installs beside this Python, else
    one on ``PATH``; ``None`` if there is none."""
    exe = "z3.exe" if os.name == "nt" else "z3"
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        cand = folder / exe
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return shutil.which("z3")


def z3_command() -> tuple[list[str], str]:
    """(argv prefix, description) of stock z3: :func:`z3_binary`, or without one z3's SMT-LIB
    interpreter in a separate Python process."""
    found = z3_binary()
    if found:
        return [found, "-smt2"], f"z3 binary {found}"
    return [sys.executable, "-I", "-c", _Z3_EVAL], f"z3 {_version('z3-solver')} SMT-LIB interpreter, own process"


def cvc5_command() -> tuple[list[str], str]:
    """(argv prefix, description) of cvc5: its SMT-LIB parser in a separate Python process."""
    return [sys.executable, "-I", "-c", _CVC5], f"cvc5 {_version('cvc5')} SMT-LIB parser, own process"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def invariant_scope_problems(cert: Certificate) -> list[str]:
    """The symbols a fixed-size ``inv`` mentions that are not pre-state bits: post-state bits,
    the action tag, the other definitions (a readable line; the solvers refuse them anyway)."""
    banned = set(cert.post) | {TAG} | {n for n in cert.defs if n != "inv"}
    found = sorted(free_symbols(cert.defs["inv"]) & banned)
    if not found:
        return []
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return [f"inv mentions {shown}: an invariant may mention the pre-state bits only"]


def _marked(name_index: int) -> list[str]:
    return [f'(echo "{MARKER} {name_index}")', "(check-sat)"]


def fixed_script(cert: Certificate, logic: str = LOGIC) -> Script:
    """The three standard obligations over a fixed-size certificate's parsed definitions, scoped
    as the module docstring says."""
    d = {name: cert.text_of(name) for name in ("typed", "inv", "init", "safe", "trans")}
    params = " ".join(f"({b} Bool)" for b in cert.pre)
    xs, ys = " ".join(cert.pre), " ".join(cert.post)
    lines = [
        f"(set-logic {logic})",
        f"(define-fun typed ({params}) Bool {d['typed']})",
        f"(define-fun inv ({params}) Bool {d['inv']})",
        *[f"(declare-const {b} Bool)" for b in cert.pre],
        f"(define-fun init () Bool {d['init']})",
        f"(define-fun safe () Bool {d['safe']})",
        *[f"(declare-const {b} Bool)" for b in cert.post],
        f"(declare-const {TAG} Int)",
        f"(define-fun trans () Bool {d['trans']})",
    ]
    goals = {
        "init_implies_inv": f"(and init (typed {xs}) (not (inv {xs})))",
        "inv_is_inductive": f"(and (inv {xs}) (typed {xs}) trans (typed {ys}) (not (inv {ys})))",
        "inv_implies_safe": f"(and (inv {xs}) (typed {xs}) (not safe))",
    }
    for k, name in enumerate(FIXED_OBLIGATIONS):
        lines += ["(push 1)", f"(assert {goals[name]})", *_marked(k), "(pop 1)"]
    return Script("\n".join(lines) + "\n", FIXED_OBLIGATIONS)


def all_sizes_script(cert: Certificate) -> Script:
    """An all-sizes certificate's prelude and obligations, as parsed, with a marker before each
    ``(check-sat)``."""
    lines = ["(set-logic ALL)", *[render(t) for t in cert.prelude]]
    for k, ob in enumerate(cert.obligations):
        lines += ["(push 1)", *[render(t) for t in ob.body], *_marked(k), "(pop 1)"]
    return Script("\n".join(lines) + "\n", tuple(ob.name for ob in cert.obligations))


def script_for(cert: Certificate) -> Script:
    """The script of either kind of certificate."""
    return fixed_script(cert) if cert.kind == "fixed-size" else all_sizes_script(cert)


def _status(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


def read_answers(solver: str, names: Sequence[str], out: str, rc: int | None) -> tuple[dict[str, str], list[str]]:
    """Bind ``out`` to the obligations ``names``: marker N, then one answer, for each in order.
    Returns the answers (``not checked`` or ``error`` where none counts) and the problems."""
    lines = [ln.strip() for ln in out.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    answers: dict[str, str] = {}
    k = 0
    why = ""
    for n, name in enumerate(names):
        marker = f"{MARKER} {n}"
        got = lines[k] if k < len(lines) else None
        if got not in (marker, f'"{marker}"'):
            why = ("no answer" if got is None else f"printed {_clip(got)!r} where its marker was due")
            break
        answer = lines[k + 1] if k + 1 < len(lines) else None
        if answer not in ANSWERS:
            why = "no answer" if answer is None else f"printed {_clip(answer)!r} instead of an answer"
            break
        answers[name] = answer
        k += 2
    else:
        if k < len(lines):
            why = f"printed {_clip(lines[k])!r} after the last answer"
    errors = [ln for ln in lines if ln.startswith("(error")]
    if rc is None:
        why = "no answer within the time limit" + (f" ({why})" if why and why != "no answer" else "")
    elif rc != 0:
        why = _status(rc) + (f" ({why})" if why and why != "no answer" else "")
    elif errors:
        why = why or "printed an error"
    if not why:
        return answers, [f"{solver}: {name}: {a} (expected unsat)" for name, a in answers.items() if a != "unsat"]
    fill = "error" if errors else NOT_CHECKED
    unchecked = [name for name in names if name not in answers]
    answers = {name: fill for name in names}  # a process that failed: none of its answers counts
    first = unchecked[0] if unchecked else names[0] if names else "(none)"
    problems = [f"{solver}: {_clip(errors[0])}" + (f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else "")
                ] if errors else []
    problems.append(f"{solver}: obligation {first}: not checked: {why}"
                    + (f"; {len(names) - 1} other obligations not checked either" if len(names) > 1 else ""))
    return answers, problems


def _clip(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[:n] + "..."


class SolverJob:
    """Both solver processes on one script, started at once so the caller can do other work
    while they run (``with SolverJob(script) as job: ...; runs = job.results()``); leaving the
    block kills whatever still runs and removes the script.  ``script`` ``None``: neither runs,
    and ``reason`` says why."""

    def __init__(self, script: Script | None, seconds: float = 600.0, reason: str = "",
                 first_problems: Sequence[str] = (), limit: ResourceLimit | None = None):
        self.runs = [SolverRun("z3", z3_command()[1]), SolverRun("cvc5", cvc5_command()[1])]
        self.script = script
        self.reason = reason
        self.first = list(first_problems)
        self.procs: list[subprocess.Popen] = []
        self.tmp: str | None = None
        self.deadline = time.monotonic() + seconds
        if script is None:
            return
        fd, self.tmp = tempfile.mkstemp(prefix="kvproof-certify-", suffix=".smt2")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(script.text)
            for argv in self._argv(limit):
                self.procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                   stdin=subprocess.DEVNULL, text=True, encoding="utf-8",
                                                   errors="replace"))
        except BaseException:
            self.close()
            raise

    def _argv(self, limit: ResourceLimit | None) -> list[list[str]]:
        """Both solvers' command lines on the script, each with its resource units per
        check-sat when ``limit`` is on (z3's ``rlimit``, cvc5's ``rlimit-per``)."""
        (z3_argv, _), (cvc5_argv, _) = z3_command(), cvc5_command()
        if limit is None or not limit.on:
            return [[*z3_argv, self.tmp], [*cvc5_argv, self.tmp]]
        binary = z3_argv[-1] == "-smt2"
        z3_line = [*z3_argv, f"rlimit={limit.z3}", self.tmp] if binary else [*z3_argv, self.tmp, str(limit.z3)]
        return [z3_line, [*cvc5_argv, self.tmp, str(limit.cvc5)]]

    def results(self) -> list[SolverRun]:
        """Wait for both (until the deadline) and bind their answers to the obligations."""
        if self.script is None:
            for run in self.runs:
                run.answers = {}
            self.runs[0].problems.append(f"z3 and cvc5 not run: {self.reason}")
            return self.runs
        for run, proc in zip(self.runs, self.procs):
            try:
                out, _ = proc.communicate(timeout=max(0.1, self.deadline - time.monotonic()))
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
                rc = None
            run.answers, run.problems = read_answers(run.solver, self.script.obligations, out, rc)
        self.runs[0].problems[:0] = self.first  # the readable reason first, whichever solver complains
        return self.runs

    def close(self) -> None:
        """Kill what still runs; remove the script."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self.tmp is not None:
            Path(self.tmp).unlink(missing_ok=True)

    def __enter__(self) -> "SolverJob":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_solvers(cert: Certificate, seconds: float = 600.0, limit: ResourceLimit | None = None) -> list[SolverRun]:
    """Run the obligations of ``cert`` (either kind) in a fresh z3 process and a fresh cvc5
    process, side by side, each within ``seconds`` and, with ``limit``, each check-sat within
    its resource units (an obligation past them answers ``unknown``: not discharged)."""
    first = invariant_scope_problems(cert) if cert.kind == "fixed-size" else []
    with SolverJob(script_for(cert), seconds, first_problems=first, limit=limit) as job:
        return job.results()
