"""Field declarations shared by the structural check, the converter and JSON Schema.

Each field of a data-model class (:mod:`fpmcore.documents.profile`) is declared once,
with :func:`field`, and carries a :class:`FieldSpec` in its attrs metadata.
Three things are derived from it, so that they can never disagree:

* :func:`check_structure` — the structural rules P-S1 … P-S4 of 01 §1.3, with
  a JSON path to the offending object;
* :func:`structure` and :func:`unstructure` — a checked object built from
  its specs, and its written form in declaration order with absent optional
  fields omitted (01 §9.1).  They are the hooks of the model classes in
  :data:`converter`, the one cattrs converter, with strict scalar hooks (no
  ``"false"`` → ``True``, no ``2176.0`` → ``2176``) for the classes not
  declared here (the runtime observation records, :mod:`fpmcore.documents.record`);
* :func:`json_schema` — a JSON Schema (draft 2020-12) of a class.

Structural order: the whole tree is checked before any object rule runs.  In
one object the checks go P-S1 (unknown keys, in document order), P-S2
(missing keys, in declaration order), then per field in declaration order
P-S3 (type) and P-S4 (range), then the nested objects in declaration order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.documents.field_helpers import as_tuple
from fpmcore.documents.jsonio import is_finite_number, one_line

if TYPE_CHECKING:
    import cattrs

MAX_EXACT = 2**53
MAX_U32 = 2**32 - 1

_NOTHING = attrs.NOTHING


@attrs.frozen
class FieldSpec:
    """How one field looks in JSON.

    ``kind``: ``u32`` (count, 0..2**32-1), ``u64`` (bytes, 0..2**53), ``int``
    (any integer), ``float``, ``str``, ``bool``, ``enum`` (``values``),
    ``obj`` (``cls``) or ``list`` (of ``cls``).  ``minimum``: the smallest
    integer of a ``u32``/``u64`` field (0, or 1 for the topology counts of
    01 §6.1), checked by P-S4 like the upper bound.  ``required``: must be present
    on read.  ``nullable``: ``null`` is a value.  ``omit``: left out of the
    written form when ``None`` (or, for a list, when empty).
    """

    kind: str
    required: bool = True
    nullable: bool = False
    omit: bool = False
    values: tuple[Any, ...] = ()
    cls: type | None = None
    description: str = ""
    minimum: int = 0


def field(
    kind: str,
    *,
    required: bool = True,
    nullable: bool = False,
    omit: bool = False,
    default: Any = _NOTHING,
    values: tuple[Any, ...] = (),
    cls: type | None = None,
    description: str = "",
    minimum: int = 0,
) -> Any:
    """Declare a model field (an ``attrs.field`` carrying its :class:`FieldSpec`)."""
    spec = FieldSpec(kind, required, nullable, omit, values, cls, description, minimum)
    if default is _NOTHING and not required:
        default = [] if kind == "list" else None
    if isinstance(default, list):
        return attrs.field(factory=list, converter=as_tuple, metadata={"fpm": spec})
    conv = as_tuple if kind == "list" else None
    return attrs.field(default=default, converter=conv, metadata={"fpm": spec})


def specs(cls: type) -> list[tuple[str, FieldSpec]]:
    """``(name, spec)`` of every declared field of ``cls``, in declaration order."""
    return [(a.name, a.metadata["fpm"]) for a in attrs.fields(cls)]


# ---------------------------------------------------------------------------
# rendering of values in messages (01 §1.3)
# ---------------------------------------------------------------------------


def render(value: Any) -> str:
    """A value as messages print it: JSON for scalars, floats as ``repr``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def render_opt(value: Any) -> str:
    """Like :func:`render`, with ``absent`` for a missing optional value."""
    return "absent" if value is None else render(value)


def quote(text: str) -> str:
    """``'text'``, with characters that are not printable escaped (a message stays one line)."""
    return f"'{one_line(text)}'"


def join_or(values: tuple[Any, ...]) -> str:
    names = [str(v) for v in values]
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


# ---------------------------------------------------------------------------
# structural rules P-S1 … P-S4
# ---------------------------------------------------------------------------

