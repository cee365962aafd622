"""``kvproof.record``: record an event log for ``kvproof validate`` from a running engine.

Opt-in by environment variable; with ``KVPROOF_RECORD`` unset nothing is patched::

    KVPROOF_RECORD=/tmp/run.jsonl            # the log (appended; the header when it is new)
    KVPROOF_RECORD_SCENARIO=sglang-0.5.23-mooncake   # the header's scenario (a built-in name)
    KVPROOF_RECORD_ROOM_BASE=1000            # room = bootstrap_room - base (default 0)
    KVPROOF_RECORD_SLOTS=8                   # vLLM: the log is a stream over 8 request slots

``import kvproof.record; kvproof.record.install()`` patches SGLang 0.5.23's disaggregation
classes in this process (``kvproof.spec.sglang.record`` lists the methods and their events), or,
when the scenario is a ``vllm-*`` one, vLLM 0.33.0's NIXL connector (pull mode) and scheduler
classes (``kvproof.spec.vllm.record``);
``python -m kvproof.record MODULE [ARGS...]`` does the same, then runs ``MODULE`` as ``python -m``
would (processes the engine starts itself are not patched by it).

In every process an engine starts, through the engine's own plugin hook: kvproof registers
:func:`vllm_plugin` under vLLM's ``vllm.general_plugins`` entry-point group (vLLM's
``load_general_plugins()`` runs it in every process: API server, engine core, workers) and
:func:`sglang_plugin` under SGLang's ``sglang.srt.plugins`` group (``sglang.srt.plugins.load_plugins()``:
the launcher, each scheduler process, the detokenizer).  Each installs the recorder of its engine
when ``KVPROOF_RECORD`` is set and the scenario is that engine's, and does nothing otherwise.  A
``{pid}`` in ``KVPROOF_RECORD`` is replaced by the process id, one log per process.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["ENV", "DEFAULT_SCENARIO", "install", "uninstall", "vllm_plugin", "sglang_plugin", "main"]

ENV = "KVPROOF_RECORD"
"""The variable naming the log; recording is off when it is unset or empty."""

DEFAULT_SCENARIO = "sglang-0.5.23-mooncake"
"""The header's scenario when ``KVPROOF_RECORD_SCENARIO`` is unset."""

_active: Any = None


def install(environ: dict | None = None) -> Any:
    """Patch the engine's classes (SGLang's, or vLLM's for a ``vllm-*`` scenario) when
    ``KVPROOF_RECORD`` is set (in ``environ``, default
    ``os.environ``): the recorder, or ``None`` when recording is off.  Idempotent."""
    global _active
    env = os.environ if environ is None else environ
    path = env.get(ENV, "").replace("{pid}", str(os.getpid()))
    if not path:
        return None
    if _active is not None:
        return _active
    base = env.get("KVPROOF_RECORD_ROOM_BASE", "0")
    try:
        room_base = int(base)
    except ValueError:
        _bad(f"KVPROOF_RECORD_ROOM_BASE: expected a whole number, got {base!r}")
    slots = env.get("KVPROOF_RECORD_SLOTS", "")
    if slots:
        from kvproof.spec.vllm.validate import MAX_SLOTS  # what validate reads: the stream's bound

        if not (slots.isdigit() and 1 <= int(slots) <= MAX_SLOTS):
            _bad(f"KVPROOF_RECORD_SLOTS: expected a whole number in 1..{MAX_SLOTS}, got {slots!r}")
    from kvproof.model.scenario import ScenarioError, builtin

    scenario = env.get("KVPROOF_RECORD_SCENARIO") or DEFAULT_SCENARIO
    try:
        if builtin(scenario).family == "vllm":
            from kvproof.spec.vllm.record import install as install_vllm

            _active = install_vllm(path, scenario, **({"slots": int(slots)} if slots else {}))
        else:
            from kvproof.spec.sglang.record import install as install_sglang

            _active = install_sglang(path, scenario, room_base)
    except (ScenarioError, OSError) as e:
        _bad(f"KVPROOF_RECORD: {e}")
    return _active


def _family(environ: dict | None = None) -> str | None:
    """The engine family of ``KVPROOF_RECORD_SCENARIO`` (``vllm``, ``sglang``), or ``None`` when
    recording is off or the scenario is unknown (then :func:`install` says so)."""
    env = os.environ if environ is None else environ
    if not env.get(ENV, ""):
        return None
    from kvproof.model.scenario import ScenarioError, builtin

    try:
        return builtin(env.get("KVPROOF_RECORD_SCENARIO") or DEFAULT_SCENARIO).family
    except ScenarioError:
        return None


def vllm_plugin() -> None:
    """vLLM's general plugin (entry point ``kvproof-record`` in group ``vllm.general_plugins``):
    record this process's vLLM classes when ``KVPROOF_RECORD`` is set and
    ``KVPROOF_RECORD_SCENARIO`` names a ``vllm-*`` scenario (an unknown scenario: one line, exit
    3, as :func:`install`); otherwise nothing.  vLLM may run it more than once: idempotent."""
    family = _family()
    if family == "vllm" or (family is None and os.environ.get(ENV)):
        install()


def sglang_plugin() -> None:
    """SGLang's general plugin (entry point ``kvproof-record`` in group ``sglang.srt.plugins``):
    record this process's SGLang disaggregation classes when ``KVPROOF_RECORD`` is set and the
    scenario is an SGLang one (the default); otherwise nothing.  Idempotent."""
    family = _family()
    if (family is not None and family != "vllm") or (family is None and os.environ.get(ENV)):
        install()


def _bad(message: str) -> None:
    """Bad configuration: one line on stderr, exit 3 (kvproof's bad-input code)."""
    print(f"kvproof: error: {message}", file=sys.stderr)
    raise SystemExit(3)


def uninstall() -> None:
    """Undo :func:`install` and close the log."""
    global _active
    if _active is not None:
        _active.uninstall()
        _active.log.close()
        _active = None


def main(argv: list[str] | None = None) -> None:
    """``python -m kvproof.record MODULE [ARGS...]``: install, then run ``MODULE``."""
    import runpy

    args = sys.argv[1:] if argv is None else argv
    if not args:
        raise SystemExit("usage: python -m kvproof.record MODULE [ARGS...]  (records when KVPROOF_RECORD is set)")
    install()
    sys.argv = list(args)
    runpy.run_module(args[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
