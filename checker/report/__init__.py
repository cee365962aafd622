"""Rendering and CI formats: :mod:`.render` (text: the verdict table and traces),
:mod:`.sequence` (a trace as messages between actors) and :mod:`.sequence_svg`,
:mod:`.timeline` (page by page), :mod:`.html` (the self-contained report), :mod:`.junit`,
:mod:`.sarif`, :mod:`.mermaid`, :mod:`.trace_json` (``show --format json``), :mod:`.focus`
(``show --only``) and :mod:`.diff` (``kvproof diff``)."""
