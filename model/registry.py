"""Which protocols a scenario may name: the registered ones, and the engine variants the user trusted.

A scenario's ``protocol`` key (in a TOML file, or stored in a trace or a certificate) is data,
so it is looked up here and never imported on its own say-so:

* a registered protocol's stable name (see :class:`~.protocol.Protocol`) or one of its older
  spellings (``module:Class`` paths of classes since moved); no ``protocol`` key at all means the
  base spec of the default protocol.  Protocols register under the ``kvproof.protocols``
  entry-point group (:class:`~.protocol.Protocol`; kvproof's own in ``pyproject.toml``), or a
  test registers one with :func:`register`;
* an engine variant, ``"path/to/file.py:ClassName"``, only once the user passed that file
  explicitly (``kvproof ... --variant FILE.py``): :func:`trust_variant` runs the file - a
  variant file is code, trusted input - and registers the subclasses of a protocol's base
  spec it defines.  A stored reference matches a trusted file by its resolved path, else by
  file name and class name (a trace written on another machine).

Anything else raises :class:`ProtocolError` and nothing is imported.  The trusted variants are
process-wide; :func:`variant_scope` confines them to one command (the command line's ``main``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import traceback
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Iterator

from kvproof.model.protocol import Protocol

__all__ = ["ProtocolError", "register", "unregister", "protocols", "entry_point_order", "protocol_named", "protocol_of",
           "default_protocol", "builtin_names", "base_names", "canonical", "check_reference", "protocol_class",
           "variant_classes", "trust_variant", "trusted_files", "variant_scope", "variant_error"]

GROUP = "kvproof.protocols"
_MAX_REFERENCE = 1024
_CLASS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_trusted: dict[Path, dict[str, type]] = {}
_registered: dict[str, Protocol] = {}
_loaded = False


class ProtocolError(ValueError):
    """A protocol reference that is malformed, unknown or untrusted, or a variant file that
    cannot be loaded (one line)."""


def register(protocol: Protocol) -> None:
    """Make ``protocol`` known (replacing one of the same name)."""
    protocols()  # the entry points first, so that they keep their place
    _registered[protocol.name] = protocol


def unregister(name: str) -> None:
    """Forget the protocol called ``name`` (what :func:`register` added, in a test)."""
    _registered.pop(name, None)


def protocols() -> list[Protocol]:
    """Every registered protocol: the ``kvproof.protocols`` entry points (loaded once; see
    :func:`entry_point_order`), then those registered by :func:`register`."""
    global _loaded
    if not _loaded:
        _loaded = True
        for ep in entry_point_order(metadata.entry_points(group=GROUP)):
            p = ep.load()
            _registered.setdefault(p.name, p)
    return list(_registered.values())


def entry_point_order(eps) -> list:
    """The entry points in the order their protocols are listed (the catalogue's order): kvproof's
    own first, then each other package's by package name; within a package, in the order its
    installed metadata lists them (setuptools writes them sorted by name, whatever the order of
    the ``pyproject.toml``: kvproof names its own so that they come in the order the protocols
    were added).  Python finds packages in the order of a folder listing, which differs between
    file systems; this order does not."""
    def package(ep) -> str:
        dist = getattr(ep, "dist", None)
        return re.sub(r"[-_.]+", "-", dist.name).lower() if dist is not None else ""

    return sorted(eps, key=lambda ep: (package(ep) != "kvproof", package(ep)))


def protocol_named(name: str) -> Protocol:
    """The registered protocol called ``name``; :class:`ProtocolError` if there is none."""
    for p in protocols():
        if p.name == name:
            return p
    raise ProtocolError(f"no protocol is called {name!r} (registered: {', '.join(p.name for p in protocols())})")


def default_protocol() -> Protocol:
    """The protocol a scenario without a ``protocol`` key belongs to."""
    chosen = [p for p in protocols() if p.default]
    if len(chosen) != 1:
        raise ProtocolError("a scenario must name its protocol (no single default protocol is registered)")
    return chosen[0]


def builtin_names() -> list[str]:
    """The stable names of every registered spec class."""
    return [name for p in protocols() for name in p.specs]


def canonical(ref: str | None) -> str | None:
    """The stable name ``ref`` stands for (an alias resolved, ``None`` for the default base),
    or ``ref`` itself (a variant reference)."""
    if ref is None:
        return default_protocol().base_name
    for p in protocols():
        if ref in p.specs:
            return ref
        if ref in p.aliases:
            return p.aliases[ref]
    return ref


def _builtin(ref: str | None) -> tuple[Protocol, type] | None:
    name = canonical(ref)
    for p in protocols():
        if name in p.specs:
            return p, p.specs[name]()
    return None


def check_reference(ref: object) -> str:
    """``ref`` if it has the shape of a protocol reference (a registered name, or
    ``file.py:Class``), else :class:`ProtocolError`.  Says nothing about trust."""
    if not isinstance(ref, str):
        raise ProtocolError(f"expected a string 'file.py:ClassName' or a built-in protocol, got {ref!r}")
    if _builtin(ref) is not None:
        return ref
    where, _, cls = ref.rpartition(":")
    if (not where or not _CLASS.match(cls) or len(ref) > _MAX_REFERENCE
            or any(ord(ch) < 32 or ch == "\x7f" for ch in ref)):
        raise ProtocolError(f"expected 'file.py:ClassName' or one of {', '.join(builtin_names())}, got {_short(ref)}")
    return ref


def protocol_of(ref: str | None) -> tuple[Protocol, type]:
    """The protocol and the spec class ``ref`` names: the default protocol's base for ``None``,
    a registered name, or a class of a trusted variant file; :class:`ProtocolError` (nothing
    imported) for anything else."""
    found = _builtin(ref)
    if found is not None:
        return found
    check_reference(ref)
    where, _, cls_name = ref.rpartition(":")
    if not where.endswith(".py"):
        raise ProtocolError(f"{_short(ref)} is not a built-in protocol (built in: {', '.join(builtin_names())}); "
                            "nothing was imported")
    cls = _trusted_class(ref, Path(where), cls_name)
    return _family(cls), cls


def protocol_class(ref: str | None) -> type:
    """The spec class ``ref`` names (see :func:`protocol_of`)."""
    return protocol_of(ref)[1]


def _family(cls: type) -> Protocol:
    """The protocol whose base spec ``cls`` subclasses."""
    for p in protocols():
        if issubclass(cls, p.base()):
            return p
    raise ProtocolError(f"{cls.__name__} subclasses no registered protocol's base spec")


def builtin_ancestor(cls: type) -> type | None:
    """The nearest registered spec class that ``cls`` is or subclasses (the class an engine
    variant was written against), ``None`` when there is none."""
    specs = [make() for p in protocols() for make in p.specs.values()]
    return next((klass for klass in cls.__mro__ if klass in specs), None)


def _bases() -> tuple[type, ...]:
    return tuple(p.base() for p in protocols())


def base_names() -> str:
    """The registered protocols' base spec classes, by name (``PdProtocol``)."""
    return " or ".join(b.__name__ for b in _bases())


def _trusted_class(ref: str, wanted: Path, cls_name: str) -> type:
    exact = _trusted.get(wanted, {}).get(cls_name) if wanted.is_absolute() else None
    if exact is not None:
        return exact
    same = [classes[cls_name] for f, classes in _trusted.items() if f.name == wanted.name and cls_name in classes]
    if len(same) == 1:
        return same[0]
    if len(same) > 1:
        raise ProtocolError(f"{_short(ref)}: several --variant files named {wanted.name} define {cls_name}")
    passed = [f for f in _trusted if f == wanted or f.name == wanted.name]
    if passed:
        found = ", ".join(sorted(_trusted[passed[0]])) or "none"
        raise ProtocolError(f"{_short(ref)}: {cls_name} is not a {base_names()} subclass of the variant file "
                            f"{passed[0]} (it defines: {found})")
    raise ProtocolError(f"{_short(ref)} is an engine variant, and a variant file is code: nothing was run; "
                        f"pass the file with --variant {wanted.name} to trust it")


def variant_classes(module: ModuleType) -> list[type]:
    """The subclasses of a registered protocol's base spec that ``module`` defines itself."""
    bases = _bases()
    return [v for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, bases) and v not in bases and v.__module__ == module.__name__]


