"""C engine versus the Python reference on random profiles and traces (06 R-4 … R-31).

Every step record, request record, summary and stop diagnostic must be
identical: for every group kind (prefix caching with full, windowed,
convolution, Mamba and ring groups), every scheduler setting of vLLM 0.33.0
the engine models, every runtime rule, and whether the replay runs at once
or in chunks.  The C engine's summary pass jumps over idle periods and
decode-only stretches; the reference steps through them.
"""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_latency import TABLE, TABLE_SHARED

from fpmcore.documents.errors import FpmError
from fpmcore.replay import make_config, run_replay
from fpmcore.replay.engine import ReplayRun
from fpmcore.replay.model import KIND_CHUNK, KIND_CONV, KIND_FULL, KIND_MAMBA, KIND_RING, KIND_WINDOW, GroupSpec
from fpmcore.replay.rules import ReplayRules
from fpmcore.replay.trace import Trace, parse_trace_lines


@st.composite
def settings_(draw, max_num_seqs: int, max_model_len: int, budget: int, groups: list[GroupSpec]):
    """vLLM scheduler settings and runtime rules, each vLLM's default or a random value.

    Every switch of :class:`ReplayRules` is drawn; a release without ring
    groups or Mamba checkpoint blocks only where the groups have none (R-3
    refuses them otherwise, ``test_a_group_the_release_lacks_is_refused``).
    """
    kw: dict = {}
    if draw(st.booleans()):
        kw["max_num_scheduled_tokens"] = draw(st.integers(1, 80))
    if draw(st.booleans()):
        kw["max_num_active_seqs"] = draw(st.integers(1, max_num_seqs))
    if draw(st.booleans()):
        kw["long_prefill_token_threshold"] = draw(st.integers(1, max_model_len))
        kw["long_prefill_token_threshold_adaptive"] = draw(st.booleans())
    if draw(st.booleans()):
        kw["prefill_schedule_interval"] = draw(st.integers(1, 4))
    kw["scheduling_policy"] = draw(st.sampled_from(["fcfs", "priority"]))
    if draw(st.integers(0, 3)) == 0:
        kw["max_num_queued_reqs"] = draw(st.integers(0, 6))
    if draw(st.integers(0, 3)) == 0:
        kw["max_num_queued_tokens"] = draw(st.integers(0, 200))
    # a few steps, or enough for these traces: a configuration can livelock
    # (a request that preempts itself at every retry) and then stops at the limit
    kw["max_steps"] = draw(st.integers(1, 30)) if draw(st.integers(0, 9)) == 0 else 2000

    def switch() -> bool:  # a release's departure from the reference runtime, one draw in five
        return draw(st.integers(0, 4)) == 0

    rings = any(g.kind == KIND_RING for g in groups)
    checkpoints = any(g.kind == KIND_MAMBA and g.checkpoint_blocks for g in groups)
    kw["rules"] = ReplayRules(
        check_before_release=switch(), free_uncached_to_back=switch(),
        mamba_hits_same_step=switch(), window_cap_exact=switch(),
        long_prefill_cap_always=switch(), budget_scheduled_only=switch(),
        priority_self_preemption_stops=switch(), priority_shift_if_scheduled=switch(),
        dense_retention=switch(), align_last_stop_at_tokens=switch(), mamba_boundary_recached=switch(),
        no_mamba_checkpoints=not checkpoints and switch(), no_ring_groups=not rings and switch(),
    )  # fmt: skip
    return kw