_TYPE_WORDS = {
    "u32": "an integer",
    "u64": "an integer",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "a boolean",
    "obj": "an object",
    "list": "an array",
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _type_ok(spec: FieldSpec, v: Any) -> bool:
    if v is None:
        return spec.nullable
    k = spec.kind
    if k in ("u32", "u64", "int"):
        return _is_int(v)
    if k == "float":
        return is_finite_number(v)
    if k == "str":
        return isinstance(v, str)
    if k == "bool":
        return isinstance(v, bool)
    if k == "enum":
        return any(type(v) is type(m) and v == m for m in spec.values)
    if k == "obj":
        return isinstance(v, Mapping)
    if k == "list":
        return isinstance(v, list)
    raise AssertionError(k)  # pragma: no cover


def _type_message(key: str, spec: FieldSpec, v: Any) -> str:
    if spec.kind == "enum":
        shown = quote(v) if isinstance(v, str) else render(v)
        if len(spec.values) == 1:
            return f"{key} must be {render(spec.values[0]) if not isinstance(spec.values[0], str) else spec.values[0]}; got {shown}"
        return f"{key} must be one of {join_or(spec.values)}; got {shown}"
    word = _TYPE_WORDS[spec.kind]
    if spec.nullable:
        word += " or null"
    return f"{key} must be {word}; got {render(v)}"


def _in_range(spec: FieldSpec, v: Any) -> bool:
    if v is None or not _is_int(v):
        return True
    if spec.kind == "u32":
        return bool(spec.minimum <= v <= MAX_U32)
    if spec.kind == "u64":
        return bool(spec.minimum <= v <= MAX_EXACT)
    return True


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def check_structure(data: Any, cls: type, path: str = "") -> None:
    """Raise :class:`FpmError` (P-S1 … P-S4) at the first structural fault of ``data``."""
    if not isinstance(data, Mapping):
        raise FpmError("P-S3", f"{cls.__name__} must be an object; got {render(data)}", path)
    fields = specs(cls)
    declared = {name for name, _ in fields}
    for key in data:
        if key not in declared:
            raise FpmError("P-S1", f"unknown field {quote(key)}", path)
    for name, spec in fields:
        if spec.required and name not in data:
            raise FpmError("P-S2", f"missing required field {quote(name)}", path)
    for name, spec in fields:
        if name in data and not _type_ok(spec, data[name]):
            raise FpmError("P-S3", _type_message(name, spec, data[name]), path)
    for name, spec in fields:
        if name in data and not _in_range(spec, data[name]):
            raise FpmError("P-S4", f"{name} is out of range; got {render(data[name])}", path)
    for name, spec in fields:
        value = data.get(name)
        if value is None or spec.cls is None:
            continue
        if spec.kind == "obj":
            check_structure(value, spec.cls, _join(path, name))
        elif spec.kind == "list":
            for i, item in enumerate(value):
                check_structure(item, spec.cls, _join(_join(path, name), i))


# ---------------------------------------------------------------------------
# building and writing model objects; the one converter
# ---------------------------------------------------------------------------


def is_model_class(cls: Any) -> bool:
    """Whether ``cls`` is a model class: an attrs class whose every field is declared with :func:`field`."""
    return attrs.has(cls) and all("fpm" in a.metadata for a in attrs.fields(cls))


def structure(data: Mapping[str, Any], cls: type) -> Any:
    """Build ``cls`` from structurally valid ``data`` (after :func:`check_structure`).

    Each present field is passed as read, but for an ``obj`` or ``list`` field (its class built from
    each object) and a ``float`` field (an integer made a float, 01 §1.2); an absent optional field takes
    its default.  Nothing is checked again: :func:`check_structure` has judged every type and range, with
    the rule and the JSON path a message needs, so a model object is built without cattrs, which the
    reading of a profile then never imports.
    """
    kwargs: dict[str, Any] = {}
    for a in attrs.fields(cls):
        if a.name not in data:
            continue
        value = data[a.name]
        spec: FieldSpec = a.metadata["fpm"]
        if value is not None:
            if spec.kind == "obj":
                value = structure(value, _cls(spec))
            elif spec.kind == "list":
                value = [structure(item, _cls(spec)) for item in value]
            elif spec.kind == "float":
                value = float(value)
        kwargs[a.alias] = value
    return cls(**kwargs)


def unstructure(obj: Any) -> Any:
    """The written form of a model object: declaration order, absent optionals omitted."""
    if not attrs.has(type(obj)):
        return obj
    out: dict[str, Any] = {}
    for a in attrs.fields(type(obj)):
        spec: FieldSpec = a.metadata["fpm"]
        value = getattr(obj, a.name)
        if spec.omit and (value is None or (spec.kind == "list" and len(value) == 0)):
            continue
        if spec.kind == "list":
            out[a.name] = [unstructure(v) for v in value]
        elif spec.kind == "float" and value is not None:
            out[a.name] = float(value)
        else:
            out[a.name] = unstructure(value)
    return out


def _strict(kind: str) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _type: Any) -> Any:
        ok = {
            "int": _is_int(value),
            "float": is_finite_number(value),
            "str": isinstance(value, str),
            "bool": isinstance(value, bool),
        }[kind]
        if not ok:
            raise TypeError(f"expected {kind}, got {render(value)}")
        return float(value) if kind == "float" else value

    return hook


