"""Step-exact traces without an engine (:mod:`fpmcore_vllm032.steps`): the prompts ``fpm live-steps`` and the live
tests give the engine, random traces, and trace lines that read back."""

from __future__ import annotations

import json

from fpmcore_vllm032.steps import TraceRequest, make_prompts, random_trace, read_trace


def test_prompts_copy_prefixes_and_differ_elsewhere():
    reqs = [
        TraceRequest("a", 0, 300, 4),
        TraceRequest("b", 1, 200, 4, prefix_of="a", prefix_of_len=150),
        TraceRequest("c", 1, 100, 4, prefix_of="b", prefix_of_len=100),
    ]
    p = make_prompts(reqs, vocab=512, seed=0, exclude={509, 510, 511})
    assert [len(p[r]) for r in "abc"] == [300, 200, 100]
    assert p["b"][:150] == p["a"][:150] and p["b"][150] != p["a"][150] or p["b"][150:] != p["a"][150:200]
    assert p["c"] == p["a"][:100]
    assert all(t < 509 for t in p["a"] + p["b"])
    assert make_prompts(reqs, vocab=512, seed=0, exclude={509, 510, 511}) == p
    # random traces name only earlier requests as their prefix source
    trace = random_trace(5, 40, 1024)
    seen: set[str] = set()
    for r in trace:
        assert r.prefix_of is None or r.prefix_of in seen
        seen.add(r.request_id)


def test_prompts_of_content_block_ids_agree_exactly_where_the_ids_agree(tmp_path):
    """A prompt given as ``hash_ids`` is one draw per distinct block id, a partial last block its block's
    first tokens (the Mooncake trace's meaning); the trace line keeps the ids, and reads back."""
    reqs = [
        TraceRequest("a", 0, 40, 4, hash_ids=(0, 1, 2), hash_block_tokens=16),
        TraceRequest("b", 0, 36, 4, hash_ids=(0, 1, 7), hash_block_tokens=16),
        TraceRequest("c", 2, 20, 4, hash_ids=(0, 2), hash_block_tokens=16),
    ]
    p = make_prompts(reqs, vocab=512, seed=0, exclude={511})
    assert [len(p[r]) for r in "abc"] == [40, 36, 20]
    assert p["b"][:32] == p["a"][:32] and p["b"][32:] != p["a"][32:36]
    assert p["c"][:16] == p["a"][:16]
    assert p["c"][16:] == p["a"][32:36]  # block 2 holds the same tokens wherever it stands
    assert 511 not in p["a"] + p["b"] + p["c"]
    lines = [json.dumps(r.to_json()) for r in reqs]
    assert json.loads(lines[1])["hash_ids"] == [0, 1, 7] and json.loads(lines[1])["hash_block_tokens"] == 16
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    assert read_trace(tmp_path / "t.jsonl") == reqs