@st.composite
def configs(draw):
    prefix = draw(st.booleans())
    b = draw(st.sampled_from([2, 4, 8, 16]))
    groups: list[GroupSpec] = []
    if prefix:
        page = draw(st.sampled_from([1, 4, 512]))
        groups.append(
            draw(
                st.sampled_from(
                    [
                        GroupSpec("attn", KIND_FULL, b, page),
                        GroupSpec("swa", KIND_WINDOW, b, page, window=draw(st.integers(1, 40))),
                        GroupSpec("conv", KIND_CONV, b, page, window=draw(st.integers(1, 8))),
                        GroupSpec("local", KIND_CHUNK, b, page, window=draw(st.integers(1, 40))),
                    ]
                )
            )
        )
        for i in range(draw(st.integers(0, 2))):
            ck = draw(st.integers(0, 1))
            al = draw(st.sampled_from([0, 1, 2, 4, 8])) if ck else 0
            groups.insert(
                draw(st.integers(0, len(groups))),
                GroupSpec(
                    f"m{i}", KIND_MAMBA, b, page, blocks_per_request=1, checkpoint_blocks=ck, checkpoint_alignment=al
                ),
            )
        if draw(st.booleans()):
            groups.insert(
                draw(st.integers(0, len(groups))),
                GroupSpec("w2", KIND_WINDOW, b, page, window=draw(st.integers(1, 40))),
            )
        if draw(st.booleans()):
            groups.append(GroupSpec("ring", KIND_RING, 4, page, blocks_per_request=draw(st.integers(1, 2))))
        usable = draw(st.integers(2, 30))
        cap = usable * page
    else:
        block_mode = draw(st.booleans())
        common = draw(st.sampled_from([1, 4, 512]))
        for i in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from([KIND_FULL, KIND_WINDOW, KIND_CONV, KIND_CHUNK, KIND_RING, KIND_MAMBA]))
            page = common if block_mode else draw(st.integers(1, 16))
            gb = draw(st.sampled_from([1, 2, 4, 8]))
            if kind in (KIND_WINDOW, KIND_CONV, KIND_CHUNK):
                groups.append(GroupSpec(f"g{i}", kind, gb, page, window=draw(st.integers(1, 20))))
            elif kind == KIND_RING:
                groups.append(GroupSpec(f"g{i}", kind, gb, page, blocks_per_request=draw(st.integers(1, 2))))
            elif kind == KIND_MAMBA:
                groups.append(
                    GroupSpec(
                        f"g{i}", kind, gb, page, blocks_per_request=1, checkpoint_blocks=1, checkpoint_alignment=4
                    )
                )
            else:
                groups.append(GroupSpec(f"g{i}", kind, gb, page))
        cap = draw(st.integers(2, 80)) * common if block_mode else draw(st.integers(8, 600))
        if block_mode:
            groups = [
                GroupSpec(
                    g.name,
                    g.kind,
                    g.block,
                    common,
                    g.window,
                    g.blocks_per_request,
                    g.checkpoint_blocks,
                    g.checkpoint_alignment,
                )
                for g in groups
            ]
    block_mode = len({g.page for g in groups}) == 1
    if block_mode and cap % groups[0].page:
        cap = (cap // groups[0].page + 1) * groups[0].page
    timing = draw(st.sampled_from(["fixed1", "fixed_q", "table", "table_shared"]))
    seqs = draw(st.integers(1, 5))
    mml = draw(st.integers(16, 200))
    budget = draw(st.integers(1, 64))
    kw = dict(
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        max_model_len=mml,
        reserve_full_isl=draw(st.booleans()),
        enable_chunked_prefill=True if prefix else draw(st.booleans()),
        watermark=draw(st.sampled_from([0.0, 0.1, 0.3])) if block_mode else 0.0,
        prefix_caching=prefix,
        fixed_step_seconds={"fixed1": 1.0, "fixed_q": 0.25, "table": None, "table_shared": None}[timing],
        table={"table": TABLE, "table_shared": TABLE_SHARED}.get(timing),
        **draw(settings_(seqs, mml, budget, groups)),
    )
    return make_config(groups, cap, **kw)


def draw_hash_ids(draw, p: int, block: int, earlier: list[list[int]]) -> list[int]:
    """Content-block ids of a ``p``-token prompt at ``block`` tokens per id: often a prefix of an earlier
    request's ids, then ids from a small alphabet (so chains meet and part again at random places)."""
    need = -(-p // block)
    ids: list[int] = []
    if earlier and draw(st.integers(0, 3)):
        src = draw(st.sampled_from(earlier))
        most = min(len(src), need)
        ids = src[: most if draw(st.booleans()) else draw(st.integers(0, most))]
    while len(ids) < need:
        ids.append(draw(st.integers(0, 3)) if draw(st.integers(0, 3)) else draw(st.integers(2**62, 2**63 - 1)))
    return ids


@st.composite
def traces(draw):
    """Random requests; some share a prefix (``shared_prefix_id``), copy one (``prefix_of``, R-36) or give
    their prompt as content-block ids (``hash_ids``)."""
    timed = draw(st.booleans())
    n = draw(st.integers(1, 8))
    lines = []
    prompts: list[int] = []
    shared_len: dict[str, int] = {}
    hashed: list[list[int]] = []
    hash_block = draw(st.sampled_from([1, 3, 4, 5, 8, 16]))
    long_outputs = draw(st.integers(0, 3)) == 0
    for i in range(n):
        p = draw(st.integers(1, 64))
        d = {"request_id": f"r{i}", "prompt_len": p, "output_len": draw(st.integers(1, 300 if long_outputs else 40))}
        if draw(st.booleans()):
            d["priority"] = draw(st.integers(-2, 2))
        share = draw(st.sampled_from(["none", "none", "of", "id", "hash"]))
        if share == "hash":
            d["hash_ids"] = draw_hash_ids(draw, p, hash_block, hashed)
            d["hash_block_tokens"] = hash_block
            hashed.append(d["hash_ids"])
        elif share == "of" and i > 0:
            src = draw(st.integers(0, i - 1))
            d["prefix_of"] = f"r{src}"
            d["prefix_of_len"] = draw(st.integers(1, min(p, prompts[src])))
        elif share == "id":
            sid = draw(st.sampled_from(["x", "y"]))
            slen = shared_len.setdefault(sid, draw(st.integers(1, 40)))
            if slen <= p:
                d["shared_prefix_id"] = sid
                d["shared_prefix_len"] = slen
        prompts.append(p)
        if timed:
            d["arrival_time"] = draw(st.sampled_from([0.0, 0.01, 0.05, 0.25, 0.6, 2.0]))
        else:
            d["arrival_step"] = draw(st.integers(0, 6)) * draw(st.sampled_from([1, 1, 20]))
        lines.append(json.dumps(d))
    return parse_trace_lines(lines)


@st.composite
def pc_configs(draw):
    """Prefix-caching deployments (R-36 … R-38): full attention and/or windowed groups,
    0–4 Mamba groups (half of the time all of one checkpoint class, as GLM-5.3-Flash's four, which the C engine
    decides in lockstep), an optional ring, and random scheduler settings."""
    b = draw(st.sampled_from([2, 4, 8]))
    page = draw(st.sampled_from([1, 64]))
    groups = []
    if draw(st.integers(0, 3)):
        groups.append(GroupSpec("attn", KIND_FULL, b, page))
    for i in range(draw(st.integers(0 if groups else 1, 2))):
        groups.append(
            GroupSpec(
                f"w{i}",
                draw(st.sampled_from([KIND_WINDOW, KIND_CONV, KIND_CHUNK])),
                b,
                page,
                window=draw(st.integers(1, 24)),
            )
        )
    one_class = draw(st.booleans())
    for i in range(draw(st.integers(0, 4))):
        if i == 0 or not one_class:
            ck = draw(st.integers(0, 1))
            al = draw(st.sampled_from([1, 2, 4])) if ck else 0
        groups.insert(
            draw(st.integers(0, len(groups))),
            GroupSpec(
                f"m{i}", KIND_MAMBA, b, page, blocks_per_request=1, checkpoint_blocks=ck, checkpoint_alignment=al
            ),
        )
    if draw(st.booleans()):
        groups.append(GroupSpec("ring", KIND_RING, 4, page, blocks_per_request=1))
    seqs = draw(st.integers(1, 6))
    mml = draw(st.integers(64, 256))
    budget = draw(st.integers(4, 64))
    return make_config(
        groups,
        draw(st.integers(8, 80)) * page,
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        max_model_len=mml,
        reserve_full_isl=draw(st.booleans()),
        watermark=draw(st.sampled_from([0.0, 0.0, 0.1])),
        prefix_caching=True,
        fixed_step_seconds=1.0,
        **draw(settings_(seqs, mml, budget, groups)),
    )


@st.composite
def shared_traces(draw):
    """Step-exact requests that mostly share prefixes."""
    n = draw(st.integers(2, 8))
    lines = []
    prompts: list[int] = []
    for i in range(n):
        p = draw(st.integers(2, 60))
        d = {
            "request_id": f"r{i}",
            "arrival_step": draw(st.integers(0, 10)),
            "prompt_len": p,
            "output_len": draw(st.integers(1, 30)),
        }
        if i > 0 and draw(st.integers(0, 3)):
            src = draw(st.integers(0, i - 1))
            d["prefix_of"] = f"r{src}"
            d["prefix_of_len"] = draw(st.integers(1, min(p, prompts[src])))
        if draw(st.booleans()):
            d["priority"] = draw(st.integers(-2, 2))
        prompts.append(p)
        lines.append(json.dumps(d))
    return parse_trace_lines(lines)


@st.composite
def hash_traces(draw):
    """Step-exact requests given as content-block ids (``hash_ids``) that mostly share leading blocks, at a
    hash block size that may differ from the replay's (and between requests), partial last blocks, and a few
    requests copying another's prefix (``prefix_of``) or without ids."""
    n = draw(st.integers(2, 9))
    blocks = draw(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 16, 32]), min_size=1, max_size=2))
    lines = []
    prompts: list[int] = []
    hashed: dict[int, list[list[int]]] = {}
    step = 0
    for i in range(n):
        p = draw(st.integers(1, 70))
        step += draw(st.sampled_from([0, 0, 1, 2, 5, 12]))
        d = {
            "request_id": f"r{i}",
            "arrival_step": step,
            "prompt_len": p,
            "output_len": draw(st.integers(1, 30)),
        }
        kind = draw(st.integers(0, 9))
        if kind == 0 and i > 0:
            src = draw(st.integers(0, i - 1))
            d["prefix_of"] = f"r{src}"
            d["prefix_of_len"] = draw(st.integers(1, min(p, prompts[src])))
        elif kind > 1:
            block = draw(st.sampled_from(blocks))
            d["hash_ids"] = draw_hash_ids(draw, p, block, hashed.setdefault(block, []))
            d["hash_block_tokens"] = block
            hashed[block].append(d["hash_ids"])
        prompts.append(p)
        lines.append(json.dumps(d))
    return parse_trace_lines(lines)


