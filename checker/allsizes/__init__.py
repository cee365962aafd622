"""Proofs for every size: quantified models over uninterpreted sorts.

:mod:`.quantified` (a protocol's parametric system, its candidates, Houdini, minimising and the
certificate), :mod:`.link` (the parametric model over-approximates the spec, proved at a fixed
size from the spec's own encoding) and :mod:`.prove` (``kvproof prove --all-sizes``: mining,
Houdini, the link, the certificate)."""
