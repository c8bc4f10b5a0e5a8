"""Block arithmetic of one cache group (01 §1.1, §3.5): the one ``cdiv``, ``block_range`` and peak pages.

Every caller — the profile (:class:`fpmcore.documents.profile.FpmCacheGroup`), the
replay's records and sizing (:mod:`fpmcore.replay.records`), the runtime and
model plugins — describes a group by its block size in tokens, its sliding
window (``None`` for full attention) or its attention chunk (``chunk``, a
chunked-local group) and, for a state group, the blocks one request holds
(``state_blocks``), and calls these functions.  The C library
has its own twin (``fpm_block_range``), which the tests compare with this one.

>>> cdiv(2177, 2176), cdiv(0, 16)
(2, 0)
>>> block_range(48, 49, block=16, window=32)    # a sliding window of 32: blocks 1 … 3 are held
(1, 4)
>>> peak_blocks(1_048_576, 8192, block=2176)    # full attention: the whole context
482
>>> block_range(300, 301, block=16, chunk=128)  # chunks of 128: tokens 256 … 300 are attended, blocks 16 … 18
(16, 19)
"""

from __future__ import annotations

from fpmcore.documents.errors import FpmError


def cdiv(a: int, b: int) -> int:
    """Ceiling division of integers, ``a ≥ 0``, ``b > 0`` (01 §1.1): ``(a + b − 1) // b``."""
    return -(-a // b)


def block_range(
    computed: int,
    target: int,
    *,
    block: int,
    window: int | None = None,
    chunk: int | None = None,
    state_blocks: int | None = None,
    label: str = "",
) -> tuple[int, int]:
    """01 P-14: the half-open range ``[first, end)`` of logical blocks held during a forward ``computed → target``.

    A state group (``state_blocks`` given) holds its ``state_blocks`` blocks
    once the request has a token; an attention or convolution group holds
    ``[0, cdiv(target, block))`` less the blocks that slid out of its window,
    a chunked-local group less the blocks before the chunk of ``computed``
    (vLLM ``ChunkedLocalAttentionManager.get_num_skipped_tokens``).
    ``label`` names the group in the P-14 refusal of ``target < computed``.
    """
    if target < computed:
        raise FpmError(
            "P-14",
            f"cache group {label}: target_tokens must be >= computed_tokens; got target {target} < computed {computed}",
        )
    if state_blocks is not None:
        return 0, state_blocks if target > 0 else 0
    if chunk is not None:
        return computed // chunk * chunk // block, cdiv(target, block)
    first = 0 if window is None else max(0, computed - (window - 1)) // block
    return first, cdiv(target, block)


def peak_blocks(
    context: int,
    max_num_tokens: int,
    *,
    block: int,
    window: int | None = None,
    chunk: int | None = None,
    state_blocks: int | None = None,
) -> int:
    """01 P-16 in blocks: the most one request of ``context`` tokens holds (admission bound).

    A state group: ``state_blocks``; full attention: ``cdiv(context, block)``;
    a window ``W``: ``min(cdiv(context, B), cdiv(W − 1 + T + B − 1, B))`` with
    ``T`` = ``max_num_tokens``; a chunk ``C``: ``cdiv(min(C + T, context), B)``
    (vLLM ``ChunkedLocalAttentionSpec.max_admission_blocks_per_request``).
    """
    if state_blocks is not None:
        return state_blocks
    if chunk is not None:
        return cdiv(min(chunk + max_num_tokens, context), block)
    if window is None:
        return cdiv(context, block)
    return min(cdiv(context, block), cdiv(window - 1 + max_num_tokens + block - 1, block))
