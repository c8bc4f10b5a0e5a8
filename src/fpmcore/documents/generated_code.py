"""The code attrs and cattrs generate for the data model, kept between runs as Python keeps bytecode.

attrs writes the ``__init__``, ``__eq__``, ``__hash__`` … of every class as
Python source and compiles it when the class is created; cattrs does the same
for every converter function.  fpmcore has about a hundred such classes on the
way to a one-request ``fpm replay``, and compiling their methods was a quarter
of that command's instructions (callgrind: 237 M of 977 M), every run, for
source text that never changes between runs.

:func:`install` gives a module (``attr._make``, ``cattrs.gen``) its own
``compile`` that looks the source up first in a cache file beside this
module's bytecode (``__pycache__/generated_code.<tag>.code``, under
``sys.pycache_prefix`` when that is set):

* The key is everything ``compile`` depends on: the source text, the file
  name, the mode and the compiler flags, including the ``__future__`` flags
  the calling module would have passed on (``attr._make`` compiles with
  ``annotations``).  A changed attrs, cattrs or class gives another source,
  so a stale entry is never used, only left unused; the file is tied to the
  interpreter's bytecode magic number and is ignored whole under another.
* The values are the code objects marshalled, as in a ``.pyc``, loaded only
  when asked for.
* Entries compiled in this process are added to the file when the process
  exits, written atomically (the last writer wins; a lost entry is compiled
  again next time), and not at all under ``PYTHONDONTWRITEBYTECODE`` /
  ``-B`` or in a folder that cannot be written.  A file grown past
  :data:`MAX_ENTRIES` is rewritten with only this process's entries.
* Anything unusual (bytes or AST input, ``optimize``, flags beyond the
  ``__future__`` ones, an unreadable file) takes the builtin ``compile``.

The result is the code object ``compile`` itself would return, but for the
column of one constant in attrs' ``__hash__`` (:data:`TYPE_HASH`).
"""

from __future__ import annotations
import __future__

import atexit
import builtins
import marshal
import os
import re
import sys
from importlib import import_module
from importlib.util import MAGIC_NUMBER, cache_from_source
from types import CodeType
from typing import Any

#: The ``__future__`` compiler flags ``compile`` inherits from its caller (CPython's ``PyCF_MASK``).
FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    if _name != "nested_scopes":  # always on; its bit is CO_NESTED in a code object's flags
        FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag
#: The file's first bytes: the interpreter's bytecode magic and this format's version.
HEADER = MAGIC_NUMBER + b"fpm-generated-code-1\n"
#: A file with more entries than this is rewritten with only the entries of the process writing it.
MAX_ENTRIES = 4000

_Key = tuple[str, str, str, int]
#: The builtin ``compile``, whatever :func:`install` does to :mod:`builtins` for a moment.
_builtin_compile = builtins.compile

#: attrs writes each class's ``__hash__`` with the hash of its own name as the first item of the tuple it
#: hashes, a number that differs from process to process (string hashing is randomized).  It is keyed as
#: :data:`TYPE_HASH_STAND_IN` and put back into the code's constants (:func:`with_constant`).  The one
#: trace this leaves: when the number is printed with another length than the stand-in's 19 characters
#: (about half the time), the end column recorded for the instruction loading it is the stand-in's; the
#: instruction loads a constant, which cannot raise, so no traceback shows it.
TYPE_HASH = re.compile(r"hash\(\(\n\s*(-?\d+),\n")
TYPE_HASH_STAND_IN = "9" * 19


def with_constant(code: CodeType, old: int, new: int) -> CodeType:
    """``code`` with the int constant ``old`` made ``new``, in it and in the code objects it holds."""
    consts = tuple(
        new if type(c) is int and c == old else with_constant(c, old, new) if isinstance(c, CodeType) else c
        for c in code.co_consts
    )
    return code.replace(co_consts=consts)


class CodeCache:
    """Compiled generated source, read from and written to :attr:`path`."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._stored: dict[_Key, bytes] | None = None
        self._added: dict[_Key, bytes] = {}
        self._used: set[_Key] = set()
        self._exit_registered = False

    def _entries(self) -> dict[_Key, bytes]:
        if self._stored is None:
            self._stored = {}
            if self.path is not None:
                try:
                    with open(self.path, "rb") as f:
                        data = f.read()
                    if data.startswith(HEADER):
                        stored = marshal.loads(data[len(HEADER) :])
                        if isinstance(stored, dict):
                            self._stored = stored
                except (OSError, ValueError, EOFError, TypeError):
                    pass  # no file, or not one of ours: compile
        return self._stored

    def compile(
        self, source: Any, filename: Any, mode: str, flags: int = 0, dont_inherit: bool = False, optimize: int = -1
    ) -> Any:
        """``compile(source, filename, mode, flags, dont_inherit, optimize)``, from the cache when it holds it."""
        if not dont_inherit:
            flags |= sys._getframe(1).f_code.co_flags & FUTURE_FLAGS
        if not (isinstance(source, str) and isinstance(filename, str) and optimize == -1 and not flags & ~FUTURE_FLAGS):
            return _builtin_compile(source, filename, mode, flags, True, optimize)
        found = TYPE_HASH.search(source) if "hash((" in source else None
        if found is not None:
            if TYPE_HASH_STAND_IN in source:
                return _builtin_compile(source, filename, mode, flags, True)
            source = f"{source[: found.start(1)]}{TYPE_HASH_STAND_IN}{source[found.end(1) :]}"
        key = (source, filename, mode, flags)
        blob = self._entries().get(key)
        code = None
        if blob is not None:
            try:
                code = marshal.loads(blob)
            except (ValueError, EOFError, TypeError):
                pass
        if isinstance(code, CodeType):
            self._used.add(key)
        else:
            code = _builtin_compile(source, filename, mode, flags, True)
            self._added[key] = marshal.dumps(code)
            if not self._exit_registered:
                self._exit_registered = True
                atexit.register(self.save)
        return with_constant(code, int(TYPE_HASH_STAND_IN), int(found[1])) if found is not None else code

    def save(self) -> None:
        """Add this process's new entries to the file (atomically), unless bytecode is not to be written."""
        if not self._added or self.path is None or sys.dont_write_bytecode:
            return
        entries = self._entries()
        if len(entries) + len(self._added) > MAX_ENTRIES:
            entries = {k: entries[k] for k in self._used}
        entries = {**entries, **self._added}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(HEADER + marshal.dumps(entries))
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return
        self._stored, self._added = entries, {}


def default_path() -> str | None:
    """Where the cache lives: beside this module's bytecode (``None`` when there is no such place)."""
    try:
        return cache_from_source(__file__)[: -len(".pyc")] + ".code"
    except (NotImplementedError, ValueError):
        return None


#: The process's one cache.
CACHE = CodeCache(default_path())


def install(module_name: str) -> None:
    """Give the module ``module_name`` (imported here) the cache's ``compile`` in place of the builtin one.

    A module not imported yet is imported with the cache's ``compile`` as the builtin one, so that
    what it generates while it is imported is cached too: attrs makes its own classes
    (``Attribute``, the validators …) with its generated methods, 28 ``compile`` calls on every start.
    The builtin is restored before this returns.
    """
    if module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        builtins.compile = CACHE.compile  # type: ignore[assignment]
        try:
            module = import_module(module_name)
        finally:
            builtins.compile = _builtin_compile
    if getattr(module, "compile", None) is not CACHE.compile:
        module.compile = CACHE.compile  # type: ignore[attr-defined]
