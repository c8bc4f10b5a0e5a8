"""Request traces (06 R-32, R-33) and the SCHED.json converter.

A trace is JSONL: one request object per line.  :func:`parse_trace`
validates the whole trace before the first step and raises
:class:`~fpmcore.documents.errors.FpmError` (rule ``R-33``) at the first error, with
the exact diagnostics of R-33.  Besides ``arrival_time`` a line may give
``arrival_step`` (step-exact arrivals) and ``prefix_of``/``prefix_of_len``
(its first tokens equal an earlier request's), the two alternatives that a
step-exact comparison with vLLM 0.33.0 needs (R-40), and ``priority`` (vLLM's
request priority, used with ``--scheduling-policy priority``).  A line may
instead give its prompt as content-block ids, ``hash_ids`` with
``hash_block_tokens`` (the block-hash sharing of the public production
traces, :func:`hash_id_count`): two requests then share exactly the leading
tokens whose block ids agree, with any earlier request.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import JsonError, decode_utf8, is_finite_number, loads, read_input
from fpmcore.documents.paths import path_text

FIELDS = (
    "request_id",
    "arrival_time",
    "arrival_step",
    "prompt_len",
    "output_len",
    "shared_prefix_id",
    "shared_prefix_len",
    "prefix_of",
    "prefix_of_len",
    "priority",
    "hash_ids",
    "hash_block_tokens",
)
#: ``priority`` (vLLM's request priority, lower is scheduled first under
#: ``--scheduling-policy priority``) is any integer of at most 2**62 in magnitude.
MAX_PRIORITY = 2**62
#: A content-block id of ``hash_ids`` is an integer in ``[0, 2**63)`` (a 64-bit signed hash, made non-negative).
HASH_ID_LIMIT = 2**63
_INT_MIN = (
    ("prompt_len", 1),
    ("output_len", 1),
    ("arrival_step", 0),
    ("shared_prefix_len", 1),
    ("prefix_of_len", 1),
    ("hash_block_tokens", 1),
)


@attrs.frozen
class TraceRequest:
    """One validated trace line (R-32)."""

    request_id: str
    prompt_len: int
    output_len: int
    arrival_time: float | None = None
    arrival_step: int | None = None
    shared_prefix_id: str | None = None
    shared_prefix_len: int | None = None
    prefix_of: str | None = None
    prefix_of_len: int | None = None
    priority: int | None = None
    #: The prompt's content-block ids, one per ``hash_block_tokens`` tokens (the last block possibly partial).
    hash_ids: tuple[int, ...] | None = None
    hash_block_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The trace line, absent fields omitted."""
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}