def trust_variant(path: str | Path) -> ModuleType:
    """Run the variant file ``path`` (once per file) and register the protocol subclasses it
    defines; returns its module.  Only for a file the user named: this executes it."""
    p = Path(path)
    if p.suffix != ".py":
        raise ProtocolError(f"{p}: expected a Python file (.py) defining a {base_names()} subclass")
    if not p.is_file():
        raise ProtocolError(f"{p}: no such variant file")
    p = p.resolve()
    module = _exec_module(p)
    _trusted[p] = {v.__name__: v for v in variant_classes(module)}
    return module


def trusted_files() -> list[Path]:
    """The variant files trusted so far (resolved paths)."""
    return list(_trusted)


@contextmanager
def variant_scope() -> Iterator[None]:
    """Trust no variant on entry; on exit, forget what was trusted inside and restore the
    variants trusted before."""
    saved = dict(_trusted)
    _trusted.clear()
    try:
        yield
    finally:
        _trusted.clear()
        _trusted.update(saved)


def variant_error(e: BaseException) -> str | None:
    """One line for an exception raised while a trusted variant's code ran (``None`` if no
    variant took part): ``file:line`` of the innermost frame in the variant file or, when the
    variant's code returned something kvproof could not use, the variant class and file and
    where kvproof failed on it."""
    files = {str(f): f for f in _trusted}
    classes = tuple(c for defined in _trusted.values() for c in defined.values())
    in_file, variant, last = None, None, None
    for frame, line in traceback.walk_tb(e.__traceback__):
        last = (frame.f_code.co_filename, line, frame.f_code.co_name)
        if frame.f_code.co_filename in files:
            in_file = f"{frame.f_code.co_filename}:{line}"
        if variant is None and classes and isinstance(frame.f_locals.get("self"), classes):
            variant = type(frame.f_locals["self"])
    what = f"{type(e).__name__}: {_one_line(e)}"
    if in_file is not None:
        return f"{in_file}: {type(e).__name__} in the engine variant: {_one_line(e)}"
    if variant is not None:
        file = sys.modules[variant.__module__].__file__
        return (f"{file}: {what} (while running the engine variant {variant.__name__}: raised in "
                f"{Path(last[0]).name}:{last[1]} {last[2]}; check what the variant's methods return)")
    return None


def _exec_module(path: Path) -> ModuleType:
    try:
        digest = hashlib.sha256(str(path).encode() + b"\0" + path.read_bytes()).hexdigest()[:16]
    except OSError as e:
        raise ProtocolError(f"{path}: cannot read: {e.strerror or e}") from None
    mod_name = f"kvproof_variant_{digest}"  # once per file and content: an edited file runs again
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:  # a user's file: one line naming the file and the line
        del sys.modules[mod_name]
        line = getattr(e, "lineno", None) if isinstance(e, SyntaxError) and e.filename == str(path) else None
        for frame, n in traceback.walk_tb(e.__traceback__):
            if frame.f_code.co_filename == str(path):
                line = n
        where = f"{path}:{line}" if line else str(path)
        raise ProtocolError(f"{where}: the variant failed to load: {type(e).__name__}: {_one_line(e)}") from None
    return module


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:500]


def _short(ref: str) -> str:
    return repr(ref if len(ref) <= 120 else ref[:117] + "...")
