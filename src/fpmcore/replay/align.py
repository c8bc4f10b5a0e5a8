"""vLLM's Mamba align split (04 G-2 … G-6), the rule the replay applies with prefix caching (06 R-§4).

Mirrors ``csrc/fpm_align.c``.  :func:`align_stop` is vLLM 0.33.0's
``Scheduler._mamba_block_aligned_split``; a model plugin's rule (the
``fpm_align_stop`` hook) can replace it in the Python reference.
"""

from __future__ import annotations

from fpmcore.hooktypes import AlignStopQuery


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pos(x: int, u: int) -> int:
    """04 G-3: ``((x − 1) // u) × u`` floored at 0."""
    return max(((x - 1) // u) * u, 0)


def checkpoint_valid(start: int, end: int, ckpt: int, hash_block: int, block: int, align: int) -> bool:
    """vLLM 0.33.0 ``is_mamba_prefill_checkpoint_valid`` (04 G-4 conditions 3–7)."""
    if align <= 0:
        return False
    return (
        start % hash_block == 0
        and cdiv(end, block) - 2 > (start - 1) // block
        and start + hash_block <= ckpt
        and start < ckpt < end
        and (ckpt - start) % align == 0
    )


def align_stop(q: AlignStopQuery, last_stop_at_tokens: bool = False) -> int:
    """04 G-2 … G-6: the tokens of a proposed chunk that vLLM 0.33.0 schedules.

    ``last_stop_at_tokens`` (:attr:`~fpmcore.replay.rules.ReplayRules.align_last_stop_at_tokens`)
    is vLLM 0.27.0's last cacheable stop (the last block boundary at or below
    the request's tokens, not strictly below).
    """
    start, k, b = q.start, q.num_new_tokens, q.block_size
    prefill_end = max(q.prompt_len, q.num_tokens - 1)
    if start >= prefill_end:
        return k
    last_cache = q.num_tokens // b * b if last_stop_at_tokens else pos(q.num_tokens, b)
    end = start + k
    ckpt_pos = pos(prefill_end, b)
    internal = (
        q.checkpoint_alignment is not None
        and end >= prefill_end
        and checkpoint_valid(start, end, ckpt_pos, q.hash_block_size, b, q.checkpoint_alignment)
    )
    if internal:
        last_cache = 0
    if end < prefill_end:
        aligned = end // b * b
        if aligned > start or b <= q.max_num_batched_tokens:
            end = aligned
    stops = [
        (start // b + 1) * b if start % b != 0 and not internal else 0,
        last_cache,
    ]
    j = q.junction
    if start < j < end:
        stops.append(j if q.junction_checkpoint and j <= q.prompt_len else start + (j - start) // b * b)
    inside = [s for s in stops if start < s < end]
    if inside:
        end = min(inside)
    return max(end - start, 0)
