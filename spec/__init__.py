"""The protocols, one subpackage each: :mod:`.sglang` (SGLang's PD disaggregation, and
SGLang 0.5.23 as shipped).  Each registers a :class:`~kvproof.model.protocol.Protocol` under
the ``kvproof.protocols`` entry-point group; nothing here is imported by the model or the
checker.
"""
