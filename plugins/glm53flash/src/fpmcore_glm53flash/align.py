"""The Mamba align-stop rule of vLLM 0.33.0 (04 G-1 … G-7) as the GLM-5.3-Flash planner asks it.

vLLM 0.33.0 in Mamba ``align`` cache mode clips every prefill chunk so that it
ends where a Mamba state can be cached (``Scheduler._mamba_block_aligned_split``,
vllm/v1/core/sched/scheduler.py:546-662, with the checkpoint helpers of
vllm/v1/kv_cache_interface.py:1169-1210).  That rule is the runtime's
scheduler, not this model's: the host states it once, in its replay engine
(``csrc/fpm_align.c`` and its Python reference, ``fpmcore.replay.align``), and
this module asks it through the plugin API (``mamba_align_split``) in the
keyword form of 04 §3 that the planner (G-17) and the worked vectors AS-1 …
AS-18 use.  ``fpm plan`` reaches it through :func:`fpmcore_glm53flash.planner.generate_points`;
the plugin's ``fpm_align_stop`` answer is the same rule, for the runtimes the
plugin's points were checked against.

The rule is exact in the envelope of G-8: no EAGLE block drop, no hash
look-ahead tokens, no fine-grained (partial) Mamba hash hits, a scheduler block
equal to the cache block and ``long_prefill_token_threshold = 0``.  Inside that
envelope the prompt-tail stop (G-6 stop 3) is always 0 and is not modelled.
"""

from __future__ import annotations

from fpmcore.plugin_api import AlignSplit, AlignStopQuery, mamba_align_split, mamba_align_stop
from fpmcore.plugin_api import checkpoint_position as checkpoint_position


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
    query = AlignStopQuery(
        start=start, num_new_tokens=num_new_tokens, prompt_len=prompt_len, num_tokens=num_tokens,
        block_size=block_size, hash_block_size=hash_block_size, max_num_batched_tokens=max_num_batched_tokens,
        checkpoint_alignment=checkpoint_alignment, junction=junction, junction_checkpoint=junction_checkpoint,
    )  # fmt: skip
    return mamba_align_split(query)


def align_stop(query: AlignStopQuery) -> int:
    """The ``fpm_align_stop`` answer for one :class:`~fpmcore.host.stage_hooktypes.AlignStopQuery`: the host's rule."""
    return mamba_align_stop(query)


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