def _outcome(cfg, tr, backend):
    """Records, summary, diagnostic, and the raw steps and R-35 totals (the C engine counts those itself)."""
    r = run_replay(cfg, tr, backend=backend)
    return (r.steps, r.requests, r.summary, (r.error.rule, r.error.message) if r.error else None,
            tuple(r.raw.steps), r.raw.totals)  # fmt: skip


def _chunked(cfg, tr, backend, steps, chunk):
    """The same replay in chunks of ``chunk`` steps: its records, summary and diagnostic."""
    run = ReplayRun(cfg, tr, backend=backend, steps=steps)
    step_recs, req_recs = [], []
    while not run.ended:
        c = run.advance(chunk)
        if steps:
            assert c.first_step == len(step_recs) and len(c.steps) <= chunk
        step_recs += c.steps
        req_recs += c.requests
    return step_recs, req_recs, run.summary(), (run.error.rule, run.error.message) if run.error else None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), traces())
def test_c_equals_python(cfg, tr):
    c = _outcome(cfg, tr, "c")
    p = _outcome(cfg, tr, "python")
    assert c == p


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), traces(), st.sampled_from([1, 3, 50]))
def test_chunks_equal_the_whole_replay(cfg, tr, chunk):
    """ReplayRun in chunks (with and without step records, both backends) gives run_replay's records."""
    whole = run_replay(cfg, tr, backend="c")
    order = {r.request_id: i for i, r in enumerate(tr.requests)}
    err = (whole.error.rule, whole.error.message) if whole.error else None
    for backend in ("c", "python"):
        steps, reqs, summary, error = _chunked(cfg, tr, backend, True, chunk)
        assert steps == list(whole.steps)
        assert sorted(reqs, key=lambda r: order[r["request_id"]]) == whole.requests
        assert (summary, error) == (whole.summary, err)
        _, reqs2, summary2, error2 = _chunked(cfg, tr, backend, False, chunk)
        assert (reqs2, summary2, error2) == (reqs, summary, error)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pc_configs(), shared_traces())
