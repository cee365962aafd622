"""What the committed all-sizes certificates prove, as one table: per scenario, the claims proved
for every size (the certificate's ``; proves:`` line, which ``kvproof certify`` re-solves with z3
and cvc5), the claims the lift could not take (with the construct that blocks each, from the
lift itself), and the certificate's file. The README's "For every size" table is
:func:`table` of the committed certificates (``tests/test_allsizes_catalogue.py`` keeps them
equal), so the table never says more than the certificates do."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kvproof.checker.certs.reader import ALL_SIZES, ALL_SIZES_SUFFIX, read_certificate

__all__ = ["CatalogueRow", "rows", "table", "targets", "unliftable", "unliftable_table"]

_LOCATION = re.compile(r"^(?:claim \w+: )*[\w./-]+\.py:\d+: ")
_ELEMENT = re.compile(r" \(\w+ [\w!]+\)")  # "(request req!1)": the lift's name for an element


@dataclass(frozen=True)
class CatalogueRow:
    """One certificate: its scenario, the claims it proves, the claims the lift refused (each
    with the construct that blocks it, its spec line left out: that moves with unrelated
    edits), and the file's name."""

    scenario: str
    proved: tuple[str, ...]
    not_lifted: tuple[tuple[str, str], ...]
    file: str
    pinned: tuple[tuple[str, bool], ...] = ()
    """The per-element conditions the certificate's lift fixed for every element (its
    ``; fixed:`` lines): the claims are proved only for the configurations that have them so."""
    inconclusive: tuple[str, ...] = ()
    """The scenario's all-sizes claims (:func:`targets`) that were lifted but are not proved:
    the run that wrote the certificate found no inductive invariant for them."""


def _construct(reason: str) -> str:
    """The construct of a lift refusal, without the ``file:line:`` it starts with."""
    text = reason.removeprefix("the spec cannot be lifted to every size: ")
    return _ELEMENT.sub("", _LOCATION.sub("", text)).split(" (", 1)[0].split(": iterate", 1)[0].strip()


def rows(proofs: Path, resolve=None) -> list[CatalogueRow]:
    """A row for each all-sizes certificate under ``proofs``, by scenario name. The claims it
    proves are read from the file (data: nothing in it runs); the claims not lifted come from
    lifting the scenario's spec (``resolve`` maps a scenario name to its scenario: the built-in
    catalogue by default)."""
    from kvproof.checker.allsizes.prove import all_sizes_model
    from kvproof.checker.allsizes.sorted_allsizes import pins_from

    if resolve is None:
        from kvproof.model.scenario import builtin as resolve
    out = []
    for path in sorted(proofs.glob(f"*{ALL_SIZES_SUFFIX}")):
        cert = read_certificate(path, ALL_SIZES)
        pins = pins_from(cert.header.get("fixed", []))
        sc = resolve(cert.scenario_name)
        spec = sc.build()
        hook, _ = all_sizes_model(spec, pins)
        refused = {} if hook is None else dict(hook.system.refused)
        open_ = tuple(c for c in targets(sc, spec) if c not in cert.proves and c not in refused)
        out.append(CatalogueRow(cert.scenario_name, tuple(cert.proves),
                                tuple((c, _construct(r)) for c, r in sorted(refused.items())), path.name,
                                tuple(sorted(pins.items())), open_))
    return sorted(out, key=lambda r: r.scenario)


def targets(scenario, spec=None) -> list[str]:
    """The claims an all-sizes proof of ``scenario`` is asked for (``spec``: its spec, when
    already built): the spec's invariants among its protocol's ``all_sizes_claims``, or, for a
    spec that has none of those (a spec of its own within the protocol), all of the spec's
    invariants."""
    invariants = [c.name for c in (spec or scenario.build()).claims if c.kind == "invariant"]
    named = set(scenario.family_protocol().all_sizes_claims)
    return [c for c in invariants if c in named] or invariants


def table(catalogue: list[CatalogueRow]) -> str:
    """The rows as a Markdown table: scenario, claims proved for every size, claims not proved:
    lifted but inconclusive, or not lifted (grouped by the construct that blocks them)."""
    lines = ["| scenario | proved for every size | not proved: inconclusive, or not lifted (what blocks it) |",
             "|---|---|---|"]
    for r in catalogue:
        by: dict[str, list[str]] = {}
        if r.inconclusive:
            by["inconclusive"] = list(r.inconclusive)
        for claim, why in r.not_lifted:
            by.setdefault(why, []).append(claim)
        refused = "; ".join(f"{', '.join(f'`{c}`' for c in cs)}: {why}" for why, cs in by.items()) or "none"
        only = ("; only where every element has " + ", ".join(f"`{n}` {'true' if v else 'false'}" for n, v in r.pinned)
                + ", as every one of the scenario's") if r.pinned else ""
        lines.append(f"| `{r.scenario}` | {len(r.proved)}: {', '.join(f'`{c}`' for c in r.proved)}{only} | {refused} |")
    return "\n".join(lines) + "\n"


def unliftable(scenarios) -> dict[str, list[str]]:
    """The scenarios of ``scenarios`` that the lift refuses, by the construct that blocks each
    (what ``prove --all-sizes`` would say before any solver runs): only those whose safety
    claims (:func:`targets`) are all expected verified, the ones a proof could be asked of."""
    from kvproof.checker.allsizes.prove import all_sizes_model

    out: dict[str, list[str]] = {}
    for sc in scenarios:
        spec = sc.build()
        claims = targets(sc, spec)
        if not claims or any(sc.expect.get(c) == "violated" for c in claims):
            continue
        hook, why = all_sizes_model(spec)
        if hook is None:
            out.setdefault(_construct(why), []).append(sc.name)
    return dict(sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def unliftable_table(blocked: dict[str, list[str]]) -> str:
    """:func:`unliftable`'s answer as a Markdown table: what blocks the lift, and where."""
    lines = ["| what blocks the lift | scenarios |", "|---|---|"]
    for why, names in blocked.items():
        lines.append(f"| {why.replace('|', '/')} | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(lines) + "\n"
