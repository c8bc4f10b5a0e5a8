"""The entry points of one group, read from the installed distributions' metadata folders.

The host reads the entry points of ``fpmcore.plugins`` on every ``fpm`` run.
:mod:`importlib.metadata` answers that, and its import alone costs about
25 ms on Python 3.11 (it imports ``email``, ``zipfile``, ``socket`` and
more): an eighth of a whole cold ``fpm`` command.  What the host needs is
small — per distribution on ``sys.path`` its name, its version and the lines
of one section of its ``entry_points.txt`` — and this module reads exactly
that from the ``*.dist-info`` and ``*.egg-info`` folders of the directories
on ``sys.path``, in ``importlib.metadata``'s order: ``sys.path`` in order,
the first distribution of a name wins.

Anything it does not read the way ``importlib.metadata`` would (a zip file
on ``sys.path``, an ``.egg-info`` file rather than a folder, a metadata file
without a name, an unreadable file) makes :func:`read_group` answer ``None``,
and the caller asks :mod:`importlib.metadata` instead.  ``tests/test_entry_points.py``
checks that both give the same entry points in the installed environment.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable

import attrs

#: ``module[:attr.path] [extras]`` (the entry point value syntax of the packaging specification).
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


@attrs.frozen
class EntryPoint:
    """One entry point: ``name = value`` of a group, and the distribution that declares it."""

    name: str
    value: str
    dist_name: str | None
    dist_version: str | None

    def load(self) -> object:
        """Import the module the value names and return the attribute it names (the module without one)."""
        if _VALUE.match(self.value) is None:
            raise ValueError(f"entry point {self.name!r}: malformed value {self.value!r}")
        return import_object(self.value)


def import_object(reference: str) -> object:
    """The object ``reference`` names, its module imported.

    ``reference`` is written as an entry point's value: ``"module"`` names the
    module, ``"module:attribute"`` (or ``"module:attribute.path"``) an attribute
    of it; extras (``[...]``) are ignored.  Every place that names code by a
    string (entry points, the plugin API's names, a runtime plugin's rules, a
    schema's builder, a contract's rules) is read here.

    >>> import_object("fpmcore.host.entry_points:import_object") is import_object
    True

    A reference that is not of that form raises :class:`ValueError`; a module
    that does not import or an attribute it lacks raises what importing or
    ``getattr`` raises.
    """
    import importlib

    match = _VALUE.match(reference)
    if match is None:
        raise ValueError(f"malformed reference {reference!r}: expected 'module' or 'module:attribute'")
    obj: object = importlib.import_module(match.group("module"))
    for part in filter(None, (match.group("attr") or "").split(".")):
        obj = getattr(obj, part)
    return obj


class _Unreadable(Exception):
    """Metadata this reader does not read as importlib.metadata would: the caller falls back to it."""


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _headers(path: str) -> tuple[str, str | None]:
    """The ``Name`` and ``Version`` headers of a ``METADATA``/``PKG-INFO`` file (the headers end at a blank line)."""
    name = version = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                break
            key, sep, value = line.partition(":")
            if not sep:
                continue
            if key == "Name" and name is None:
                name = value.strip()
            elif key == "Version" and version is None:
                version = value.strip()
    if not name:
        raise _Unreadable(path)
    return name, version


def _name_from_folder(folder: str) -> str:
    """The distribution name a metadata folder's own name gives (``pluggy`` of ``pluggy-1.5.0.dist-info``).

    ``importlib.metadata`` tells distributions apart by this name when the
    folder's name has one (``PathDistribution._normalized_name``), so its
    ``METADATA`` is read only for a distribution that declares entry points
    of the group, or whose folder name gives no name.
    """
    stem = os.path.splitext(os.path.basename(folder))[0]
    return stem.partition("-")[0]


def _section(path: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` lines of section ``[group]`` of an ``entry_points.txt`` (INI, as importlib reads it)."""
    found: list[tuple[str, str]] = []
    inside = False
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if group not in text:  # no section of that name (most files: a distribution's own scripts)
        return found
    for raw in text.split("\n"):  # the file's line ends, read in text mode, are "\n"
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise _Unreadable(path)
            inside = line[1:-1].strip() == group
            continue
        if inside:
            name, sep, value = line.partition("=")
            if not sep:
                raise _Unreadable(path)
            found.append((name.strip(), value.strip()))
    return found


def _distributions(entries: Iterable[str]) -> Iterable[tuple[str, str]]:
    """``(folder, metadata file)`` of every distribution folder in the directories ``entries``, in order."""
    for entry in entries:
        root = entry or "."
        if not os.path.isdir(root):
            if os.path.exists(root):  # a zip file (or any non-folder) on sys.path
                raise _Unreadable(root)
            continue
        try:
            with os.scandir(root) as scan:
                children = list(scan)  # the directory's own order, as os.listdir gives it
        except OSError as exc:
            raise _Unreadable(root) from exc
        for child in children:
            low = child.name.lower()
            if low.endswith(".dist-info"):
                meta = "METADATA"
            elif low.endswith(".egg-info"):
                meta = "PKG-INFO"
            else:
                continue
            folder = os.path.join(root, child.name)
            if not child.is_dir():  # the directory entry's type: no stat of its own
                raise _Unreadable(folder)
            yield folder, os.path.join(folder, meta)


def read_group(group: str, path: Iterable[str] | None = None) -> list[EntryPoint] | None:
    """Every entry point of ``group`` declared by a distribution on ``path`` (default ``sys.path``).

    One entry per distribution name (the first found on the path, as
    ``importlib.metadata.entry_points`` keeps it); ``None`` when some
    metadata on the path is not of a kind this module reads.
    """
    seen: set[str] = set()
    found: list[EntryPoint] = []
    try:
        for folder, meta in _distributions(sys.path if path is None else path):
            eps_file = os.path.join(folder, "entry_points.txt")
            if not os.path.exists(meta):
                if os.path.exists(eps_file):
                    raise _Unreadable(folder)
                continue
            stem_name = _name_from_folder(folder)
            headers = None if stem_name else _headers(meta)  # read later, and only when it declares the group
            key = _normalized(headers[0] if headers is not None else stem_name)
            if key in seen:
                continue
            seen.add(key)
            if os.path.exists(eps_file):
                lines = _section(eps_file, group)
                if lines:
                    name, version = headers or _headers(meta)
                    found.extend(EntryPoint(n, v, name, version) for n, v in lines)
    except (_Unreadable, OSError, UnicodeDecodeError):
        return None
    return found


def entry_points(group: str) -> list[EntryPoint]:
    """:func:`read_group` on ``sys.path``, or :mod:`importlib.metadata`'s answer when it cannot read the path."""
    eps = read_group(group)
    if eps is not None:
        return eps
    from importlib import metadata

    return [
        EntryPoint(ep.name, ep.value, ep.dist.name if ep.dist is not None else None,
                   ep.dist.version if ep.dist is not None else None)
        for ep in metadata.entry_points(group=group)
    ]  # fmt: skip
