"""``fpm trace stats``: what a trace holds, computed from its requests.

* ``requests``, ``duration_s`` (first arrival to last), ``mean_rate_per_s`` (requests after the
  first over that span) and ``rate_over_time``: the arrival rate in 20 equal bins of the span;
* ``prompt_len`` and ``output_len``: min, mean, p50, p90, p99 (nearest rank) and max;
* ``prefix_reuse`` for a trace with content-block ids (``hash_ids``): the fraction of all prompt
  tokens that lie in a leading run of blocks some earlier request already had — the same prefix of
  ids, as a prefix cache of unbounded size would see them — at ``block_tokens`` (the trace's block
  size, or a multiple of it: ``--block-tokens``, a group of ids then counts when all of them agree).
  Memory stays bounded by the distinct prefixes, not by the tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.replay.trace import TraceRequest

RATE_BINS = 20


def percentiles(values: Sequence[int]) -> dict[str, Any]:
    """min, mean, p50, p90, p99 (nearest rank) and max of ``values`` (not empty)."""
    s = sorted(values)

    def rank(q: float) -> int:
        return s[max(0, -(-int(q * len(s) * 1000) // 1000) - 1)]

    return {"min": s[0], "mean": sum(s) / len(s), "p50": rank(0.5), "p90": rank(0.9), "p99": rank(0.99),
            "max": s[-1]}  # fmt: skip


def prefix_reuse(requests: Sequence[TraceRequest], block_tokens: int, where: str = "") -> dict[str, Any] | None:
    """The prefix reuse of requests with ``hash_ids`` at ``block_tokens`` (module docstring); ``None`` without ids."""
    with_ids = [r for r in requests if r.hash_ids is not None and r.hash_block_tokens]
    if not with_ids:
        return None
    trace_block = with_ids[0].hash_block_tokens or 1
    if block_tokens % trace_block:
        raise FpmError("T-3", f"--block-tokens {block_tokens} is not a multiple of the trace's block of "
                              f"{trace_block} tokens", where)  # fmt: skip
    group = block_tokens // trace_block
    nodes: dict[tuple[int, tuple[int, ...]], int] = {}
    shared = total = hits = 0
    for r in with_ids:
        ids = r.hash_ids or ()
        parent, reused, matching = 0, 0, True
        for k in range(0, len(ids), group):
            key = (parent, tuple(ids[k : k + group]))
            node = nodes.get(key)
            if node is None:
                matching = False
                node = nodes[key] = len(nodes) + 1
            elif matching:
                reused = min((k + group) * trace_block, r.prompt_len)
            parent = node
        shared += reused
        total += r.prompt_len
        hits += reused > 0
    return {"block_tokens": block_tokens, "shared_tokens": shared, "prompt_tokens": total,
            "fraction": shared / total if total else 0.0, "requests_with_a_hit": hits,
            "distinct_blocks": len(nodes)}  # fmt: skip


def trace_stats(requests: Sequence[TraceRequest], *, block_tokens: int | None = None, where: str = "") -> dict[
        str, Any]:  # fmt: skip
    """The statistics of the module docstring."""
    timed = requests[0].arrival_time is not None
    times = [(r.arrival_time if timed else r.arrival_step) or 0 for r in requests]
    first, last = min(times), max(times)
    span = last - first
    out: dict[str, Any] = {"requests": len(requests)}
    if timed:
        out["duration_s"] = span
        out["mean_rate_per_s"] = (len(requests) - 1) / span if span > 0 else None
        if span > 0:
            counts = [0] * RATE_BINS
            for t in times:
                counts[min(int((t - first) / span * RATE_BINS), RATE_BINS - 1)] += 1
            out["rate_over_time"] = {"bin_s": span / RATE_BINS, "per_s": [c / (span / RATE_BINS) for c in counts]}
    else:
        out["duration_steps"] = span
    out["prompt_len"] = percentiles([r.prompt_len for r in requests])
    out["output_len"] = percentiles([r.output_len for r in requests])
    block = block_tokens or next((r.hash_block_tokens for r in requests if r.hash_block_tokens), None)
    out["prefix_reuse"] = prefix_reuse(requests, block, where) if block else None
    return out
