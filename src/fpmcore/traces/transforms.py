"""Time and load transforms of a trace (``--start``, ``--limit``, ``--max-prompt-len``, ``--time-scale``, ``--rate``).

They apply in this order, each recorded (:meth:`Transforms.to_json`, and the counts of
:func:`apply`) so that a result names exactly what it replayed:

1. the window: requests ``start`` … ``start + limit - 1`` of the trace, by index in file order
   (skipped rows are not requests); with ``start`` > 0 the window's arrival times are shifted so
   that its earliest request arrives at 0;
2. over-long prompts: a prompt longer than ``max_prompt_len`` is dropped, or clipped to it
   (``over_long``: ``clip`` also cuts its shared prefix and its content-block ids to the clipped
   prompt);  a ``prefix_of`` that names a request outside the window or dropped is removed (the
   request is replayed without that sharing) and counted;
3. time: arrival times multiplied by ``time_scale``, or scaled so that the mean arrival rate
   (requests after the first, over the span from the first arrival to the last) is ``rate``
   requests per second.  A step-exact trace (``arrival_step``) has no time to scale (T-3).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.replay.trace import TraceRequest

OVER_LONG = ("drop", "clip")


@attrs.frozen
class Transforms:
    """The transforms asked for; ``None`` (or ``start`` 0) is no transform."""

    time_scale: float | None = None
    rate: float | None = None
    start: int = 0
    limit: int | None = None
    max_prompt_len: int | None = None
    over_long: str = "drop"

    def to_json(self) -> dict[str, Any]:
        """The transforms given, by option name (``over_long`` only with ``max_prompt_len``)."""
        out: dict[str, Any] = {}
        for key in ("start", "limit", "max_prompt_len", "time_scale", "rate"):
            value = getattr(self, key)
            if value is not None and not (key == "start" and value == 0):
                out[key] = value
        if self.max_prompt_len is not None:
            out["over_long"] = self.over_long
        return out


def window(requests: Iterable[TraceRequest], t: Transforms) -> Iterator[TraceRequest]:
    """Requests ``start`` … ``start + limit - 1``; stops reading once the window is complete."""
    end = None if t.limit is None else t.start + t.limit
    for i, r in enumerate(requests):
        if end is not None and i >= end:
            return
        if i >= t.start:
            yield r


def _clip(r: TraceRequest, length: int) -> TraceRequest:
    changes: dict[str, Any] = {"prompt_len": length}
    if r.shared_prefix_len is not None:
        changes["shared_prefix_len"] = min(r.shared_prefix_len, length)
    if r.prefix_of_len is not None:
        changes["prefix_of_len"] = min(r.prefix_of_len, length)
    if r.hash_ids is not None and r.hash_block_tokens:
        changes["hash_ids"] = r.hash_ids[: -(-length // r.hash_block_tokens)]
    return attrs.evolve(r, **changes)


def apply(requests: list[TraceRequest], t: Transforms, where: str) -> tuple[list[TraceRequest], dict[str, int]]:
    """The windowed requests after steps 2 and 3 of the module docstring, and the counts of what changed."""
    counts: dict[str, int] = {}
    kept: list[TraceRequest] = []
    ids: set[str] = set()
    for r in requests:
        if t.max_prompt_len is not None and r.prompt_len > t.max_prompt_len:
            if t.over_long == "drop":
                counts["over_long_dropped"] = counts.get("over_long_dropped", 0) + 1
                continue
            counts["over_long_clipped"] = counts.get("over_long_clipped", 0) + 1
            r = _clip(r, t.max_prompt_len)
        if r.prefix_of is not None and r.prefix_of not in ids:
            counts["prefix_of_removed"] = counts.get("prefix_of_removed", 0) + 1
            r = attrs.evolve(r, prefix_of=None, prefix_of_len=None)
        ids.add(r.request_id)
        kept.append(r)
    if not kept:
        raise FpmError("T-3", f"no request is left after the transforms {t.to_json()}", where)
    timed = kept[0].arrival_time is not None
    if (t.time_scale is not None or t.rate is not None) and not timed:
        raise FpmError("T-3", "--time-scale and --rate scale arrival times; this trace is step-exact (arrival_step)",
                       where)  # fmt: skip
    if not timed:
        return kept, counts
    first, last = _span(kept)
    shift = first if t.start > 0 else 0.0
    factor = 1.0 if t.time_scale is None else t.time_scale
    if t.rate is not None:
        span = last - first
        if len(kept) < 2 or span <= 0:
            raise FpmError("T-3", f"--rate {t.rate}: the trace's {len(kept)} request(s) arrive at one time, so they "
                                  "have no rate to scale", where)  # fmt: skip
        factor = (len(kept) - 1) / span / t.rate
    if shift == 0.0 and factor == 1.0:
        return kept, counts
    return [attrs.evolve(r, arrival_time=((r.arrival_time or 0.0) - shift) * factor) for r in kept], counts


def mean_rate(requests: list[TraceRequest]) -> float | None:
    """Requests after the first per second of the span from the first arrival to the last (``None`` without one)."""
    if len(requests) < 2 or requests[0].arrival_time is None:
        return None
    first, last = _span(requests)
    return (len(requests) - 1) / (last - first) if last > first else None


def _span(requests: list[TraceRequest]) -> tuple[float, float]:
    """The earliest and the latest arrival time (fpmcore's JSONL need not be in arrival order)."""
    times = [r.arrival_time or 0.0 for r in requests]
    return min(times), max(times)
