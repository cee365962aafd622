"""The symmetry of the PD protocol: requests of the same shape are interchangeable.

Two requests are interchangeable when they have the same tenant, prompt length, client room and prefill instance
(everything the protocol reads about a request - over-long, pages to reserve, chunks to send -
follows from those), *and* arrivals are unordered: with ``ordered_arrivals`` (FIFO doors,
the default) request ``r`` reaches a door only after ``r - 1``, which tells them apart.
Decode pages are interchangeable only with ``any_free_pages``: by default allocation takes the
lowest-numbered free pages, which fixes their order.  Prefill pages are never permuted (their
allocation is lowest-free).  Permuting requests rewrites the codes that name a request: a page owner
``owned_by(r)`` and a page content ``kv_of(r)`` (KV written for ``r``); ``old:<tenant>`` contents stay,
since permutations keep tenants.
"""

from __future__ import annotations

from kvproof.model.symmetry import IndexSort, Sort, Symmetry

__all__ = ["PdSymmetry"]


class PdSymmetry:
    """Mixin of :class:`~kvproof.spec.sglang.protocol.PdProtocol`: its symmetry declaration."""

    def symmetry(self) -> Symmetry | None:
        """Requests of one (tenant, pages) shape are interchangeable when arrivals are
        unordered, decode pages when allocation takes any free pages; ``None`` when nothing
        is."""
        k = self.k
        pages = None
        if self.e.any_free_pages and k.D > 1:
            refs = tuple((p, 0) for p in range(k.D)) + (None,)
            pages = Symmetry(Sort(k.page, (tuple(range(k.D)),)), {k.page_ref.name: refs})
        shapes: dict[tuple, list[int]] = {}
        for r, req in enumerate(self.cfg.requests):
            shapes.setdefault((req.tenant, req.pages, req.room, req.prefill_instance), []).append(r)
        classes = tuple(tuple(c) for c in shapes.values())
        if self.e.ordered_arrivals or all(len(c) < 2 for c in classes):
            return pages
        owner = (None,) + tuple((r, 0) for r in range(k.R))
        content = (None,) + tuple((r, 0) for r in range(k.R)) + (None,) * k.T
        also = (pages,) if pages is not None else ()
        return Symmetry(Sort(k.req, classes), {k.owner.name: owner, k.content.name: content}, also)

    def index_sorts(self) -> tuple[IndexSort, ...]:
        """Requests (of one kind when they have the same tenant and prompt length), decode pages,
        prefill pages and aux slots, with the codes that name them (owners and contents name a
        request; ``dest``, ``src`` and ``aux`` values a page or slot).  Unlike :meth:`symmetry`
        this holds whatever the arrival order or the allocation policy: it only says what a
        renaming of a lemma must rename (:mod:`kvproof.checker.symbolic.lift`)."""
        k = self.k
        owner = (None,) + tuple((r, 0) for r in range(k.R))
        content = (None,) + tuple((r, 0) for r in range(k.R)) + (None,) * k.T
        out = [IndexSort(k.req, tuple((req.tenant, req.pages) for req in self.cfg.requests),
                         {k.owner.name: owner, k.content.name: content}),
               IndexSort(k.page, (None,) * k.D, {k.page_ref.name: tuple((p, 0) for p in range(k.D)) + (None,)}),
               IndexSort(k.ppage, (None,) * k.P, {k.ppage_ref.name: tuple((q, 0) for q in range(k.P)) + (None,)})]
        if k.M:
            out.append(IndexSort(k.slot, (None,) * k.slot.size,
                                 {k.slot_ref.name: tuple((m, 0) for m in range(k.slot.size)) + (None,)}))
        return tuple(out)
