"""Choosing a trace's format and reading it: ``--trace-format`` or sniffing, the transforms, what was read.

The formats are the answers of ``fpm_trace_formats`` (``host.hooks.trace_formats()``): the host's
own first (:data:`BUILTIN`), then each plugin's; a name given twice keeps the first.  Without
``--trace-format`` each format's ``sniff`` is asked in that order, the host's JSONL last (its sniff
claims any text that starts with ``{`` or ``[``, so that a broken JSONL trace is refused naming its
line); the first that claims the file reads it.  An empty file is refused (R-33), and so is a file
that no format claims, naming the formats installed (T-1).

:func:`read_trace` streams the format's requests through the window (reading stops at its end),
checks what a plugin's reader yields (unique ids, lengths, one arrival field), applies the
transforms (:mod:`fpmcore.traces.transforms`) and returns the trace with its provenance: the
file, the format and how it was chosen, the rows skipped by reason, the transforms and their
counts (``fpm replay`` records it as ``trace`` beside its summary, in ``--json`` and in ``--out``).
A Mooncake trace and fpmcore's own JSONL are read by the C line readers into columns
(:mod:`fpmcore.traces.column_reader`), the transforms applied there; a file they do not take whole
is read by the format's reader.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import is_finite_number
from fpmcore.documents.paths import path_text
from fpmcore.replay.columns import ColumnRequests
from fpmcore.replay.trace import Trace, TraceRequest, arrival_field_of, trace_of
from fpmcore.traces.azure import AZURE
from fpmcore.traces.burstgpt import BURSTGPT
from fpmcore.traces.column_reader import available as column_reader_available
from fpmcore.traces.column_reader import read_columns
from fpmcore.traces.format import DEFAULT_HASH_BLOCK_TOKENS, MAX_TOKENS, SkippedRow, TraceFormat, TraceSource, read_head
from fpmcore.traces.mooncake import MOONCAKE
from fpmcore.traces.own_formats import FPMCORE_JSONL, SCHED_JSON, reads_lines
from fpmcore.traces.transforms import Transforms, apply, window

#: The host's own formats, in sniffing order (the JSONL is sniffed after every plugin's format).
BUILTIN = (SCHED_JSON, MOONCAKE, BURSTGPT, AZURE, FPMCORE_JSONL)
#: The format whose sniff is the loosest: asked last.
LAST = FPMCORE_JSONL.name


@attrs.frozen
class Chosen:
    """The format that reads a trace: which plugin gave it, and whether it was sniffed or named."""

    plugin: str
    format: TraceFormat
    sniffed: bool


def unique_formats(formats: Iterable[tuple[str, TraceFormat]]) -> list[tuple[str, TraceFormat]]:
    """``(plugin, format)`` with each name kept at its first registration."""
    seen: set[str] = set()
    out = []
    for plugin, fmt in formats:
        if fmt.name not in seen:
            seen.add(fmt.name)
            out.append((plugin, fmt))
    return out


def choose_format(formats: Sequence[tuple[str, TraceFormat]], path: str, name: str | None) -> Chosen:
    """The format ``name`` names, or the first whose sniff claims the file (T-1 when none does)."""
    formats = unique_formats(formats)
    names = ", ".join(f.name for _p, f in formats)
    if name is not None:
        for plugin, fmt in formats:
            if fmt.name == name:
                return Chosen(plugin, fmt, sniffed=False)
        raise FpmError("T-1", f"--trace-format {name}: no such trace format; installed: {names}", path)
    head = read_head(path)
    if not head.strip():
        raise FpmError("R-33", "trace is empty", path)
    ordered = [pf for pf in formats if pf[1].name != LAST] + [pf for pf in formats if pf[1].name == LAST]
    for plugin, fmt in ordered:
        try:
            claims = bool(fmt.sniff(head))
        except Exception:  # noqa: BLE001 - a sniff that breaks claims nothing
            claims = False
        if claims:
            return Chosen(plugin, fmt, sniffed=True)
    what = " (a binary file, not a trace)" if _binary(head) else ""
    raise FpmError("T-1", f"no trace format claims this file{what}; installed: {names} (name one with "
                          "--trace-format)", path)  # fmt: skip


def _binary(head: bytes) -> bool:
    """``head`` holds a NUL byte or bytes that are not UTF-8 (a character cut at its end aside)."""
    try:
        head[:-4].decode("utf-8") if len(head) > 4 else head.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return b"\x00" in head


def _checked(
    rows: Iterable[Any], plugin: str, fmt: TraceFormat, where: str, skipped: dict[str, int]
) -> Iterator[TraceRequest]:
    """The requests a reader yields, its skipped rows counted; what breaks the trace model is refused.

    The host's readers check their rows themselves (naming the line); a plugin's requests are checked
    here, numbered from 1 in the order the reader yields them.
    """
    ids: set[str] = set()
    field: str | None = None
    i = 0
    for row in rows:
        if isinstance(row, SkippedRow):
            skipped[row.reason] = skipped.get(row.reason, 0) + 1
            continue
        if not isinstance(row, TraceRequest):
            raise FpmError("plugins", f"plugin '{plugin}': trace format {fmt.name} yielded {type(row).__name__}; "
                                      "expected TraceRequest or SkippedRow", where)  # fmt: skip
        i += 1
        if plugin != "fpmcore":
            _check_request(row, i, fmt.name, where)
            if row.request_id in ids:
                raise FpmError("T-2", f"request {i}: duplicate request_id {row.request_id}", where)
            ids.add(row.request_id)
            kind = arrival_field_of(row)
            if field is not None and kind != field:
                raise FpmError("T-2", f"request {i}: {kind} cannot be mixed with {field} of earlier requests", where)
            field = kind
        yield row


def _check_request(r: TraceRequest, i: int, fmt: str, where: str) -> None:
    for key in ("prompt_len", "output_len"):
        v = getattr(r, key)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_TOKENS:
            raise FpmError("T-2", f"request {i} of format {fmt}: {key} must be an integer in 1..2**40, found {v!r}",
                           where)  # fmt: skip
    if (r.arrival_time is None) == (r.arrival_step is None) or not isinstance(r.request_id, str) or not r.request_id:
        raise FpmError("T-2", f"request {i} of format {fmt}: needs a request_id and one of arrival_time, arrival_step",
                       where)  # fmt: skip
    t, step = r.arrival_time, r.arrival_step
    if t is not None and not (is_finite_number(t) and t >= 0):
        raise FpmError("T-2", f"request {i} of format {fmt}: arrival_time must be a finite number >= 0, found {t!r}",
                       where)  # fmt: skip
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_TOKENS):
        raise FpmError("T-2", f"request {i} of format {fmt}: arrival_step must be an integer in 0..2**40, found "
                              f"{step!r}", where)  # fmt: skip


def read_trace(
    formats: Sequence[tuple[str, TraceFormat]],
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    hash_block_tokens: int = DEFAULT_HASH_BLOCK_TOKENS,
    filters: tuple[tuple[str, str], ...] = (),
    transforms: Transforms | None = None,
) -> tuple[Trace, dict[str, Any]]:
    """The trace of ``path`` after ``transforms``, and its provenance (module docstring)."""
    transforms = Transforms() if transforms is None else transforms
    p = path_text(path)
    chosen = choose_format(formats, p, name)
    fmt = chosen.format
    for key, _value in filters:
        if key not in fmt.filters:
            can = ", ".join(fmt.filters) or "nothing"
            raise FpmError("T-3", f"--trace-filter {key}: the {fmt.name} format selects on {can}", p)
    source = TraceSource(file=p, hash_block_tokens=hash_block_tokens, filters=filters)
    skipped: dict[str, int] = {}
    columns = None
    if fmt is MOONCAKE and column_reader_available():
        columns = read_columns(source, transforms)
    elif fmt is FPMCORE_JSONL and column_reader_available() and reads_lines(source):
        columns = read_columns(source, transforms, own_format=True)
    if columns is not None:  # the C reader's columns: the same requests as the reference reader's
        trace, counts = Trace(ColumnRequests(columns[0]), "arrival_time"), columns[1]
        with_hash_ids = columns[0].hash_block_tokens is not None
    else:
        requests = list(window(_checked(fmt.read(source), chosen.plugin, fmt, p, skipped), transforms))
        if not requests:
            raise FpmError("T-3", f"no request is left after the window and the filters {transforms.to_json()}"
                                  f"{' (skipped: ' + _listed(skipped) + ')' if skipped else ''}", p)  # fmt: skip
        kept, counts = apply(requests, transforms, p)
        trace, with_hash_ids = trace_of(kept), any(r.hash_ids is not None for r in kept)
    provenance: dict[str, Any] = {
        "file": p,
        "format": fmt.name,
        "format_plugin": chosen.plugin,
        "sniffed": chosen.sniffed,
        "requests": len(trace.requests),
        "rows_skipped": dict(sorted(skipped.items())),
        "transforms": transforms.to_json(),
        **counts,
    }
    if filters:
        provenance["filters"] = [f"{k}={v}" for k, v in filters]
    if with_hash_ids:
        provenance["hash_block_tokens"] = hash_block_tokens
    return trace, provenance


def _listed(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {reason}" for reason, n in sorted(counts.items()))


def plain(provenance: dict[str, Any]) -> bool:
    """The trace is fpmcore's own JSONL read as it is (no skipped row, no transform): ``fpm replay`` reads it
    without a note, as it always has; any other is named on stderr (:func:`describe`)."""
    changed = provenance["rows_skipped"] or provenance["transforms"] or provenance.get("filters")
    return provenance["format"] == FPMCORE_JSONL.name and not changed


def describe(provenance: dict[str, Any]) -> str:
    """One line on how the trace was read (the note ``fpm replay`` and ``fpm trace`` print on stderr)."""
    how = "sniffed" if provenance["sniffed"] else "named"
    n = provenance["requests"]
    text = f"read {provenance['file']} as {provenance['format']} ({how}): {n:,} request{'s' if n != 1 else ''}"
    if provenance["rows_skipped"]:
        text += f", rows skipped: {_listed(provenance['rows_skipped'])}"
    for key in ("over_long_dropped", "over_long_clipped", "prefix_of_removed"):
        if provenance.get(key):
            text += f", {key.replace('_', ' ')} {provenance[key]:,}"
    if provenance["transforms"]:
        text += ", transforms " + " ".join(f"{k}={v}" for k, v in provenance["transforms"].items())
    return text
