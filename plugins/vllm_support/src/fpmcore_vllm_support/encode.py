"""The JSON encoding of live vLLM values (02 §3.7 "Field encoding in fields").

vLLM and torch are never imported: values are recognised by their type's
name and module.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from fpmcore.plugin_api import cdiv as cdiv  # the host's one cdiv (01 §1.1), re-exported for the runtime plugins


def encode_value(value: Any) -> Any:
    """Encode one spec or config field as JSON (02 §3.7).

    torch dtypes become ``"torch.<name>"``, tuples lists, enums their member
    name, ``MultipleOf(n)`` ``{"multiple_of": n}``, a ``Fraction`` ``"a/b"``, a
    non-finite float its text (``"inf"``, ``"nan"``) and ``None`` ``null``.
    Nested dataclasses become objects of their fields; anything else its ``str``.
    """
    if isinstance(value, enum.Enum):
        return value.name
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if type(value).__name__ == "MultipleOf" and hasattr(value, "base"):
        return {"multiple_of": int(value.base)}
    if type(value).__name__ == "dtype" and type(value).__module__ == "torch":
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): encode_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [encode_value(v) for v in items]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode_value(getattr(value, f.name, None)) for f in dataclasses.fields(value)}
    return str(value)


def class_name(obj: Any) -> str:
    """Fully qualified class name of an object or class (``vllm.v1.kv_cache_interface.MambaSpec``)."""
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def spec_fields(spec: Any) -> dict[str, Any]:
    """Every dataclass field of a spec by name, encoded (02 §3.7)."""
    return {f.name: encode_value(getattr(spec, f.name, None)) for f in dataclasses.fields(spec)}

