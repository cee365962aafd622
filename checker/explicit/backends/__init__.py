"""The explicit engine's backends, one class each behind one interface (:class:`Backend`, the
search it is asked: :class:`Search`): the Python engine in this process
(:class:`PythonBackend`), in forked processes (:class:`WorkersBackend`), the search in C
(:class:`NativeBackend`), Ray actors (:class:`RayBackend`), and the default that picks between
the Python engine and C by searching (:class:`AutoBackend`).  Constructing one imports no
engine: numpy, the C compiler and Ray are loaded when it first searches."""

from kvproof.checker.explicit.backends.auto import PROBE_STATES, AutoBackend
from kvproof.checker.explicit.backends.base import Backend, Search
from kvproof.checker.explicit.backends.native import NativeBackend
from kvproof.checker.explicit.backends.python import PythonBackend
from kvproof.checker.explicit.backends.ray import RayBackend
from kvproof.checker.explicit.backends.workers import WorkersBackend

__all__ = ["Backend", "Search", "AutoBackend", "PythonBackend", "WorkersBackend", "NativeBackend", "RayBackend",
           "PROBE_STATES"]
