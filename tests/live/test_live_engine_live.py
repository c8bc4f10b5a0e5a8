"""tools/live_engine.py on the running vLLM 0.32.0 CPU engine: objects, a stepped trace, shutdown."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.live


def _tokens_per_request(steps):
    out: dict[str, int] = {}
    for s in steps:
        for rid, n in s["scheduled"]:
            out[rid] = out.get(rid, 0) + n
    return out


def test_a_trace_under_pressure_preempts_hits_prefixes_and_shuts_down(model_dirs, live_engine):
    le = live_engine
    # 12 blocks of 128 tokens: 1.5 requests of max_model_len 1024 fit at once
    engine = le.start_engine(le.EngineOptions(model=str(model_dirs["llama"]), max_model_len=1024, num_blocks=12,
                                              enforce_eager=True))
    try:
        summary = engine.summary()
        assert summary["num_blocks"] == 12
        assert summary["cache_config"]["kv_cache_max_concurrency"] == 1.5  # 12 * 128 / 1024
        # the worker's views: one storage of 12 pages of 131,072 bytes per layer, each layer a slice of it
        assert summary["storages"] == [{"id": "s0", "size_bytes": 4 * 12 * 131072,
                                        "layers": [f"model.layers.{i}.self_attn.attn" for i in range(4)]}]
        views = summary["layer_views"]["model.layers.1.self_attn.attn"]
        assert views == [{"storage": "s0", "offset_bytes": 12 * 131072, "shape": [12, 2, 128, 128],
                          "stride_bytes": [131072, 65536, 512, 4], "dtype": "torch.float32"}]
        step_fn = engine.engine_core.step_fn
        requests = le.random_trace(1, 16, 1024)
        run = le.run_trace(engine, requests)
        stats = le.trace_stats(run)
        # the wrapper is removed again
        assert engine.engine_core.step_fn is step_fn
    finally:
        left = engine.shutdown()
    assert left == {"children": [], "non_daemon_threads": []}
    assert stats["finished"] == 16
    assert stats["preemptions"] >= 1
    assert stats["admissions_with_prefix_hit"] >= 1
    assert all(r["output_tokens"] == q.output_len for q in requests for r in [run["requests"][q.request_id]])
    steps = run["steps"]
    assert [s["step"] for s in steps] == list(range(len(steps)))
    # every request computes at least its prompt and output (less its prefix hits, plus recomputation)
    per = _tokens_per_request(steps)
    hits = {rid: v for s in steps for rid, v in s["prefix_hits"].items() if rid not in s["preempted"]}
    for q in requests:
        preempted = any(q.request_id in s["preempted"] for s in steps)
        done = per[q.request_id] + hits.get(q.request_id, 0)
        assert done >= q.prompt_len + q.output_len - 1 if preempted else done == q.prompt_len + q.output_len - 1
    # free blocks never exceed the usable pool (the null block is never free)
    assert all(0 <= s["free_blocks"] <= 11 for s in steps)
    # a request is running with blocks in the single group, or not listed
    assert all(len(v) == 1 and v[0] >= 1 for s in steps for v in s["held"].values())
    # fpmcore's replay of the same trace with the engine's own plan takes the same steps (06 R-40)
    assert le.compare_with_replay(summary, requests, steps) is None


def test_the_hybrid_model_steps_like_the_replay_with_align_mode_hits(model_dirs, live_engine):
    le = live_engine
    # 4 groups (3 Gated DeltaNet, 1 attention) of 384-token blocks; 40 blocks hold a few requests
    engine = le.start_engine(le.EngineOptions(model=str(model_dirs["qwen3-next"]), dtype="bfloat16",
                                              max_model_len=2048, num_blocks=40, enforce_eager=True))
    try:
        summary = engine.summary()
        assert summary["coordinator"] == "HybridKVCacheCoordinator"
        assert summary["cache_config"]["mamba_cache_mode"] == "align"
        assert [g["block_size"] for g in summary["groups"]] == [384] * 4
        assert {g["page_size_bytes"] for g in summary["groups"]} == {196608}
        requests = le.random_trace(2, 12, 2048, prompt_max=1500, output_max=16)
        run = le.run_trace(engine, requests)
    finally:
        left = engine.shutdown()
    assert left == {"children": [], "non_daemon_threads": []}
    stats = le.trace_stats(run)
    assert stats["finished"] == 12
    assert stats["preemptions"] >= 1
    assert stats["prefix_hit_tokens"] % 384 == 0 and stats["prefix_hit_tokens"] > 0
    assert le.compare_with_replay(summary, requests, run["steps"]) is None