def hash_id_count(prompt_len: int, hash_block_tokens: int) -> int:
    """The number of content-block ids a prompt of ``prompt_len`` tokens has: one per ``hash_block_tokens``
    tokens, the last block possibly partial (``ceil(prompt_len / hash_block_tokens)``).

    Block ``k`` covers tokens ``[k·H, min((k+1)·H, prompt_len))``.  Two requests hold the same tokens
    ``[0, q)`` exactly when their ids agree at every block position up to the one that holds token
    ``q − 1``: a block id names one block of content and a partial block holds its first tokens, so a
    partial trailing block shares its tokens up to the shorter of the two requests when the ids agree.

    >>> hash_id_count(1100, 512), hash_id_count(1024, 512), hash_id_count(1, 512)
    (3, 2, 1)
    """
    return -(-prompt_len // hash_block_tokens)


@attrs.frozen
class Trace:
    """A validated trace: its requests in line order and the arrival field all lines use."""

    requests: Sequence[TraceRequest]  # a tuple, or the column view of a trace read into columns
    arrival_field: str  # "arrival_time" or "arrival_step"

    @property
    def step_exact(self) -> bool:
        return self.arrival_field == "arrival_step"

    @property
    def columns(self) -> Any:
        """The :class:`~fpmcore.replay.columns.TraceColumns` of a trace read into columns, else ``None``."""
        return getattr(self.requests, "columns", None)

    def request_ids(self) -> Sequence[str]:
        """The ``request_id`` of each request, in order (made when read for a trace of columns)."""
        if self.columns is not None:
            ids: Sequence[str] = self.columns.request_ids()
            return ids
        return [r.request_id for r in self.requests]

    def arrival_times(self) -> Sequence[float | None]:
        """The ``arrival_time`` of each request, in order (``None``: arrivals in steps; the column itself for a
        trace of columns)."""
        if self.columns is not None:
            times: Sequence[float | None] = self.columns.arrival_time
            return times
        return [r.arrival_time for r in self.requests]

    def dumps(self) -> str:
        """The JSONL form of the trace."""
        return "".join(json.dumps(r.to_json()) + "\n" for r in self.requests)


def _err(msg: str, where: str = "") -> FpmError:
    return FpmError("R-33", msg, where)


def _json_problem(exc: JsonError, line: str) -> str:
    """What is wrong with a line the strict reader refused, and where; a line cut short says so."""
    reason = exc.reason
    if exc.column is not None:
        reason += f" column {exc.column}" if reason.endswith(" at") else ""
    place = ", ".join(
        [
            *([exc.path] if exc.path else []),
            *([f"column {exc.column}"] if exc.column and not reason.endswith(f"column {exc.column}") else []),
        ]
    )
    text = reason + (f" at {place}" if place else "")
    if exc.kind == "syntax" and exc.column is not None and _ends_early(line):
        text += " (the line ends before its JSON value does: truncated?)"
    return text


def _ends_early(line: str) -> bool:
    """The JSON value of ``line`` is cut short: more brackets or braces open than closed, or a string left open."""
    depth, in_string, escaped = 0, False, False
    for ch in line:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
    return in_string or depth > 0


def _render(v: Any) -> str:
    return json.dumps(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_hash_ids(obj: Mapping[str, Any], pre: str, where: str) -> tuple[int, ...] | None:
    """The ``hash_ids`` of a line (checked against its ``prompt_len`` and ``hash_block_tokens``), or None."""
    ids: Any = obj.get("hash_ids")
    hbt: Any = obj.get("hash_block_tokens")
    if ids is None and hbt is None:
        return None
    if hbt is None:
        raise _err(f"{pre}: hash_ids requires hash_block_tokens", where)
    if ids is None:
        raise _err(f"{pre}: hash_block_tokens requires hash_ids", where)
    for key in ("prefix_of", "shared_prefix_id"):
        if key in obj:
            raise _err(f"{pre}: hash_ids and {key} are mutually exclusive", where)
    if not isinstance(ids, list):
        raise _err(f"{pre}: hash_ids must be a list of integers, found {_render(ids)[:60]}", where)
    for k, v in enumerate(ids):
        if not _is_int(v) or not 0 <= v < HASH_ID_LIMIT:
            raise _err(f"{pre}: hash_ids[{k}] must be an integer in [0, 2**63), found {_render(v)[:60]}", where)
    need = hash_id_count(obj["prompt_len"], hbt)
    if len(ids) != need:
        raise _err(
            f"{pre}: hash_ids has {len(ids)} ids, prompt_len {obj['prompt_len']} needs {need} "
            f"(one per hash_block_tokens {hbt} tokens, the last block possibly partial)",
            where,
        )
    return tuple(ids)


def iter_trace_requests(lines: Iterable[str], where: str = "") -> Iterator[TraceRequest]:
    """Validate trace lines (without their line ends) one by one, in order (R-33), yielding each request.

    Blank lines after the last request are allowed (an editor leaves one), a blank line between two
    requests is not; only what relates lines is kept (ids, prompt lengths, shared prefix lengths).
    """
    ids: dict[str, int] = {}
    prefix_lens: dict[str, int] = {}
    arrival_field: str | None = None
    n = count = 0
    blank: int | None = None
    for n, line in enumerate(lines, start=1):
        pre = f"trace line {n}"
        if not line.strip():
            blank = n if blank is None else blank
            continue
        if blank is not None:
            raise _err(f"trace line {blank}: empty line", where)
        try:
            obj = loads(line)
        except JsonError as exc:  # the one strict reader: duplicate keys, NaN, lone surrogates, …
            raise _err(f"{pre}: not a json object: {_json_problem(exc, line)}", where) from None
        if not isinstance(obj, dict):
            raise _err(f"{pre}: not a json object", where)
        if "kv_handoff" in obj:
            raise _err(
                f"grouped kv caches support only cold aggregated requests, not kv handoff commands: trace line {n}",
                where,
            )
        for key in obj:
            if key not in FIELDS:
                raise _err(f"{pre}: unknown field {key}", where)
        for key in ("request_id", "prompt_len", "output_len"):
            if key not in obj:
                raise _err(f"{pre}: missing field {key}", where)
        has_t, has_s = "arrival_time" in obj, "arrival_step" in obj
        if not has_t and not has_s:
            raise _err(f"{pre}: missing field arrival_time or arrival_step", where)
        if has_t and has_s:
            raise _err(f"{pre}: arrival_time and arrival_step are mutually exclusive", where)
        field = "arrival_time" if has_t else "arrival_step"
        if arrival_field is None:
            arrival_field = field
        elif field != arrival_field:
            raise _err(f"{pre}: {field} cannot be mixed with {arrival_field} of earlier lines", where)
        for key, _ in _INT_MIN:
            if key in obj and not _is_int(obj[key]):
                raise _err(f"{pre}: {key} must be an integer, found {_render(obj[key])}", where)
        for key, lo in _INT_MIN:
            if key in obj and obj[key] < lo:
                raise _err(f"{pre}: {key} must be >= {lo}, found {obj[key]}", where)
        if "priority" in obj:
            pr = obj["priority"]
            if not _is_int(pr):
                raise _err(f"{pre}: priority must be an integer, found {_render(pr)}", where)
            if abs(pr) > MAX_PRIORITY:
                raise _err(f"{pre}: priority must be between -2**62 and 2**62, found {pr}", where)
        if has_t:
            t = obj["arrival_time"]
            if not is_finite_number(t) or t < 0:
                raise _err(f"{pre}: arrival_time must be a finite number >= 0, found {_render(t)}", where)
        for key in ("request_id", "shared_prefix_id", "prefix_of"):
            if key in obj and (not isinstance(obj[key], str) or obj[key] == ""):
                raise _err(f"{pre}: {key} must be a non-empty string, found {_render(obj[key])}", where)
        rid = obj["request_id"]
        if rid in ids:
            raise _err(f"{pre}: duplicate request_id {rid}", where)
        p = obj["prompt_len"]
        sid: Any = obj.get("shared_prefix_id")
        slen: Any = obj.get("shared_prefix_len")
        if slen is not None and sid is None:
            raise _err(f"{pre}: shared_prefix_len requires shared_prefix_id", where)
        if sid is not None and slen is None:
            raise _err(f"{pre}: shared_prefix_id requires shared_prefix_len", where)
        if slen is not None and slen > p:
            raise _err(f"{pre}: shared_prefix_len {slen} exceeds prompt_len {p}", where)
        if sid is not None:
            if sid in prefix_lens and prefix_lens[sid] != slen:
                raise _err(
                    f"{pre}: shared_prefix_id {sid} has length {slen}, earlier lines use {prefix_lens[sid]}",
                    where,
                )
        pof: Any = obj.get("prefix_of")
        plen: Any = obj.get("prefix_of_len")
        if plen is not None and pof is None:
            raise _err(f"{pre}: prefix_of_len requires prefix_of", where)
        if pof is not None and plen is None:
            raise _err(f"{pre}: prefix_of requires prefix_of_len", where)
        if pof is not None and sid is not None:
            raise _err(f"{pre}: prefix_of and shared_prefix_id are mutually exclusive", where)
        if pof is not None:
            if pof not in ids:
                raise _err(f"{pre}: prefix_of {pof} names no earlier request", where)
            if plen > p:
                raise _err(f"{pre}: prefix_of_len {plen} exceeds prompt_len {p}", where)
            if plen > ids[pof]:
                raise _err(
                    f"{pre}: prefix_of_len {plen} exceeds prompt_len {ids[pof]} of request {pof}",
                    where,
                )
        hash_ids = _check_hash_ids(obj, pre, where)
        if sid is not None:
            prefix_lens[sid] = slen
        tr = TraceRequest(
            request_id=rid,
            prompt_len=p,
            output_len=obj["output_len"],
            arrival_time=float(obj["arrival_time"]) if has_t else None,
            arrival_step=obj.get("arrival_step"),
            shared_prefix_id=sid,
            shared_prefix_len=slen,
            prefix_of=pof,
            prefix_of_len=plen,
            priority=obj.get("priority"),
            hash_ids=hash_ids,
            hash_block_tokens=obj.get("hash_block_tokens") if hash_ids is not None else None,
        )
        ids[rid] = p
        count += 1
        yield tr
    if count == 0:
        raise _err("trace is empty (blank lines only)" if n else "trace is empty", where)


def arrival_field_of(request: TraceRequest) -> str:
    """``arrival_step`` for a step-exact request, else ``arrival_time``."""
    return "arrival_time" if request.arrival_step is None else "arrival_step"


def trace_of(requests: Iterable[TraceRequest]) -> Trace:
    """The :class:`Trace` of validated requests (at least one, one arrival field)."""
    reqs = tuple(requests)
    return Trace(requests=reqs, arrival_field=arrival_field_of(reqs[0]))


def parse_trace_lines(lines: Iterable[str], where: str = "") -> Trace:
    """Validate trace lines (without their line ends) in order (R-33)."""
    return trace_of(iter_trace_requests(lines, where))


def parse_trace(text: str | bytes, where: str = "") -> Trace:
    """Validate a JSONL trace (R-33); blank lines at the end are allowed (an editor leaves one), blank lines
    between requests are not."""
    if isinstance(text, bytes):
        try:
            text = decode_utf8(text)
        except JsonError as exc:
            raise _err(
                f"trace line {exc.line or 1}: not a json object: {exc.reason} (a binary file, not a JSONL trace)", where
            ) from None
    if text == "":
        raise _err("trace is empty", where)
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise _err("trace is empty (blank lines only)", where)
    return parse_trace_lines(lines, where)


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and validate a trace file; a SCHED.json object file is converted (:func:`from_sched_json`)."""
    where = path_text(path)
    try:
        data = read_input(path)
    except OSError as exc:
        raise FpmError("R-33", f"cannot read trace: {exc.strerror}", where) from None
    stripped = data.lstrip()
    if stripped.startswith(b"{") and data.count(b"\n{") == 0:  # one JSON document, not one per line
        try:
            obj = loads(data)
        except JsonError:
            obj = None  # read as JSONL: the line that is not strict JSON is named
        if isinstance(obj, dict) and isinstance(obj.get("requests"), dict):
            return from_sched_json(obj, where=where)
        from fpmcore.documents.kinds import not_a

        other = not_a("a request trace", obj)
        if other is not None:  # a table or a profile given as the trace: say what it is
            raise FpmError("R-33", other, where)
    return parse_trace(data, where=where)


def trace_line_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one trace line, from this reader's declarations (R-32, R-33).

    :data:`FIELDS` are the properties (no other key), the integer minimums
    come from the reader's table, ``priority`` is bounded by
    :data:`MAX_PRIORITY`; exactly one of ``arrival_time`` and
    ``arrival_step``, and the pairs ``shared_prefix_id``/``shared_prefix_len``
    and ``prefix_of``/``prefix_of_len`` and ``hash_ids``/``hash_block_tokens``
    come together, at most one of ``prefix_of``, ``shared_prefix_id`` and
    ``hash_ids``.  What relates lines or fields (unique ids, an earlier
    ``prefix_of``, one arrival field for the whole trace, lengths within the
    prompt, the number of ``hash_ids``) is the reader's.
    """
    from fpmcore.documents.schema import schema_document

    minimum = dict(_INT_MIN)
    props: dict[str, Any] = {}
    for f in FIELDS:
        if f in minimum:
            props[f] = {"type": "integer", "minimum": minimum[f]}
        elif f == "arrival_time":
            props[f] = {"type": "number", "minimum": 0, "description": "seconds from the start of the trace"}
        elif f == "priority":
            props[f] = {
                "type": "integer",
                "minimum": -MAX_PRIORITY,
                "maximum": MAX_PRIORITY,
                "description": "vLLM's request priority (lower first under --scheduling-policy priority)",
            }
        elif f == "hash_ids":
            props[f] = {
                "type": "array",
                "items": {"type": "integer", "minimum": 0, "maximum": HASH_ID_LIMIT - 1},
                "description": "the prompt's content-block ids, one per hash_block_tokens tokens (the last block "
                "possibly partial): ceil(prompt_len / hash_block_tokens) of them",
            }
        else:
            props[f] = {"type": "string", "minLength": 1}
    body = {
        "type": "object",
        "properties": props,
        "required": ["request_id", "prompt_len", "output_len"],
        "additionalProperties": False,
        "oneOf": [{"required": ["arrival_time"]}, {"required": ["arrival_step"]}],
        "dependentRequired": {"shared_prefix_id": ["shared_prefix_len"], "shared_prefix_len": ["shared_prefix_id"],
                              "prefix_of": ["prefix_of_len"], "prefix_of_len": ["prefix_of"],
                              "hash_ids": ["hash_block_tokens"], "hash_block_tokens": ["hash_ids"]},
        "allOf": [{"not": {"required": pair}} for pair in
                  (["prefix_of", "shared_prefix_id"], ["hash_ids", "prefix_of"], ["hash_ids", "shared_prefix_id"])],
    }  # fmt: skip
    return schema_document("trace-line", "fpm replay trace line (06 R-32)",
                           "One request of a JSONL trace; one object per line, no blank line between two requests.", body)  # fmt: skip


def from_sched_json(obj: Mapping[str, Any], where: str = "") -> Trace:
    """Convert the oracle's SCHED.json (``requests`` keyed by id, in file order) to a trace.

    ``max_tokens`` becomes ``output_len``, ``arrival_step`` stays,
    ``prefix_from``/``prefix_len`` become ``prefix_of``/``prefix_of_len``,
    ``priority``, ``hash_ids`` and ``hash_block_tokens`` stay; ``seed`` only
    picks the oracle's random prompt tokens and is dropped.
    """
    lines = []
    requests = obj["requests"]
    if not isinstance(requests, Mapping):
        raise FpmError("R-32", f"SCHED.json: requests must be an object of request id → request, found "
                               f"{type(requests).__name__}", where)  # fmt: skip
    for rid, spec in requests.items():
        if not isinstance(spec, Mapping):
            raise FpmError("R-32", f"SCHED.json: request {rid!r} must be an object (prompt_len, max_tokens, …), "
                                   f"found {type(spec).__name__} {json.dumps(spec)[:60]}", where)  # fmt: skip
        line: dict[str, Any] = {
            "request_id": rid,
            "arrival_step": spec.get("arrival_step", 0),
            "prompt_len": spec.get("prompt_len"),
            "output_len": spec.get("max_tokens", 16),
        }
        if "prefix_from" in spec:
            line["prefix_of"] = spec["prefix_from"]
            line["prefix_of_len"] = spec.get("prefix_len")
        for key in ("priority", "hash_ids", "hash_block_tokens"):
            if key in spec:
                line[key] = spec[key]
        lines.append(json.dumps(line))
    return parse_trace_lines(lines, where)


def to_sched_json(trace: Trace, seed0: int = 1) -> dict[str, Any]:
    """The oracle's SCHED.json form of a step-exact trace (the inverse of :func:`from_sched_json`)."""
    reqs: dict[str, Any] = {}
    for i, r in enumerate(trace.requests):
        spec: dict[str, Any] = {
            "prompt_len": r.prompt_len,
            "seed": seed0 + i,
            "max_tokens": r.output_len,
            "arrival_step": r.arrival_step or 0,
        }
        if r.prefix_of is not None:
            spec["prefix_from"] = r.prefix_of
            spec["prefix_len"] = r.prefix_of_len
        if r.priority is not None:
            spec["priority"] = r.priority
        if r.hash_ids is not None:
            spec["hash_ids"] = list(r.hash_ids)
            spec["hash_block_tokens"] = r.hash_block_tokens
        reqs[r.request_id] = spec
    return {"requests": reqs}
