"""``fpmcore.documents.blocks``: the one ``cdiv``, ``block_range`` and P-16 peak, used by the profile, the replay and the plugins."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fpmcore.documents import blocks
from fpmcore.documents.blocks import block_range, cdiv, peak_blocks
from fpmcore.documents.errors import FpmError
from fpmcore.documents.profile import FpmCacheGroup
from fpmcore.replay.model import KIND_FULL, KIND_MAMBA, KIND_WINDOW
from fpmcore.replay.records import block_range as replay_block_range
from fpmcore.replay.records import peak_request_blocks


def test_docstring_examples():
    assert doctest.testmod(blocks).failed == 0


def test_the_plugins_use_the_host_cdiv():
    import fpmcore_glm53flash.planner
    import fpmcore_vllm_support.encode
    import fpmcore_vllm_support.hybrid_probe
    import fpmcore_vllm_support.observe
    import fpmcore_vllm_support.rules

    for module in (fpmcore_glm53flash.planner, fpmcore_vllm_support.encode,
                   fpmcore_vllm_support.observe, fpmcore_vllm_support.rules,
                   fpmcore_vllm_support.hybrid_probe):  # fmt: skip
        assert module.cdiv is cdiv, module.__name__


@given(st.integers(0, 10**30), st.integers(1, 10**12))
def test_cdiv_is_the_ceiling_of_01_1_1(a, b):
    assert cdiv(a, b) == (a + b - 1) // b


class _ReplayGroup:
    def __init__(self, kind, block, window=0, blocks_per_request=0, name="g"):
        self.kind, self.block, self.window, self.blocks_per_request, self.name = (
            kind,
            block,
            window,
            blocks_per_request,
            name,
        )


@given(
    st.integers(1, 4096), st.one_of(st.none(), st.integers(1, 100_000)), st.integers(0, 10**7), st.integers(0, 10**6)
)
def test_profile_and_replay_agree(block, window, computed, extra):
    """The profile's group and the replay's group give the same P-14 range and P-16 peak (one implementation)."""
    target = computed + extra
    group = FpmCacheGroup(name="g", kind="attention", num_layers=1, block_size_tokens=block, page_size_bytes=1,
                          sliding_window=window)  # fmt: skip
    rgroup = _ReplayGroup(KIND_FULL if window is None else KIND_WINDOW, block, window or 0)
    r = group.block_range(computed, target)
    assert (
        (r.start, r.stop)
        == replay_block_range(rgroup, computed, target)
        == block_range(computed, target, block=block, window=window)
    )
    if target > 0:
        assert group.peak_pages(target, 8192) == peak_request_blocks(rgroup, target, 8192)


def test_state_groups_and_the_p14_refusal():
    state = FpmCacheGroup(name="s", kind="state", num_layers=1, block_size_tokens=16, page_size_bytes=1,
                          blocks_per_request=3)  # fmt: skip
    rstate = _ReplayGroup(KIND_MAMBA, 16, blocks_per_request=3, name="s")
    assert (state.block_range(0, 0), replay_block_range(rstate, 0, 0)) == (range(0, 0), (0, 0))
    assert (state.block_range(5, 9), replay_block_range(rstate, 5, 9)) == (range(0, 3), (0, 3))
    assert peak_blocks(1 << 20, 8192, block=16, state_blocks=3) == 3
    for call in (lambda: state.block_range(9, 5), lambda: replay_block_range(rstate, 9, 5)):
        with pytest.raises(FpmError) as info:
            call()
        assert (info.value.rule, info.value.message) == (
            "P-14",
            "cache group 's': target_tokens must be >= computed_tokens; got target 5 < computed 9",
        )
