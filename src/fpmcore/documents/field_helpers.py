"""Converters and validators the attrs classes of the host share.

The converters are plain Python functions on purpose: attrs reads a converter's signature (``inspect.signature``) to annotate the
generated ``__init__``. For a builtin such as ``tuple`` or ``frozenset`` that
means parsing its text signature with :mod:`tokenize`, whose first use
compiles tokenize's regular expressions: about 8 ms at every start for the
classes the CLI imports. A Python function's signature is read from its code
object at no such cost, so the data model's fields use these two.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs


def as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    """``tuple(value)``: a list field's converter."""
    return tuple(value)


def as_frozenset(value: Iterable[Any]) -> frozenset[Any]:
    """``frozenset(value)``: a set field's converter."""
    return frozenset(value)


def nonblank(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """The validator of a field that must be a non-blank string."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{attribute.name} must be a non-blank string; got {value!r}")
