"""vLLM's Mamba align split (04 G-2 … G-6), the rule the replay applies with prefix caching (06 R-§4).

Mirrors ``csrc/fpm_align.c``.  :func:`align_stop` is vLLM 0.33.0's
``Scheduler._mamba_block_aligned_split`` (vllm/v1/core/sched/scheduler.py,
with the checkpoint helpers of vllm/v1/kv_cache_interface.py), in integers only.

**Whose knowledge.**  The split is the runtime's scheduler, not a model's: it
reads only the chunk, the request, the blocks and the checkpoint alignment,
all of which the profile records, and what differs between vLLM releases is a
:class:`~fpmcore.replay.rules.ReplayRules` switch its runtime plugin sets
(``align_last_stop_at_tokens`` for 0.27.0).  So it is written once, here and
in the C engine that replays it (this module is the C function's reference,
compared with it by the test suite); a model plugin's planner asks it through
the plugin API (:func:`align_split`, ``fpmcore.plugin_api.mamba_align_split``)
instead of stating it again.  A model plugin's rule (the ``fpm_align_stop``
hook) can still replace it in the Python reference (``run_replay(...,
align_stop=fn)``); ``fpm plan`` and ``fpm replay`` use this one.
"""

from __future__ import annotations

import attrs

from fpmcore.host.stage_hooktypes import AlignStopQuery


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


@attrs.frozen
class AlignSplit:
    """What the split does to one proposed chunk: ``tokens`` it schedules (0 … ``k``) and whether the chunk
    saves the internal prefill checkpoint (04 G-4)."""

    tokens: int
    internal_checkpoint: bool


def _split(q: AlignStopQuery, last_stop_at_tokens: bool) -> tuple[int, bool]:
    start, k, b = q.start, q.num_new_tokens, q.block_size
    prefill_end = max(q.prompt_len, q.num_tokens - 1)
    if start >= prefill_end:
        return k, False
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
    return max(end - start, 0), internal


def align_stop(q: AlignStopQuery, last_stop_at_tokens: bool = False) -> int:
    """04 G-2 … G-6: the tokens of a proposed chunk that vLLM 0.33.0 schedules.

    ``last_stop_at_tokens`` (:attr:`~fpmcore.replay.rules.ReplayRules.align_last_stop_at_tokens`)
    is vLLM 0.27.0's last cacheable stop (the last block boundary at or below
    the request's tokens, not strictly below).
    """
    return _split(q, last_stop_at_tokens)[0]


def align_split(q: AlignStopQuery, last_stop_at_tokens: bool = False) -> AlignSplit:
    """:func:`align_stop` with whether the chunk saves the internal prefill checkpoint (04 G-4): what a
    planner needs to count the blocks a prefill point holds (03 C-15x)."""
    return AlignSplit(*_split(q, last_stop_at_tokens))
