"""Prompts given as content-block ids (``hash_ids`` with ``hash_block_tokens``, R-36).

Two requests share exactly the leading tokens whose block ids agree position
by position, with any earlier request; a partial last block shares its tokens
up to the shorter prompt.  The hits below are worked out by hand from the ids,
the trace's block size and the replay's hash block size.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from helpers import full, run, trace
from hypothesis import given, settings
from hypothesis import strategies as st

from fpmcore.replay import make_config
from fpmcore.replay.engine import origins
from fpmcore.replay.trace import from_sched_json, hash_id_count, parse_trace, parse_trace_lines, to_sched_json
from fpmcore.verify.traces import prompts
from tests.support.real_scheduler import replay_vs_vllm

ROOT = Path(__file__).resolve().parents[2]


def ids(block: int, *block_ids: int) -> dict:
    return {"hash_ids": list(block_ids), "hash_block_tokens": block}


def test_hit_tokens_follow_the_block_ids_at_512_tokens_per_id(backend):
    """Replay hash block 16, trace blocks of 512 tokens; each request arrives after the earlier ones finished.

    * B agrees with A on 2 of 3 ids: 2 × 512 = 1024 tokens hit (64 replay blocks).
    * C has A's three ids over 1,300 tokens (its last block partial, 276 tokens): it holds A's first
      1,300 tokens; the hit stops at the last whole replay block before its last token,
      ⌊1299 / 16⌋ × 16 = 1,296.
    * D has A's ids over 1,400 tokens: ⌊1399 / 16⌋ × 16 = 1,392 tokens of A's blocks (C's block 81 holds
      C's first output tokens, not D's prompt).
    * E agrees with A on its second id only: a block's hash covers the blocks before it, no hit.
    * F has A's first two ids, 1,024 tokens: every whole block but the one holding its last token,
      1,008 tokens.
    """
    tr = trace(
        ("A", 1536, 2, 0, ids(512, 10, 11, 12)),
        ("B", 1536, 2, 5, ids(512, 10, 11, 99)),
        ("C", 1300, 2, 10, ids(512, 10, 11, 12)),
        ("D", 1400, 2, 15, ids(512, 10, 11, 12)),
        ("E", 600, 2, 20, ids(512, 77, 11)),
        ("F", 1024, 2, 25, ids(512, 10, 11)),
    )
    r = run([full(16, 1)], 2000, 2048, tr, backend, max_num_seqs=4, prefix_caching=True)
    assert r.error is None
    assert [q["prefix_hit_tokens"] for q in r.requests] == [0, 1024, 1296, 1392, 0, 1008]
    assert r.summary["prefix_hit_tokens"] == 1024 + 1296 + 1392 + 1008 == 4720
    assert r.summary["preemptions_total"] == 0
    # prompt tokens computed: the prompts less their hits
    assert sum(s["sum_prefill_tokens"] for s in r.steps) == 1536 * 2 + 1300 + 1400 + 600 + 1024 - 4720


def test_hit_tokens_when_the_trace_block_is_not_a_multiple_of_the_replay_block(backend):
    """Trace blocks of 100 tokens, replay blocks of 16: A and B agree on 2 of 3 ids, 200 tokens, so B hits
    the 12 whole replay blocks inside them, 192 tokens (block 12 holds tokens 192 … 207, 8 of them B's own);
    G copies 250 of A's tokens (``prefix_of``) and hits 240 of them; H agrees with G on A's ids over 250 tokens,
    and hits 240 as well."""
    tr = trace(
        ("A", 300, 1, 0, ids(100, 1, 2, 3)),
        ("B", 300, 1, 4, ids(100, 1, 2, 4)),
        ("G", 320, 1, 8, {"prefix_of": "A", "prefix_of_len": 250}),
        ("H", 250, 1, 12, ids(100, 1, 2, 3)),
    )
    r = run([full(16, 1)], 200, 512, tr, backend, max_num_seqs=2, prefix_caching=True)
    assert [q["prefix_hit_tokens"] for q in r.requests] == [0, 192, 240, 240]
    assert r.summary["prefix_hit_tokens"] == 672


def test_without_prefix_caching_the_ids_change_nothing(backend):
    tr = trace(("A", 1536, 2, 0, ids(512, 10, 11, 12)), ("B", 1536, 2, 1, ids(512, 10, 11, 99)))
    plain = trace(("A", 1536, 2, 0), ("B", 1536, 2, 1))
    a = run([full(16, 1)], 400, 2048, tr, backend)
    b = run([full(16, 1)], 400, 2048, plain, backend)
    assert a.steps == b.steps and a.summary == b.summary
    assert a.summary["prefix_hit_tokens"] == 0


def test_evicted_blocks_are_not_hit(backend):
    """A pool of 100 blocks of 16 tokens: A (96 blocks) finishes and its blocks stay cached, freed last block
    first (vLLM frees a request's blocks in reverse, so its tail is evicted first); X (64 blocks of content
    of its own) takes the 4 never-used blocks and A's last 60, blocks 36 … 95.  B agrees with A on its first
    two 512-token ids (64 blocks) but finds only A's first 36 blocks: 576 tokens hit."""
    tr = trace(
        ("A", 1536, 1, 0, ids(512, 10, 11, 12)),
        ("X", 1024, 1, 3, ids(512, 50, 51)),
        ("B", 1100, 1, 6, ids(512, 10, 11, 13)),
    )
    r = run([full(16, 1)], 100, 2048, tr, backend, max_num_seqs=1, prefix_caching=True)
    assert r.error is None
    assert [q["prefix_hit_tokens"] for q in r.requests] == [0, 0, 576]


def test_origins_are_one_breakpoint_per_block_with_keys_per_distinct_chain():
    """Keys follow the chain of ids (a block id after different blocks is different content to a hash chain);
    the number of keys is the number of distinct chains, however many requests repeat them."""
    lines = [
        json.dumps({"request_id": f"r{i}", "arrival_step": 0, "prompt_len": 1100, "output_len": 1,
                    **ids(512, 7, 8, i % 2)})
        for i in range(1000)
    ]  # fmt: skip
    lines.append(json.dumps({"request_id": "s", "arrival_step": 0, "prompt_len": 40, "output_len": 1,
                             "shared_prefix_id": "sys", "shared_prefix_len": 32}))  # fmt: skip
    lines.append(json.dumps({"request_id": "t", "arrival_step": 0, "prompt_len": 1000, "output_len": 1,
                             **ids(512, 8, 7)}))  # fmt: skip
    tr = parse_trace_lines(lines)
    origin, own = origins(tr)
    # one shared prefix (key 0), 1,002 own keys (1 … 1002), chain keys from 1003
    assert own[0] == 1 and own[-1] == 1002
    assert origin[0] == ((512, 1003), (1024, 1004), (1100, 1005))
    assert origin[1] == ((512, 1003), (1024, 1004), (1100, 1006))
    assert origin[999] == origin[1]
    assert origin[1000] == ((32, 0),)
    assert origin[1001] == ((512, 1007), (1000, 1008))
    assert len({k for o in origin for _, k in o}) == 7


def test_prefix_of_a_request_with_ids_copies_its_breakpoints():
    tr = trace(("A", 1100, 1, 0, ids(512, 1, 2, 3)), ("B", 2000, 1, 0, {"prefix_of": "A", "prefix_of_len": 700}))
    origin, own = origins(tr)
    assert origin[1] == ((512, 2), (700, 3))


def test_the_fields_are_kept_through_jsonl_and_sched_json():
    line = {"request_id": "a", "arrival_step": 3, "prompt_len": 1025, "output_len": 2, **ids(512, 0, 2**63 - 1, 5)}
    t = parse_trace(json.dumps(line))
    r = t.requests[0]
    assert (r.hash_ids, r.hash_block_tokens) == ((0, 2**63 - 1, 5), 512)
    assert json.loads(t.dumps()) == line
    assert parse_trace(t.dumps()) == t
    back = to_sched_json(t)
    assert back["requests"]["a"]["hash_ids"] == [0, 2**63 - 1, 5]
    assert from_sched_json(back) == t
    assert [hash_id_count(p, 512) for p in (1, 511, 512, 513, 1024, 1025)] == [1, 1, 1, 2, 2, 3]


@st.composite
def hash_requests(draw):
    block = draw(st.sampled_from([1, 3, 8, 16]))
    reqs, earlier = [], []
    for i in range(draw(st.integers(2, 6))):
        p = draw(st.integers(1, 60))
        need = hash_id_count(p, block)
        chain = []
        if earlier and draw(st.booleans()):
            src = draw(st.sampled_from(earlier))
            chain = src[: draw(st.integers(0, min(len(src), need)))]
        chain += draw(st.lists(st.integers(0, 2), min_size=need - len(chain), max_size=need - len(chain)))
        earlier.append(chain)
        reqs.append((f"r{i}", p, 1, 0, ids(block, *chain)))
    return trace(*reqs)


@settings(max_examples=200, deadline=None)
@given(hash_requests())
def test_token_ids_agree_exactly_where_the_origin_keys_do(tr):
    """The token ids ``fpm verify`` serves for a trace of ids (:func:`fpmcore.verify.traces.prompts`) hold the
    same first ``q`` tokens in two prompts exactly when the replay gives tokens ``[0, q)`` one origin key."""
    tokens = prompts(tr.requests, 50_000, [0], seed=7)
    origin, own = origins(tr)

    def key(i: int, q: int) -> int:
        return next((k for upto, k in origin[i] if q <= upto), own[i])

    reqs = tr.requests
    for i in range(len(reqs)):
        assert len(tokens[reqs[i].request_id]) == reqs[i].prompt_len
        for j in range(i):
            a, b = tokens[reqs[i].request_id], tokens[reqs[j].request_id]
            for q in range(1, min(len(a), len(b)) + 1):
                assert (a[:q] == b[:q]) == (key(i, q) == key(j, q)), (i, j, q)


def test_the_oracle_generator_draws_traces_of_ids():
    """``tools/replay_vs_vllm.py --hash-traces N``: traces the replay reads, sharing leading blocks."""
    build_jobs = replay_vs_vllm().build_jobs
    jobs = build_jobs(0, 5, hash_traces=24)
    assert len(jobs) == 24 and all(j["caching"] and j["hash_ids"] for j in jobs)
    assert [j["kind"] for j in jobs[:4]] == ["plain", "window", "gdn", "glm"]
    shared = 0
    for job in jobs:
        tr = from_sched_json(job["trace"])
        seen: set[tuple[int, int]] = set()
        for r in tr.requests:
            if r.hash_ids is not None:
                shared += (r.hash_block_tokens, r.hash_ids[0]) in seen
                seen.add((r.hash_block_tokens, r.hash_ids[0]))
    assert shared > 24
    # the first jobs of a seed do not change when traces of ids are added
    assert build_jobs(3, 5) == build_jobs(3, 5, hash_traces=2)[:3]


def test_keys_are_as_many_as_the_distinct_chains_not_the_blocks():
    """2,000 requests of 1 … 64 ids, all 0 but the last, which is 0, 1 or 2 (about 65,000 blocks): 192 keys,
    the chains of n zeros and of n − 1 zeros then 1 or 2, for n = 1 … 64."""
    rng = random.Random(0)
    lines = []
    for i in range(2000):
        n = rng.randint(1, 64)
        lines.append(json.dumps({"request_id": f"r{i}", "arrival_step": 0, "prompt_len": 16 * n, "output_len": 1,
                                 **ids(16, *[0] * (n - 1), rng.randrange(3))}))  # fmt: skip
    origin, own = origins(parse_trace_lines(lines))
    assert sum(len(o) for o in origin) > 60_000
    assert len({k for o in origin for _, k in o}) == 64 * 3


def test_origin_pairs_out_of_order_are_read_as_the_reference_reads_them():
    """The C engine finds a block's origin by bisection when every request's pairs are in order of
    ``upto`` (the trace readers' breakpoints) and by the reference's scan otherwise: the first pair
    with ``q <= upto`` either way, so both orders replay as the reference does."""
    from fpmcore.replay.cengine import run_c
    from fpmcore.replay.model import ARRIVE_STEP, KIND_FULL, GroupSpec, ReplayRequest
    from fpmcore.replay.reference import run_reference

    cfg = make_config([GroupSpec("full", KIND_FULL, 4, 64)], 40 * 64, prefix_caching=True, max_num_seqs=4,
                      max_num_batched_tokens=16, max_model_len=256, fixed_step_seconds=1.0)  # fmt: skip
    in_order = ((8, 100), (16, 101), (30, 102))
    shuffled = ((16, 101), (8, 100), (30, 102), (4, 103))  # (8, 100) and (4, 103) are never the first match
    for second in (in_order, shuffled):
        reqs = (
            ReplayRequest("a", 30, 3, 0, 0.0, in_order, 0),
            ReplayRequest("b", 30, 3, 4, 0.0, second, 1),
            ReplayRequest("c", 20, 2, 8, 0.0, second[:2], 2),
        )
        c, ref = run_c(cfg, reqs, ARRIVE_STEP), run_reference(cfg, reqs, ARRIVE_STEP)
        assert (tuple(c.steps), c.requests, c.error, c.totals) == (
            tuple(ref.steps),
            ref.requests,
            ref.error,
            ref.totals,
        )
        assert sum(r.prefix_hit_tokens for r in c.requests) > 0