def structure_checked(data: Any, cls: type) -> Any:
    """:func:`check_structure`, then :func:`structure`: ``cls`` from parsed JSON, or the first P-S1 … P-S4 fault."""
    check_structure(data, cls)
    return structure(data, cls)


def _make_converter() -> cattrs.Converter:
    import cattrs

    from fpmcore.documents.generated_code import install

    install("cattrs.gen")  # the converter functions cattrs generates, compiled once (generated_code)
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(int, _strict("int"))
    conv.register_structure_hook(float, _strict("float"))
    conv.register_structure_hook(str, _strict("str"))
    conv.register_structure_hook(bool, _strict("bool"))
    conv.register_structure_hook_func(is_model_class, structure_checked)
    conv.register_unstructure_hook_func(is_model_class, unstructure)
    return conv


_converter: cattrs.Converter | None = None


def __getattr__(name: str) -> Any:
    """:data:`converter`, made when first read: a command that reads only model documents never imports cattrs."""
    global _converter
    if name == "converter":
        if _converter is None:
            _converter = _make_converter()
        return _converter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The one cattrs converter (made when first read, :func:`__getattr__`): strict scalars, unknown keys refused.
#: A model class goes through :func:`check_structure` and :func:`structure`, so that its refusals are the
#: rules P-S1 … P-S4 whichever way it is read, and is written by :func:`unstructure`.
converter: cattrs.Converter


# ---------------------------------------------------------------------------
# JSON Schema
# ---------------------------------------------------------------------------


def _cls(spec: FieldSpec) -> type:
    """The attrs class of an ``obj`` or ``list`` field (declared with one)."""
    assert spec.cls is not None, spec
    return spec.cls


def _field_schema(spec: FieldSpec, defs: dict[str, Any]) -> dict[str, Any]:
    k = spec.kind
    if k == "u32":
        s: dict[str, Any] = {"type": "integer", "minimum": spec.minimum, "maximum": MAX_U32}
    elif k == "u64":
        s = {"type": "integer", "minimum": spec.minimum, "maximum": MAX_EXACT}
    elif k == "int":
        s = {"type": "integer"}
    elif k == "float":
        s = {"type": "number"}
    elif k == "str":
        s = {"type": "string"}
    elif k == "bool":
        s = {"type": "boolean"}
    elif k == "enum":
        s = {"enum": list(spec.values)}
    elif k == "obj":
        s = {"$ref": f"#/$defs/{_define(_cls(spec), defs)}"}
    else:
        s = {"type": "array", "items": {"$ref": f"#/$defs/{_define(_cls(spec), defs)}"}}
    if spec.nullable:
        s = {"anyOf": [s, {"type": "null"}]}
    if spec.description:
        s["description"] = spec.description
    return s


