"""Capacity arithmetic that the import checks (03: C-2, C-5, C-6, C-7, C-10).

Integers everywhere, except C-6 and C-7, which follow vLLM's own IEEE-754
double arithmetic: ``n / M`` is Python's correctly rounded true division and
``int(c × L)`` truncates toward zero.

The startup reservation of one spec (C-1) depends on the runtime's spec
classes: the runtime plugin gives it (``ImportRules.startup_blocks``, with
the :class:`~fpmcore.host.stage_hooktypes.StartupLimits` of
:func:`fpmcore.importer.cache_groups.limits`); C-3's maximum over a group's layer
specs is :func:`fpmcore.importer.cache_groups.group_startup`.
"""

from __future__ import annotations


def in_flight_tokens(max_num_batched_tokens: int, max_concurrent_batches: int) -> int:
    """C-2: ``T = max_concurrent_batches × max_num_batched_tokens`` (vllm/config/vllm.py:587-610).

    ``max_concurrent_batches`` is the runtime's (``ImportRules.in_flight_batches``).
    """
    return max_concurrent_batches * max_num_batched_tokens


def concurrency(num_blocks: int, blocks_per_request: int) -> float:
    """C-6: ``n / M`` as vLLM computes it (the null block counted in ``n``)."""
    return num_blocks / blocks_per_request


def size_tokens(max_concurrency: float, max_model_len: int) -> int:
    """C-7: ``int(c × L)``, a double product truncated toward zero."""
    return int(max_concurrency * max_model_len)


def blocks_from_concurrency(num_blocks: int, max_concurrency: float) -> str:
    """I-103's ``<x>``: ``n / c`` as an integer when within 1e-9 relative, else six decimals."""
    x = num_blocks / max_concurrency
    r = round(x)
    if abs(x - r) <= 1e-9 * abs(x):
        return str(r)
    return f"{x:.6f}"
