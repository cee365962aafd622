"""The ``run:`` steps of a GitHub Actions workflow, per job, as the runner's shell gets them.

Enough YAML for ``examples/ci/kvproof.yml`` (no YAML library is a dependency): jobs under
``jobs:``, one-line ``run:`` values (a `` #`` starts a comment), literal (``|``) and folded
(``>``, ``>-``) blocks.  ``.ci/plugin-smoke`` runs the steps in a temporary repository the way a
runner would (``bash -e``, GitHub's default shell), and ``tests/test_examples_ci.py`` parses them:

    python3 tests/ci_recipe.py WORKFLOW JOB DIR   # writes DIR/1.sh, DIR/2.sh, ... (one per step)
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path


def run_steps(text: str) -> dict[str, list[str]]:
    """``{job: [shell script of each run step, in order]}``."""
    jobs: dict[str, list[str]] = {}
    job = None
    lines = text.splitlines()
    in_jobs = False
    for i, line in enumerate(lines):
        if re.match(r"^\S", line):
            in_jobs = line.startswith("jobs:")
            continue
        m = re.match(r"^  ([\w-]+):\s*$", line)
        if in_jobs and m:
            job = m.group(1)
            jobs[job] = []
            continue
        m = re.match(r"^(\s*)(?:- )?run:\s*(.*)$", line)
        if not (in_jobs and job and m):
            continue
        body = m.group(2)
        if body[:1] in ("|", ">"):
            key_indent = len(m.group(1))
            block = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= key_indent:
                    break
                block.append(nxt)
            script = textwrap.dedent("\n".join(block)).strip("\n")
            if body.startswith(">"):  # folded: lines joined with spaces
                script = " ".join(part.strip() for part in script.splitlines() if part.strip())
            jobs[job].append(script + "\n")
        else:
            jobs[job].append(re.split(r"\s+#", body, maxsplit=1)[0].strip() + "\n")
    return jobs


def main(argv: list[str]) -> int:
    """Write the steps of one job as numbered scripts."""
    workflow, job, out = argv
    steps = run_steps(Path(workflow).read_text())[job]
    Path(out).mkdir(parents=True, exist_ok=True)
    for n, script in enumerate(steps, start=1):
        (Path(out) / f"{n}.sh").write_text(script)
    print(len(steps))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