def test_c_equals_python_prefix_caching(cfg, tr):
    """Shared prefixes, hits, eviction and the free-queue order: C and Python agree (R-36 … R-38)."""
    assert _outcome(cfg, tr, "c") == _outcome(cfg, tr, "python")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pc_configs(), hash_traces())
def test_c_equals_python_hash_ids(cfg, tr):
    """Prefixes shared through content-block ids (``hash_ids``) with any earlier request: C and Python agree."""
    assert _outcome(cfg, tr, "c") == _outcome(cfg, tr, "python")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), hash_traces())
def test_c_equals_python_hash_ids_any_deployment(cfg, tr):
    """The same traces on any deployment, prefix caching on or off (off: the ids change nothing)."""
    c = _outcome(cfg, tr, "c")
    assert c == _outcome(cfg, tr, "python")
    if not cfg.prefix_caching:
        plain = Trace(tuple(attrs.evolve(r, hash_ids=None, hash_block_tokens=None) for r in tr.requests),
                      tr.arrival_field)  # fmt: skip
        assert _outcome(cfg, plain, "c") == c


def _has_chunk(cfg) -> bool:
    return any(g.kind == KIND_CHUNK for g in cfg.groups)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.one_of(configs(), pc_configs()).filter(_has_chunk), st.one_of(traces(), shared_traces()))
