"""The Checker API example of ``docs/explanation/architecture.md`` runs and prints what the page
says it prints (its ``# ...`` comments), so the page cannot drift from the API."""

import contextlib
import io
import re

from tests import user_docs


def test_the_checker_example_prints_what_the_page_says():
    page = user_docs.page("explanation/architecture.md")
    code = re.search(r"## The Checker API.*?```python\n(.*?)```", page, re.S).group(1)
    said = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "architecture.md", "exec"), {})
    lines = printed.getvalue().splitlines()
    assert lines[:len(said)] == said and len(said) == 2
    assert lines[-1] == "0"  # the exit code the last line's comment names
    assert "# 0: both as expected" in code
