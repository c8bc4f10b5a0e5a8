"""Acme Hybrid 7B's rules as plain functions: the align stop and the point list.

The align stop (the ``fpm_align_stop`` hook): vLLM in Mamba align mode, for a
model without a prefill checkpoint, ends a prefill chunk that does not finish
the prompt on a block boundary, so that the Mamba state at its end can be
cached.  A chunk that cannot reach the next boundary within the budget is not
scheduled in this step (0).  A chunk that finishes the prompt is scheduled
whole.

The point list (the ``fpm_generate_points`` hook) for limits
``(token_budget T, max_model_len L, block B)``:

* prefill: one request computing ``n`` new tokens after ``p`` prefix tokens,
  as a chunk of a longer prompt, for ``n`` in the powers of two from 16 to
  ``T`` and the multiples of ``B`` up to ``T``, and ``p`` in ``0, B, 2B, 4B,
  …`` with ``p + n < L``; a candidate the runtime would split (its align stop
  is not ``n``: the chunk does not end on a block boundary) is dropped and
  counted under ``align_split``;
* decode: ``b`` requests of ``c`` context tokens each, ``b`` in ``1, 2, 4, …,
  256`` and ``c`` in ``B, 2B, 4B, … ≤ L``; ``b > T`` (more decode tokens than
  the budget) is dropped under ``token_budget``.

Points are numbered from 1 in that order; the digest is the SHA-256 of their
canonical JSON; the smoke subset is the first and the last point of each phase.
"""

from __future__ import annotations

from typing import Any

from fpmcore.plugin_api import AlignStopQuery, PlanLimits, PointPlan


def align_stop(q: AlignStopQuery) -> int:
    """Tokens of the proposed chunk ``[start, start + num_new_tokens)`` that the runtime schedules."""
    end = q.start + q.num_new_tokens
    if end >= q.prompt_len:
        return q.num_new_tokens
    return max(end // q.block_size * q.block_size - q.start, 0)


def _powers(first: int, last: int) -> list[int]:
    out = []
    v = first
    while v <= last:
        out.append(v)
        v *= 2
    return out


def generate_points(limits: PlanLimits) -> PointPlan:
    """The point plan for ``limits`` (see the module docstring)."""
    from fpmcore.plugin_api import json_digest

    budget, max_len, block = limits.token_budget, limits.max_model_len, limits.block_size
    dropped = {"align_split": 0, "token_budget": 0}
    prefill: list[dict[str, Any]] = []
    for n in sorted(set(_powers(16, budget)) | set(range(block, budget + 1, block))):
        for p in [0] + _powers(block, max_len):
            if p + n >= max_len:
                continue
            query = AlignStopQuery(
                start=p,
                num_new_tokens=n,
                prompt_len=p + n + 1,
                num_tokens=p + n + 1,
                block_size=block,
                hash_block_size=limits.hash_block_size,
                max_num_batched_tokens=budget,
                checkpoint_alignment=None,
            )
            if align_stop(query) != n:
                dropped["align_split"] += 1
                continue
            prefill.append({"phase": "prefill", "batch_size": 1, "new_tokens": n, "prefix_tokens": p})
    decode: list[dict[str, Any]] = []
    for b in _powers(1, 256):
        for c in _powers(block, max_len):
            if b > budget:
                dropped["token_budget"] += 1
                continue
            decode.append({"phase": "decode", "batch_size": b, "context_tokens": c})
    points = [{"benchmark_id": i, **p} for i, p in enumerate(prefill + decode, start=1)]
    first_decode = len(prefill)
    ends = [0, first_decode - 1, first_decode, len(points) - 1]
    smoke = [points[i] for i in dict.fromkeys(ends) if 0 <= i < len(points)]
    return PointPlan(
        points=points,
        counts={"prefill": len(prefill), "decode": len(decode)},
        dropped=dropped,
        digest=json_digest(points),
        smoke=smoke,
    )