def test_c_equals_python_chunked_local(cfg, tr):
    """Chunked-local groups (vLLM ``ChunkedLocalAttentionManager``) with and without prefix caching:
    C and Python agree, and the C engine's jumps over decode stretches give the stepped records."""
    c = _outcome(cfg, tr, "c")
    assert c == _outcome(cfg, tr, "python")
    whole = run_replay(cfg, tr, backend="c")
    _, reqs, summary, _ = _chunked(cfg, tr, "c", False, 50)
    order = {r.request_id: i for i, r in enumerate(tr.requests)}
    assert (sorted(reqs, key=lambda r: order[r["request_id"]]), summary) == (whole.requests, whole.summary)


def test_invalid_config_is_refused_before_c():
    """R-3: refusals come from the host with their diagnostics, never from C."""
    with pytest.raises(FpmError) as e:
        make_config([GroupSpec("a", KIND_FULL, 0, 4)], 16, max_num_batched_tokens=8, max_num_seqs=1, max_model_len=16)
    assert e.value.message == (
        "replay requires cache groups with a name and positive block_size_tokens and page_size_bytes: group a"
    )
    with pytest.raises(FpmError) as e:
        make_config([GroupSpec("a", KIND_FULL, 4, 4)], 18, max_num_batched_tokens=8, max_num_seqs=1, max_model_len=16)
    assert e.value.message == "capacity_bytes 18 is not a whole number of 4-byte pool blocks"
    with pytest.raises(FpmError) as e:
        make_config([GroupSpec("a", KIND_FULL, 4, 4)], 16, max_num_batched_tokens=0, max_num_seqs=1, max_model_len=16)
    assert e.value.message == "replay requires a positive integer max_num_batched_tokens: found 0"
    with pytest.raises(FpmError) as e:
        make_config(
            [GroupSpec("a", KIND_FULL, 4, 4), GroupSpec("b", KIND_FULL, 4, 8)],
            16,
            max_num_batched_tokens=8,
            max_num_seqs=1,
            max_model_len=16,
            watermark=0.1,
        )
    assert e.value.message == "watermark requires block mode: watermark=0.1"
    with pytest.raises(FpmError) as e:
        make_config(
            [GroupSpec("a", KIND_FULL, 4, 4), GroupSpec("b", KIND_FULL, 4, 8)],
            16,
            max_num_batched_tokens=8,
            max_num_seqs=1,
            max_model_len=16,
            prefix_caching=True,
        )
    assert e.value.message == (
        "prefix-caching replay requires every cache group page to equal the pool page: group b page 8, pool page 4"
    )
    with pytest.raises(FpmError) as e:
        make_config(
            [GroupSpec("a", KIND_FULL, 4, 4), GroupSpec("w", KIND_WINDOW, 8, 4, window=8)],
            16,
            max_num_batched_tokens=8,
            max_num_seqs=1,
            max_model_len=16,
            prefix_caching=True,
        )
    assert e.value.message == (
        "prefix-caching replay requires every attention and convolution group to use one block size: "
        "group w block 8, block=4"
    )
    with pytest.raises(FpmError) as e:
        make_config(
            [GroupSpec("a", KIND_FULL, 4, 4), GroupSpec("m", KIND_MAMBA, 8, 4, blocks_per_request=1)],
            16,
            max_num_batched_tokens=8,
            max_num_seqs=1,
            max_model_len=16,
            prefix_caching=True,
        )
    assert e.value.message == (
        "prefix-caching replay requires hash_block_size_tokens equal to the block size: hash=4, block=4, mamba block=8"
    )
    with pytest.raises(FpmError) as e:
        make_config(
            [GroupSpec("a", KIND_FULL, 4, 4), GroupSpec("m", KIND_MAMBA, 4, 4, blocks_per_request=1)],
            16,
            max_num_batched_tokens=8,
            max_num_seqs=1,
            max_model_len=16,
            prefix_caching=True,
            enable_chunked_prefill=False,
        )
    assert e.value.message == (
        "prefix-caching replay with mamba state groups requires chunked prefill: enable_chunked_prefill=false"
    )
    with pytest.raises(FpmError) as e:
        make_config(
            [GroupSpec("a", KIND_FULL, 4, 4)],
            16,
            max_num_batched_tokens=8,
            max_num_seqs=1,
            max_model_len=16,
            watermark=1.0,
        )
    assert e.value.message == "watermark must be in [0, 1): found 1.0"


