"""Certificates: the one reader of every proof certificate kvproof writes, and the solver
processes that answer each of its obligations on its own.

* :mod:`.sexpr`: SMT-LIB text read into terms, with stated limits (the lexer and parser);
* :mod:`.reader`: the one reader: a file's terms held to the structure kvproof writes, for
  fixed-size certificates (``<scenario>.smt2``) and all-sizes ones (``<scenario>.allsizes.smt2``);
* :mod:`.solvers`: fresh z3 and cvc5 processes on a script rebuilt from the parsed terms, one
  answer bound to each obligation by an echoed marker;
It imports no engine.  The fixed-size certificate's writer and its check against today's encoding
of its scenario are the Z3 engine's (:mod:`kvproof.checker.symbolic.certificate`,
:mod:`kvproof.checker.symbolic.cert_catalogue`); the all-sizes certificate is held against today's
parametric model in
:mod:`kvproof.checker.allsizes.prove`; :mod:`kvproof.checker.certify` is what ``kvproof certify`` runs.
"""

from kvproof.checker.certs.reader import Certificate, CertificateError, Obligation, read_certificate
from kvproof.checker.certs.sexpr import SexprError, parse_script, render

__all__ = ["Certificate", "CertificateError", "Obligation", "read_certificate", "SexprError", "parse_script", "render"]
