"""The stored SMT-LIB text of a certificate, checked by fresh solver processes.

No kvproof encoding code is involved here: the definitions stored in the file are put, as text,
into a script of the three obligations, which two solvers each run in a process of their own:

* **stock z3**: the ``z3`` binary the z3-solver wheel installs beside the Python interpreter
  (or one on ``PATH``); if there is none, a separate Python process that gives the text to z3's
  own SMT-LIB interpreter (``Z3_eval_smtlib2_string``, what the binary runs) and prints its
  answers (:func:`z3_command` says which);
* **cvc5** (the ``cvc5`` wheel has no binary): a separate Python process (``python -I``, so
  nothing from the working directory is imported) in which cvc5's own SMT-LIB parser reads the
  script and executes it command by command.

The script is built so that the *solvers* enforce what each definition may mention, rather than
a scan in Python: ``typed`` and ``inv`` are defined as functions whose only parameters are the
pre-state bits, *before* any constant is declared, so an ``inv`` that mentions a post-state bit,
the action tag ``action@pre`` or another definition is an "unknown symbol" error in both
solvers; ``init`` and ``safe`` are defined after the pre-state bits and before the post-state bits
and the tag; only ``trans`` sees everything.  ``inv'`` and ``typed'`` are the same functions
applied to the post-state bits, not the stored ``inv_next``/``typed_next`` (which
:func:`~.certificate.read_certificate` requires to be exactly those copies).  The obligations
are the standard three, whatever the file asserts.  An invariant mentioning the action tag
matters: the same tag would stand in both states of the inductive step, so stock z3 could
"prove" an invariant that is only closed under each action *repeated*.

Each obligation must be answered ``unsat`` by both solvers; any other answer, an error line, a
crash or the time limit is a failure named by solver and obligation.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from kvproof.checker.certificate import OBLIGATIONS, TAG, Certificate

__all__ = ["SolverRun", "SolverJob", "solver_script", "run_solvers", "z3_binary", "z3_command", "cvc5_command", "invariant_scope_problems",
           "LOGIC"]

LOGIC = "QF_LIA"  # Booleans and the integer action tag; cvc5 is ~70x slower on the largest under ALL

# The cvc5 process: cvc5's own SMT-LIB parser, command by command, answers on stdout.
_CVC5 = """\
import sys
import cvc5
tm = cvc5.TermManager()
solver = cvc5.Solver(tm)
# quantified obligations: when e-matching is stuck, instantiate with ground terms before answering
# unknown (sound; the ranked all-sizes certificate's prefill_forward step needs it)
solver.setOption('full-saturate-quant', 'true')
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
    """One solver's answers: ``answers`` per obligation (``unsat`` is discharged), ``how`` the
    process that ran (e.g. the binary's path), ``problems`` one line per failure."""

    solver: str
    how: str
    answers: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


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


_SYMBOL = re.compile(r"\|[^|]*\||[^\s()|]+")


def invariant_scope_problems(cert: Certificate) -> list[str]:
    """The symbols ``inv`` mentions that are not pre-state bits: post-state bits, the action tag,
    the other definitions (a readable line each; the solvers refuse them anyway)."""
    banned = set(cert.post) | {TAG} | {n for n in cert.defs if n != "inv"}
    found = []
    for sym in _SYMBOL.findall(cert.defs["inv"]):
        if sym in banned and sym not in found:
            found.append(sym)
    if not found:
        return []
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return [f"inv mentions {shown}: an invariant may mention the pre-state bits only"]


def solver_script(cert: Certificate, logic: str = LOGIC) -> str:
    """The three obligations over the stored definitions, scoped as the module docstring says."""
    d = cert.defs
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
    for name in OBLIGATIONS:
        lines += ["(push 1)", f"(assert {goals[name]})", "(check-sat)", "(pop 1)"]
    return "\n".join(lines) + "\n"


def _answers(solver: str, out: str, rc: int | None, err: str) -> tuple[dict[str, str], list[str]]:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("(error")]
    verdicts = [ln for ln in lines if ln in ("sat", "unsat", "unknown")]
    answers = {name: (verdicts[i] if i < len(verdicts) else "no answer") for i, name in enumerate(OBLIGATIONS)}
    problems = []
    if errors:
        problems.append(f"{solver}: {_clip(errors[0])}" + (f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""))
        answers = {name: "error" for name in OBLIGATIONS}
    elif rc is None:
        problems.append(f"{solver}: no answer within the time limit")
    elif rc != 0 or len(verdicts) != len(OBLIGATIONS) or len(lines) != len(verdicts):
        tail = (err.strip().splitlines() or [""])[-1]
        problems.append(f"{solver}: exit status {rc}, {len(verdicts)} answers for {len(OBLIGATIONS)} obligations"
                        + (f": {_clip(tail)}" if tail else ""))
    if not problems:
        problems += [f"{solver}: {name}: {v} (expected unsat)" for name, v in answers.items() if v != "unsat"]
    return answers, problems


def _clip(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[:n] + "..."


class SolverJob:
    """Both solver processes on one certificate, started at once so the caller can do other work
    while they run (``with SolverJob(cert) as job: ...; runs = job.results()``); leaving the
    block kills whatever still runs and removes the script."""

    def __init__(self, cert: Certificate, seconds: float = 600.0):
        self.runs = [SolverRun("z3", z3_command()[1]), SolverRun("cvc5", cvc5_command()[1])]
        self.scope = invariant_scope_problems(cert)
        self.procs: list[subprocess.Popen] = []
        self.tmp: str | None = None
        self.deadline = time.monotonic() + seconds
        if any("is not one S-expression" in p for p in cert.problems):
            return  # the text cannot be put into a script safely: neither solver sees it
        fd, self.tmp = tempfile.mkstemp(prefix="kvproof-certify-", suffix=".smt2")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(solver_script(cert))
            for argv, _ in (z3_command(), cvc5_command()):
                self.procs.append(subprocess.Popen([*argv, self.tmp], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                   stdin=subprocess.DEVNULL, text=True, encoding="utf-8",
                                                   errors="replace"))
        except BaseException:
            self.close()
            raise

    def results(self) -> list[SolverRun]:
        """Wait for both (until the deadline) and read their answers."""
        if not self.procs:
            for run in self.runs:
                run.answers = {name: "not run" for name in OBLIGATIONS}
            self.runs[0].problems.append("z3 and cvc5 not run: a stored definition is not one S-expression")
            return self.runs
        for run, proc in zip(self.runs, self.procs):
            try:
                out, err = proc.communicate(timeout=max(0.1, self.deadline - time.monotonic()))
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                rc = None
            run.answers, run.problems = _answers(run.solver, out, rc, err)
        self.runs[0].problems[:0] = self.scope  # the readable reason first, whichever solver complains
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


def run_solvers(cert: Certificate, seconds: float = 600.0) -> list[SolverRun]:
    """Run the obligations of ``cert`` in a fresh z3 process and a fresh cvc5 process, side by
    side, each within ``seconds``."""
    with SolverJob(cert, seconds) as job:
        return job.results()
