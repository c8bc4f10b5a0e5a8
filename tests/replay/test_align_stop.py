"""The align-stop rule of the engine (06 R-§4, 04 G-2 … G-6): worked vectors AS-1 … AS-19.

The C engine's rule (``fpm_align_stop``), the Python reference's and — when
the ``glm53flash`` plugin is installed — the plugin's ``fpm_align_stop``
implementation must give the same chunks.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpmcore.host.hooktypes import AlignStopQuery
from fpmcore.replay.align import align_stop as py_align_stop


def _impls():
    out = [("python", py_align_stop)]
    try:
        from fpmcore.replay import _native  # noqa: F401
        from fpmcore.replay.cengine import align_stop_c

        out.append(("c", align_stop_c))
    except ImportError:
        pass
    try:
        from fpmcore_glm53flash.align import align_stop as plugin_rule

        out.append(("glm53flash", plugin_rule))
    except ImportError:
        pass
    return out


IMPLS = _impls()


def chunks(fn, prompt, start=0, ckpt=True, budget=8192, b=2176, align=16, junction=0):
    """The chunk of every step for one request alone (its budget is the whole step budget)."""
    out = []
    while start < prompt:
        k = min(prompt - start, budget)
        n = fn(
            AlignStopQuery(
                start=start,
                num_new_tokens=k,
                prompt_len=prompt,
                num_tokens=prompt,
                block_size=b,
                hash_block_size=b,
                max_num_batched_tokens=budget,
                checkpoint_alignment=align if ckpt else None,
                junction=junction,
            )
        )
        assert n > 0
        out.append(n)
        start += n
    return out


AS = [
    ("AS-1", dict(prompt=10_000), [6528, 3472]),
    ("AS-2", dict(prompt=10_000, ckpt=False), [6528, 2176, 1296]),
    ("AS-3", dict(prompt=4352), [4352]),
    ("AS-3n", dict(prompt=4352, ckpt=False), [2176, 2176]),
    ("AS-4", dict(prompt=8192), [8192]),
    ("AS-4n", dict(prompt=8192, ckpt=False), [6528, 1664]),
    ("AS-5", dict(prompt=8193), [6528, 1665]),
    ("AS-5n", dict(prompt=8193, ckpt=False), [6528, 1665]),
    ("AS-6", dict(prompt=2177), [2177]),
    ("AS-6n", dict(prompt=2177, ckpt=False), [2176, 1]),
    ("AS-7", dict(prompt=6600), [6600]),
    ("AS-7n", dict(prompt=6600, ckpt=False), [6528, 72]),
    ("AS-8", dict(prompt=6528, start=2176), [4352]),
    ("AS-8n", dict(prompt=6528, start=2176, ckpt=False), [2176, 2176]),
    ("AS-9", dict(prompt=4353, start=2176), [2177]),
    ("AS-9n", dict(prompt=4353, start=2176, ckpt=False), [2176, 1]),
    ("AS-10", dict(prompt=4368, start=16), [2160, 2192]),
    ("AS-11", dict(prompt=5100, start=100), [2076, 2924]),
    ("AS-12", dict(prompt=10_000, junction=4352), [4352, 5648]),
    ("AS-12n", dict(prompt=10_000, junction=4352, ckpt=False), [4352, 4352, 1296]),
    ("AS-13", dict(prompt=12_000, start=2176, junction=6528), [4352, 5472]),
    ("AS-14", dict(prompt=8768, budget=2000), [2000, 176] * 4 + [64]),
    ("AS-15", dict(prompt=1_048_575), [6528] * 160 + [4095]),
    ("AS-16", dict(prompt=1_048_575, ckpt=False), [6528] * 160 + [2176, 1919]),
    ("AS-17", dict(prompt=3000, b=2184), [2184, 816]),
    ("AS-18", dict(prompt=3000, b=2184, align=8), [3000]),
]


@pytest.mark.parametrize("name,fn", IMPLS, ids=[n for n, _ in IMPLS])
@pytest.mark.parametrize("vec,kw,want", AS, ids=[a[0] for a in AS])
def test_worked_vectors(name, fn, vec, kw, want):
    assert chunks(fn, **kw) == want


@pytest.mark.parametrize("name,fn", IMPLS, ids=[n for n, _ in IMPLS])
def test_as19_limit_is_the_configured_budget(name, fn):
    """AS-19: 1,192 tokens left in the step, start 0, prompt 5,000: 0 with and without the checkpoint rule."""
    for align in (16, None):
        q = AlignStopQuery(
            start=0,
            num_new_tokens=1192,
            prompt_len=5000,
            num_tokens=5000,
            block_size=2176,
            hash_block_size=2176,
            max_num_batched_tokens=8192,
            checkpoint_alignment=align,
        )
        assert fn(q) == 0


queries = st.builds(
    lambda b, start, k, prompt, gen, align, junction, limit: AlignStopQuery(
        start=start,
        num_new_tokens=k,
        prompt_len=prompt,
        num_tokens=prompt + gen,
        block_size=b,
        hash_block_size=b,
        max_num_batched_tokens=limit,
        checkpoint_alignment=align,
        junction=junction,
    ),
    st.sampled_from([4, 16, 64, 2176]),
    st.integers(0, 20_000),
    st.integers(1, 9000),
    st.integers(1, 20_000),
    st.integers(0, 3),
    st.sampled_from([None, 1, 4, 16, 24]),
    st.integers(0, 20_000),
    st.sampled_from([8, 512, 2000, 8192]),
)


@settings(max_examples=300, deadline=None)
@given(queries)
def test_all_implementations_agree(q):
    answers = {name: fn(q) for name, fn in IMPLS}
    assert len(set(answers.values())) == 1, answers
    assert 0 <= answers["python"] <= q.num_new_tokens


@settings(max_examples=300, deadline=None)
@given(queries)
def test_the_last_stop_rule_of_a_release_agrees_in_c_and_python(q):
    """``ReplayRules.align_last_stop_at_tokens`` (vLLM 0.27.0): the last cacheable stop
    is the block boundary at or below the request's tokens; both engines take the same chunk."""
    from fpmcore.replay.cengine import align_stop_c

    assert align_stop_c(q, last_stop_at_tokens=True) == py_align_stop(q, last_stop_at_tokens=True)


def test_the_last_stop_at_the_tokens_only_differs_on_a_block_boundary():
    """A prompt of 64 tokens, block 16, nothing generated: vLLM 0.33.0 stops its first chunk of
    64 at 48 (the last boundary below 64), vLLM 0.27.0 schedules all 64 (the boundary at 64)."""
    from fpmcore.replay.cengine import align_stop_c

    q = AlignStopQuery(
        start=0,
        num_new_tokens=64,
        prompt_len=64,
        num_tokens=64,
        block_size=16,
        hash_block_size=16,
        max_num_batched_tokens=128,
        checkpoint_alignment=None,
    )
    for fn in (py_align_stop, align_stop_c):
        assert fn(q) == 48
        assert fn(q, last_stop_at_tokens=True) == 64