def test_a_group_the_release_lacks_is_refused():
    """R-3: a ring group, or a Mamba group with a checkpoint block, on a release whose KV cache has none."""
    base = dict(max_num_batched_tokens=8, max_num_seqs=1, max_model_len=16)
    ring = [GroupSpec("a", KIND_FULL, 4, 4), GroupSpec("tail", KIND_RING, 4, 4, blocks_per_request=1)]
    with pytest.raises(FpmError) as e:
        make_config(ring, 64, rules=ReplayRules(runtime="vllm==0.27.0", no_ring_groups=True), **base)
    assert e.value.message == "the vllm==0.27.0 KV cache has no ring state groups: cache group tail"
    mamba = [
        GroupSpec("a", KIND_FULL, 4, 4),
        GroupSpec("m", KIND_MAMBA, 4, 4, blocks_per_request=1, checkpoint_blocks=1, checkpoint_alignment=4),
    ]
    with pytest.raises(FpmError) as e:
        make_config(mamba, 64, rules=ReplayRules(runtime="vllm==0.27.0", no_mamba_checkpoints=True), **base)
    assert e.value.message == "the vllm==0.27.0 KV cache has no Mamba prefill checkpoint blocks: cache group m"
    plain = [GroupSpec("a", KIND_FULL, 4, 4), GroupSpec("m", KIND_MAMBA, 4, 4, blocks_per_request=1)]
    make_config(plain, 64, rules=ReplayRules(no_mamba_checkpoints=True, no_ring_groups=True), **base)
