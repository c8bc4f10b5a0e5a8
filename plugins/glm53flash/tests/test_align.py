"""The vLLM 0.33.0 Mamba align-stop rule (04 G-1 … G-7) and its worked vectors AS-1 … AS-19."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fpmcore import AlignStopQuery
from fpmcore_glm53flash import fpm_align_stop
from fpmcore_glm53flash.align import align_split, checkpoint_position, chunk_steps

B = H = 2176
BUDGET = 8192


def steps(
    prompt: int,
    ckpt: bool,
    *,
    start: int = 0,
    junction: int = 0,
    budget: int = BUDGET,
    block: int = B,
    alignment: int = 16,
) -> list[int]:
    return chunk_steps(
        prompt_len=prompt,
        block_size=block,
        hash_block_size=block,
        budget=budget,
        checkpoint_alignment=alignment if ckpt else None,
        start=start,
        junction=junction,
    )


@pytest.mark.parametrize(
    ("vector", "kwargs", "ckpt", "expected"),
    [
        ("AS-1", dict(prompt=10000), True, [6528, 3472]),
        ("AS-2", dict(prompt=10000), False, [6528, 2176, 1296]),
        ("AS-3", dict(prompt=4352), True, [4352]),
        ("AS-3", dict(prompt=4352), False, [2176, 2176]),
        ("AS-4", dict(prompt=8192), True, [8192]),
        ("AS-4", dict(prompt=8192), False, [6528, 1664]),
        ("AS-5", dict(prompt=8193), True, [6528, 1665]),
        ("AS-5", dict(prompt=8193), False, [6528, 1665]),
        ("AS-6", dict(prompt=2177), True, [2177]),
        ("AS-6", dict(prompt=2177), False, [2176, 1]),
        ("AS-7", dict(prompt=6600), True, [6600]),
        ("AS-7", dict(prompt=6600), False, [6528, 72]),
        ("AS-8", dict(prompt=6528, start=2176), True, [4352]),
        ("AS-8", dict(prompt=6528, start=2176), False, [2176, 2176]),
        ("AS-9", dict(prompt=4353, start=2176), True, [2177]),
        ("AS-9", dict(prompt=4353, start=2176), False, [2176, 1]),
        ("AS-10", dict(prompt=4368, start=16), True, [2160, 2192]),
        ("AS-11", dict(prompt=5100, start=100), True, [2076, 2924]),
        ("AS-12", dict(prompt=10000, junction=4352), True, [4352, 5648]),
        ("AS-12", dict(prompt=10000, junction=4352), False, [4352, 4352, 1296]),
        ("AS-13", dict(prompt=12000, start=2176, junction=6528), True, [4352, 5472]),
        ("AS-14", dict(prompt=8768, budget=2000), True, [2000, 176] * 4 + [64]),
        ("AS-15", dict(prompt=1048575), True, [6528] * 160 + [4095]),
        ("AS-16", dict(prompt=1048575), False, [6528] * 160 + [2176, 1919]),
        ("AS-17", dict(prompt=3000, block=2184), True, [2184, 816]),
        ("AS-18", dict(prompt=3000, block=2184, alignment=8), True, [3000]),
    ],
)
def test_worked_vectors_g1_g6(vector: str, kwargs: dict, ckpt: bool, expected: list[int]) -> None:
    """04 §3 worked vectors (computed with vLLM 0.33.0's own function)."""
    assert steps(ckpt=ckpt, **kwargs) == expected, vector


@pytest.mark.parametrize("alignment", [16, None])
def test_as19_floor_reads_the_configured_budget_g5(alignment: int | None) -> None:
    """AS-19: 1,192 tokens left in the step; G-5 reads the configured 8,192, so nothing is scheduled."""
    result = align_split(
        start=0,
        num_new_tokens=1192,
        prompt_len=5000,
        num_tokens=5000,
        block_size=B,
        hash_block_size=H,
        max_num_batched_tokens=BUDGET,
        checkpoint_alignment=alignment,
    )
    assert result.tokens == 0
    # reading the limit as the tokens left would have given 1,192
    wrong = align_split(
        start=0,
        num_new_tokens=1192,
        prompt_len=5000,
        num_tokens=5000,
        block_size=B,
        hash_block_size=H,
        max_num_batched_tokens=1192,
        checkpoint_alignment=alignment,
    )
    assert wrong.tokens == 1192


def test_internal_checkpoint_flag_g4() -> None:
    """G-4: AS-3 with the checkpoint saves it inside the chunk; without, or at n ≤ B, it does not."""
    kw = dict(start=0, prompt_len=4352, num_tokens=4352, block_size=B, hash_block_size=H, max_num_batched_tokens=BUDGET)
    assert align_split(num_new_tokens=4352, checkpoint_alignment=16, **kw).internal_checkpoint
    assert not align_split(num_new_tokens=4352, checkpoint_alignment=None, **kw).internal_checkpoint
    kw.update(prompt_len=2177, num_tokens=2177)
    assert align_split(num_new_tokens=2177, checkpoint_alignment=16, **kw).internal_checkpoint
    kw.update(prompt_len=2176, num_tokens=2176)
    assert not align_split(num_new_tokens=2176, checkpoint_alignment=16, **kw).internal_checkpoint


def test_decode_and_replayed_output_are_never_split_g2() -> None:
    """G-2: start ≥ max(prompt, total − 1) returns k unchanged; a resumed request replays to total − 1."""
    kw = dict(block_size=B, hash_block_size=H, max_num_batched_tokens=BUDGET, checkpoint_alignment=None)
    assert align_split(start=5000, num_new_tokens=1, prompt_len=5000, num_tokens=5001, **kw).tokens == 1
    # resumed: prompt 1000, 5000 tokens in all, recompute from 0 → prefill_end 4999, stop at 4352
    assert align_split(start=0, num_new_tokens=5000, prompt_len=1000, num_tokens=5000, **kw).tokens == 4352


def test_checkpoint_position_g3() -> None:
    """G-3 ``pos(x, u) = ((x − 1) // u) × u`` floored at 0."""
    assert checkpoint_position(0, B) == 0
    assert checkpoint_position(1, B) == 0
    assert checkpoint_position(2176, B) == 0
    assert checkpoint_position(2177, B) == 2176
    assert checkpoint_position(10000, B) == 8704


def test_hook_answers_for_the_runtimes_it_models() -> None:
    """``fpm_align_stop``: the hookspec's example (6,528) on vLLM 0.33.0, ``None`` on a runtime whose rule it lacks."""
    q = AlignStopQuery(
        start=0,
        num_new_tokens=8192,
        prompt_len=8192,
        num_tokens=8192,
        block_size=B,
        hash_block_size=H,
        max_num_batched_tokens=BUDGET,
        checkpoint_alignment=None,
    )
    assert fpm_align_stop(runtime="vllm==0.33.0", query=q) == 6528
    assert fpm_align_stop(runtime="vllm==0.27.0", query=q) is None
    assert fpm_align_stop(runtime="vllm==0.33.1", query=q) is None


@given(
    prefix_blocks=st.integers(0, 60),
    n=st.integers(1, BUDGET),
    block=st.sampled_from([2176, 2184, 1024, 4608, 16 * 97]),
    alignment=st.sampled_from([16, 8, None]),
)
def test_closed_form_g7(prefix_blocks: int, n: int, block: int, alignment: int | None) -> None:
    """G-7 is a consequence of G-2 … G-6 for a fresh request after a whole-block prefix."""
    P = prefix_blocks * block
    got = align_split(
        start=P,
        num_new_tokens=n,
        prompt_len=P + n,
        num_tokens=P + n,
        block_size=block,
        hash_block_size=block,
        max_num_batched_tokens=BUDGET,
        checkpoint_alignment=alignment,
    )
    if n <= block:
        one_step = True
    elif alignment is not None:
        one_step = ((n - 1) // block * block) % alignment == 0
    else:
        one_step = False
    assert (got.tokens == n) is one_step
    if not one_step:
        assert got.tokens == (P + n - 1) // block * block - P


def test_hook_through_the_plugin_host() -> None:
    """The installed entry point answers through the host, by either model id (AS-3 with and without the checkpoint)."""
    from fpmcore.documents.errors import FpmError
    from fpmcore.testing import make_host

    host = make_host(entry_points=("glm53flash", "dsv41"))
    for model in ("glm53flash", "zai-org/GLM-5.3-Flash"):
        for alignment, expected in ((16, 4352), (None, 2176)):
            q = AlignStopQuery(
                start=0,
                num_new_tokens=4352,
                prompt_len=4352,
                num_tokens=4352,
                block_size=B,
                hash_block_size=H,
                max_num_batched_tokens=BUDGET,
                checkpoint_alignment=alignment,
            )
            assert host.hooks.model(model).align_stop(runtime="vllm==0.33.0", query=q) == expected
    with pytest.raises(
        FpmError, match="no model plugin implements the align-stop rule for 'glm53flash' on vllm==0.27.0"
    ):
        host.hooks.model("glm53flash").align_stop(runtime="vllm==0.27.0", query=q)
    with pytest.raises(FpmError, match=r"'dsv41' on vllm==0\.33\.0 \(model plugin 'dsv41' gives none\)"):
        host.hooks.model("dsv41").align_stop(runtime="vllm==0.33.0", query=q)