def _object_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    fields = specs(cls)
    return {
        "type": "object",
        "description": (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "",
        "properties": {name: _field_schema(spec, defs) for name, spec in fields},
        "required": [name for name, spec in fields if spec.required],
        "additionalProperties": False,
    }


def _define(cls: type, defs: dict[str, Any]) -> str:
    name = cls.__name__
    if name not in defs:
        defs[name] = {}
        defs[name] = _object_schema(cls, defs)
    return name


def json_schema(cls: type, schema_id: str) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of ``cls`` and every class it nests.

    It states the structural rules (P-S1 … P-S4); the object rules (P-1 …)
    are beyond JSON Schema and are checked by ``fpm profile check``.
    """
    defs: dict[str, Any] = {}
    root = _object_schema(cls, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": cls.__name__,
        **root,
        "$defs": defs,
    }


# ---------------------------------------------------------------------------
# the JSON Schemas of fpmcore's documents
# ---------------------------------------------------------------------------

#: The JSON Schema dialect of every schema fpmcore prints.
DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: ``$id`` of a schema: this base, the schema's name and ``/v1``.
SCHEMA_BASE = "https://fpmcore.invalid/schema/"
#: A lowercase hexadecimal SHA-256 digest.
HEX64_PATTERN = "^[0-9a-f]{64}$"


def schema_document(name: str, title: str, description: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A whole schema: dialect, ``$id`` (from ``name``), title and description, then ``body``."""
    return {"$schema": DIALECT, "$id": f"{SCHEMA_BASE}{name}/v1", "title": title, "description": description, **body}


def obj(
    properties: Mapping[str, Any], required: tuple[str, ...] | list[str] = (), *, closed: bool = False, **extra: Any
) -> dict[str, Any]:
    """An object schema; ``closed``: keys other than ``properties`` are refused."""
    out: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        out["required"] = list(required)
    if closed:
        out["additionalProperties"] = False
    out.update(extra)
    return out


def array(items: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """An array schema whose elements follow ``items``."""
    return {"type": "array", "items": dict(items), **extra}


def enum(values: tuple[Any, ...] | list[Any], description: str = "") -> dict[str, Any]:
    """One of ``values`` (a single value is a ``const``)."""
    out: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": list(values)}
    if description:
        out["description"] = description
    return out


@attrs.frozen
class SchemaEntry:
    """One schema ``fpm schema NAME`` prints: its name, heading, what it describes, and the function
    (``module:function``, beside the document's reader) that builds it."""

    name: str
    title: str
    summary: str
    factory: str

    def build(self) -> dict[str, Any]:
        from fpmcore.host.entry_points import import_object

        build = cast("Callable[[], dict[str, Any]]", import_object(self.factory))
        return build()


#: Every schema, in the order the documentation shows them.
SCHEMAS: tuple[SchemaEntry, ...] = (
    SchemaEntry("profile", "Profile", "an FPM profile file (01), read by `fpm profile check` and every pipeline",
                "fpmcore.documents.profile:profile_json_schema"),
    SchemaEntry("record", "Runtime observation record", "one record of the observer inside vLLM (02 §3), read by "
                "`fpm import`", "fpmcore.documents.record:record_json_schema"),
    SchemaEntry("plan", "Plan", "the plan file `fpm plan -o` writes, or a frozen collection plan (04, 05 §6.2), "
                "read by `fpm collect`, `fpm validate --plan` and `fpm publish --plan`",
                "fpmcore.plan.planning:plan_json_schema"),
    SchemaEntry("artifact-index", "Artifact index", "`index.json` of a collected attempt (05 §1): the files the "
                "reader opens, pinned by SHA-256", "fpmcore.validate.schemas:artifact_index_json_schema"),
    SchemaEntry("rank-artifact", "Rank artifact", "`r<k>.json`, the measurements of one DP rank with its rows "
                "(05 §2 - §4, §7)", "fpmcore.validate.schemas:rank_artifact_json_schema"),
    SchemaEntry("points", "Staged point manifest", "`points.json`, the point list a collection staged (04 G-22)",
                "fpmcore.validate.schemas:points_json_schema"),
    SchemaEntry("provenance", "Collector provenance", "`provenance.json` of an attempt (05 §6.1)",
                "fpmcore.validate.schemas:provenance_json_schema"),
    SchemaEntry("repetition-evidence", "Repetition-evidence line", "one line of the sidecar `repetitions.jsonl` "
                "(05 §7.5)", "fpmcore.validate.schemas:repetition_evidence_json_schema"),
    SchemaEntry("trace", "Trace line", "one line of a JSONL request trace (06 R-32, R-33), read by `fpm replay` "
                "and `fpm sweep`", "fpmcore.replay.trace:trace_line_json_schema"),
    SchemaEntry("table", "FPM latency table", "the table `fpm publish` writes and `fpm replay --fpm-table` reads "
                "(06 R-27)", "fpmcore.replay.table:table_json_schema"),
    SchemaEntry("grid", "Sweep grid", "the grid `fpm sweep` reads (JSON, or TOML of the same shape)",
                "fpmcore.sweep.grid:grid_json_schema"),
)  # fmt: skip


def schema_named(name: str) -> SchemaEntry | None:
    """The entry of :data:`SCHEMAS` called ``name``, ``None`` for an unknown name."""
    return next((e for e in SCHEMAS if e.name == name), None)
