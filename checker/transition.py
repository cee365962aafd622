"""The old path of :mod:`kvproof.checker.symbolic.transition`, kept only for the certificate
modules at the top of ``checker/`` (:mod:`.certificate`, :mod:`.cert_catalogue`), which import
it from here until they move into a subpackage of their own; nothing else imports this."""

from kvproof.checker.symbolic.transition import SymbolicStep, TransitionSystem, as_term

__all__ = ["TransitionSystem", "SymbolicStep", "as_term"]
