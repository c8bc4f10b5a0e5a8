"""The Mooncake trace format (kvcache-ai/Mooncake, ``FAST25-release/traces``).

One JSON object per line; the fields, as the release's README defines them:

``timestamp``
    the request's arrival, in milliseconds relative to the start of the trace;
``input_length``, ``output_length``
    the prompt's and the answer's lengths in tokens;
``hash_ids``
    the prompt's content blocks, remapped to small integers: one id per
    ``--hash-block-tokens`` tokens (512 in the release), the last block partial
    when ``input_length`` is not a multiple of it.  Two requests whose first
    *k* ids agree share their first *k* blocks of prompt tokens.

The same JSONL shape is what NVIDIA Dynamo's load generators and planner read.
A request becomes an fpmcore request whose ``request_id`` is its line number,
``arrival_time`` its ``timestamp`` / 1000 relative to the first line's,
``prompt_len``/``output_len`` its lengths and ``hash_ids``/``hash_block_tokens`` its blocks.
Every line must give the four fields (other keys are ignored: later releases add some), with
``len(hash_ids) == ceil(input_length / hash_block_tokens)`` (so a wrong ``--hash-block-tokens`` is
refused at the first line), and timestamps that never go back.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import JsonError, is_finite_number, loads
from fpmcore.replay.trace import TraceRequest
from fpmcore.traces.format import (
    MAX_HASH_ID,
    ArrivalOrder,
    TraceFormat,
    TraceSource,
    first_line,
    positive_length,
)

FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")

_INT = r"(?:0|[1-9][0-9]{0,17})"  # a JSON integer below 10**18
#: The release's own line shape: the four fields in order, integers only.  A line of this shape
#: is read without the JSON reader (what it would return is evident); any other goes through it.


@functools.cache
def _plain_line() -> re.Pattern[str]:
    """The release's own line shape, compiled when the Python reader first reads a line (not by every replay)."""
    return re.compile(
        rf'\{{"timestamp": ?({_INT}), ?"input_length": ?({_INT}), ?"output_length": ?({_INT}), ?'
        rf'"hash_ids": ?\[((?:{_INT}(?:, ?{_INT})*)?)\]\}}'
    )


def _plain(text: str) -> dict[str, Any] | None:
    """The object of a line of the release's own shape (:func:`_plain_line`), else None."""
    m = _plain_line().fullmatch(text)
    if m is None:
        return None
    ts, prompt, output, ids = m.groups()
    return {"timestamp": int(ts), "input_length": int(prompt), "output_length": int(output),
            "hash_ids": [int(h) for h in ids.split(",")] if ids else []}  # fmt: skip


def sniff(head: bytes) -> bool:
    """The first line is a JSON object with ``timestamp``, ``input_length`` and ``output_length``."""
    line = first_line(head)
    if line is None or not line.startswith("{"):
        return False
    try:
        obj = loads(line)
    except JsonError:
        return all(f'"{key}"' in line for key in FIELDS[:3])  # a first line cut short by the head
    return isinstance(obj, dict) and all(key in obj for key in FIELDS[:3])


def _hash_ids(value: Any, line: int, where: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise FpmError("T-2", f"line {line}: hash_ids must be a list of integers, found {type(value).__name__}", where)
    ids = tuple(value)
    # every id an int (bool is a subclass, not the type) within 0..MAX_HASH_ID: checked at C speed, else located below
    if not ids or (set(map(type, ids)) == {int} and min(ids) >= 0 and max(ids) <= MAX_HASH_ID):
        return ids
    for i, h in enumerate(value):
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= MAX_HASH_ID:
            shown = repr(h) if len(repr(h)) <= 30 else repr(h)[:27] + "…"
            raise FpmError("T-2", f"line {line}: hash_ids[{i}] must be an integer in 0..2**63-1, found {shown}", where)
    return tuple(value)


def read(source: TraceSource) -> Iterator[TraceRequest]:
    where, block = source.where, source.hash_block_tokens
    order = ArrivalOrder(where)
    for n, text in source.lines():
        if not text.strip():
            continue
        obj = _plain(text)
        try:
            if obj is None:
                obj = loads(text)
        except JsonError as exc:
            raise FpmError("T-2", f"line {n}: not a JSON object: {exc.reason}", where) from None
        if not isinstance(obj, dict):
            raise FpmError("T-2", f"line {n}: not a JSON object", where)
        for key in FIELDS:
            if key not in obj:
                raise FpmError("T-2", f"line {n}: missing field {key} (a Mooncake line has {', '.join(FIELDS)})",
                               where)  # fmt: skip
        ts = obj["timestamp"]
        if not is_finite_number(ts) or ts < 0:
            shown = repr(ts) if len(repr(ts)) <= 30 else repr(ts)[:27] + "…"
            raise FpmError("T-2", f"line {n}: timestamp must be a finite number of milliseconds >= 0, found {shown}",
                           where)  # fmt: skip
        prompt = positive_length(obj["input_length"], "input_length", n, where)
        output = positive_length(obj["output_length"], "output_length", n, where)
        ids = _hash_ids(obj["hash_ids"], n, where)
        blocks = -(-prompt // block)
        if len(ids) != blocks:
            raise FpmError("T-2", f"line {n}: {len(ids)} hash_ids for input_length {prompt}: expected "
                                  f"ceil({prompt} / {block}) = {blocks} (--hash-block-tokens {block})", where)  # fmt: skip
        yield TraceRequest(
            request_id=str(n),
            prompt_len=prompt,
            output_len=output,
            arrival_time=order.relative(float(ts) / 1000.0, n),
            hash_ids=ids,
            hash_block_tokens=block,
        )


MOONCAKE = TraceFormat(
    name="mooncake",
    summary="Mooncake FAST'25 traces (and Dynamo's): JSONL timestamp (ms), input_length, output_length, hash_ids",
    sniff=sniff,
    read=read,
)
