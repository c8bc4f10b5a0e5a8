"""Which blocks of a sliding-window group stay in the prefix cache (R-36).

vLLM 0.33.0 caches a windowed group's full blocks only where a later hit can
use them (``reachable_block_mask`` with ``prefix_cache_retention_interval``
0): the ``cdiv(window - 1, block)`` blocks below the request's replay boundary
``⌊(P - 1) / B⌋ × B`` (and below its junction).  A release with the
``dense_retention`` rule keeps every full block, as vLLM 0.27 does.  The hits
below are worked out by hand: block 4, window 9, so a hit needs the 2 blocks
below it; a 33-token prompt has its boundary at 32 tokens, block 8, and keeps
blocks 6 and 7.
"""

from __future__ import annotations

import pytest
from helpers import full, run, trace, window

from fpmcore.replay.rules import ReplayRules


def _hits(backend, groups, dense: bool) -> list[int]:
    tr = trace(
        ("A", 33, 2, 0),
        ("B", 33, 2, 20, {"prefix_of": "A", "prefix_of_len": 33}),
        ("C", 33, 2, 40, {"prefix_of": "A", "prefix_of_len": 20}),
    )
    r = run(groups, 200, 64, tr, backend, prefix_caching=True, rules=ReplayRules(dense_retention=dense))
    assert r.error is None
    return [q["prefix_hit_tokens"] for q in r.requests]


@pytest.mark.parametrize("dense", [False, True])
def test_a_window_hit_needs_the_kept_run_below_the_boundary(backend, dense):
    """B repeats A's prompt: blocks 6 and 7 are kept, B hits 32 tokens either way.  C shares A's first
    20 tokens: its hit would end at block 5 and need blocks 3 and 4, which only dense retention kept."""
    assert _hits(backend, [window(4, 1, 9)], dense) == [0, 32, 20 if dense else 0]


def test_full_attention_beside_a_window_keeps_its_blocks(backend):
    """Beside a full-attention group (a hit must hold in both), C's 20-token hit needs the window's blocks
    3 and 4 too: the full group alone would give it 20 tokens, the kept window run gives it none."""
    groups = [full(4, 1), window(4, 1, 9)]
    assert _hits(backend, groups, dense=False) == [0, 32, 0]
    assert _hits(backend, groups, dense=True) == [0, 32, 20]
