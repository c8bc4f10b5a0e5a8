"""The Mamba align-stop rule of vLLM 0.33.0 (04 G-1 … G-7).

vLLM 0.33.0 in Mamba ``align`` cache mode clips every prefill chunk so that it
ends where a Mamba state can be cached (``Scheduler._mamba_block_aligned_split``,
vllm/v1/core/sched/scheduler.py:546-662, with the checkpoint helpers of
vllm/v1/kv_cache_interface.py:1169-1210).  This module states that rule once, in
integers only; the planner (G-17) and the replay engine both use it through the
``fpm_align_stop`` hook.

The rule is exact in the envelope of G-8: no EAGLE block drop, no hash
look-ahead tokens, no fine-grained (partial) Mamba hash hits, a scheduler block
equal to the cache block and ``long_prefill_token_threshold = 0``.  Inside that
envelope the prompt-tail stop (G-6 stop 3) is always 0 and is not modelled.

This module depends on ``attrs`` only, so that the comparison driver
(tools/glm_align_grid.py) can load it next to the real vLLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from fpmcore.plugin_api import cdiv

if TYPE_CHECKING:
    from fpmcore.plugin_api import AlignStopQuery


def checkpoint_position(num_tokens: int, unit: int) -> int:
    """G-3 ``pos(x, u)``: the last multiple of ``unit`` strictly before ``num_tokens``, floored at 0.

    vLLM leaves at least one token to recompute the logits, so the position is
    ``((x − 1) // u) × u`` (``(−1) // u = −1``, hence the floor at 0).
    """
    return max((num_tokens - 1) // unit * unit, 0)


def checkpoint_valid(
    start: int, end: int, position: int, block_size: int, hash_block_size: int, alignment: int | None
) -> bool:
    """G-4 clauses 3-7: whether a chunk ``[start, end)`` can export the state at ``position``.

    ``alignment`` ``None`` means the deployment has no checkpoint rule (clause 1).
    For a block-aligned ``start`` clause 4 reads "the chunk ends more than one
    block after its start".
    """
    if alignment is None:
        return False
    initial_state_col = (start - 1) // block_size
    checkpoint_col = cdiv(end, block_size) - 2
    return (
        start % hash_block_size == 0
        and checkpoint_col > initial_state_col
        and start + hash_block_size <= position
        and start < position < end
        and (position - start) % alignment == 0
    )


@attrs.frozen
class AlignSplit:
    """The result of one evaluation: ``tokens`` to schedule (0 … ``k``) and
    whether the chunk saves the internal prefill checkpoint (G-4)."""

    tokens: int
    internal_checkpoint: bool


def align_split(
    *,
    start: int,
    num_new_tokens: int,
    prompt_len: int,
    num_tokens: int,
    block_size: int,
    hash_block_size: int,
    max_num_batched_tokens: int,
    checkpoint_alignment: int | None,
    junction: int = 0,
    junction_checkpoint: bool = False,
) -> AlignSplit:
    """Evaluate the align-stop rule (G-2 … G-6) for one proposed chunk.

    :param start: tokens already computed plus new prefix-cache hits (G-2).
    :param num_new_tokens: the proposed chunk ``k > 0``, already clipped to the
        budget left in the step.
    :param prompt_len: prompt length.
    :param num_tokens: prompt plus tokens generated so far.
    :param block_size: the Mamba / attention / scheduler block ``B``.
    :param hash_block_size: the prefix-hash block ``H``.
    :param max_num_batched_tokens: the *configured* token budget: the G-5
        flooring reads it, never the budget left in the step (AS-19).
    :param checkpoint_alignment: ``A`` when every Mamba group has a prefill
        checkpoint block, else ``None`` (G-2 ``ckpt_all``).
    :param junction: the request's shared-prefix boundary, 0 for none.
    :param junction_checkpoint: the opt-in shared-prefix checkpoint (G-6 stop 4).
    """
    prefill_end = max(prompt_len, num_tokens - 1)
    if start >= prefill_end:  # G-2: decode and replayed output are never split
        return AlignSplit(num_new_tokens, False)

    end = start + num_new_tokens
    last_cache = checkpoint_position(num_tokens, block_size)
    # G-3: u = B outside fine-grained Mamba hits (G-8 envelope).
    ckpt_pos = checkpoint_position(prefill_end, block_size)
    internal = end >= prefill_end and checkpoint_valid(
        start, end, ckpt_pos, block_size, hash_block_size, checkpoint_alignment
    )
    if internal:
        last_cache = 0

    # G-5: a non-final chunk ends on a block boundary, unless the block is wider
    # than the configured budget and the chunk has not reached the boundary yet.
    if end < prefill_end:
        aligned = end // block_size * block_size
        if aligned > start or block_size <= max_num_batched_tokens:
            end = aligned

    # G-6: the smallest stop strictly inside (start, end).
    next_boundary = (start // block_size + 1) * block_size
    if junction_checkpoint and junction <= prompt_len:
        junction_stop = junction
    else:
        junction_stop = start + (junction - start) // block_size * block_size
    stops = (
        next_boundary if start % block_size != 0 and not internal else 0,
        last_cache,
        junction_stop if start < junction < end else 0,
    )
    end = min((s for s in stops if start < s < end), default=end)
    return AlignSplit(max(end - start, 0), internal)


def align_stop(query: AlignStopQuery) -> int:
    """The ``fpm_align_stop`` answer for one :class:`~fpmcore.hooktypes.AlignStopQuery`."""
    return align_split(
        start=query.start,
        num_new_tokens=query.num_new_tokens,
        prompt_len=query.prompt_len,
        num_tokens=query.num_tokens,
        block_size=query.block_size,
        hash_block_size=query.hash_block_size,
        max_num_batched_tokens=query.max_num_batched_tokens,
        checkpoint_alignment=query.checkpoint_alignment,
        junction=query.junction,
        junction_checkpoint=query.junction_checkpoint,
    ).tokens


def chunk_steps(
    *,
    prompt_len: int,
    block_size: int,
    hash_block_size: int,
    budget: int,
    checkpoint_alignment: int | None,
    start: int = 0,
    junction: int = 0,
) -> list[int]:
    """The chunks (tokens per step) in which one lone request prefills ``[start, prompt_len)``.

    Each step offers ``min(remaining, budget)`` tokens and applies
    :func:`align_split`; the worked vectors AS-1 … AS-18 of 04 §3 are stated in
    this form.  A step that schedules nothing would never progress and raises
    :class:`ValueError`.
    """
    chunks: list[int] = []
    done = start
    while done < prompt_len:
        k = min(prompt_len - done, budget)
        n = align_split(
            start=done,
            num_new_tokens=k,
            prompt_len=prompt_len,
            num_tokens=prompt_len,
            block_size=block_size,
            hash_block_size=hash_block_size,
            max_num_batched_tokens=budget,
            checkpoint_alignment=checkpoint_alignment,
            junction=junction,
        ).tokens
        if n <= 0:
            raise ValueError(f"align split schedules nothing at start {done}")
        chunks.append(n)
        done += n
    return chunks
