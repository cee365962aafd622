"""Bounds from what a deployment measured: a Prometheus text exposition (a scrape saved to a
file) read as data with ``prometheus_client``'s own parser
(``prometheus_client.parser.text_string_to_metric_families``, the engines' metrics library), and
the quantile of one histogram taken as a bound.

The bound is the upper edge of the first bucket whose cumulative count reaches the quantile
(``q = 1``: every observation), never an interpolation inside a bucket (Prometheus'
``histogram_quantile`` interpolates, and so may fall below what was observed).  When the
quantile falls in the ``+Inf`` bucket there is no bound.  Series of one histogram with other
labels (one per engine, per model) are added up bucket by bucket.  Which histogram stands for
which bound of a model is each protocol's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Bound", "read_exposition", "histogram_bound", "quantile"]


@dataclass(frozen=True)
class Bound:
    """A histogram's quantile as a bound (``seconds`` ``None``: the quantile is above the top
    finite bucket, no bound)."""

    metric: str
    quantile: float
    seconds: float | None
    observations: int
    series: int

    @property
    def shown(self) -> str:
        """``engine:xfer_seconds p99 <= 0.5 s (1,200 observations, 2 series)``."""
        q = f"p{self.quantile * 100:g}"
        edge = f"<= {self.seconds:g} s" if self.seconds is not None else "in the +Inf bucket: no bound"
        return (f"{self.metric} {q} {edge} ({self.observations:,} observations"
                f"{f', {self.series} series' if self.series != 1 else ''})")


def read_exposition(path: str, bad) -> dict[str, Any]:
    """The metric families of the exposition in ``path``, by name; an unreadable file or text the
    parser refuses is one line of bad input."""
    from kvproof.checker.audit.common import read_option_file

    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise bad("--metrics: needs prometheus_client (pip install prometheus_client)") from None
    text = read_option_file(path, "--metrics", "a Prometheus text exposition", bad)
    try:
        families = {f.name: f for f in text_string_to_metric_families(text)}
    except (ValueError, TypeError, IndexError) as e:
        raise bad(f"{path}: not a Prometheus text exposition: {' '.join(str(e).split())[:100]}") from None
    return families


def histogram_bound(families: dict[str, Any], name: str, quantile: float, scale: float = 1.0) -> Bound | None:
    """The ``quantile`` of histogram ``name`` as a bound in seconds (bucket edges times
    ``scale``: 0.001 for a histogram in milliseconds); ``None`` when the exposition has no such
    histogram or it has no observations."""
    fam = families.get(name)
    if fam is None or fam.type != "histogram":
        return None
    buckets: dict[float, float] = {}
    series: set[tuple] = set()
    for s in fam.samples:
        if not s.name.endswith("_bucket") or "le" not in s.labels:
            continue
        le = float("inf") if s.labels["le"] in ("+Inf", "Inf", "inf") else float(s.labels["le"])
        buckets[le] = buckets.get(le, 0.0) + float(s.value)
        series.add(tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")))
    total = buckets.get(float("inf"), max(buckets.values(), default=0.0))
    if total <= 0:
        return None
    need = quantile * total
    for le in sorted(buckets):
        if buckets[le] >= need - 1e-9 * total:
            seconds = None if math.isinf(le) else le * scale
            return Bound(name, quantile, seconds, int(total), len(series))
    return Bound(name, quantile, None, int(total), len(series))


def quantile(value: Any, bad) -> float:
    """``--quantile``'s value: a number in (0, 1], 1 when not given; anything else is bad input."""
    if value is None:
        return 1.0
    try:
        q = float(value)
    except (TypeError, ValueError):
        raise bad(f"--quantile {value}: expected a number in (0, 1]") from None
    if not 0 < q <= 1:
        raise bad(f"--quantile {value}: expected a number in (0, 1]")
    return q
