"""Acceptance vectors of 06 §10.1, §10.3–§10.5 (RV-1 … RV-15) on both backends."""

from __future__ import annotations

import pytest
from helpers import DATA, col, conv, full, mamba, run, sched, state, trace, window

from fpmcore.documents.profile import load_profile
from fpmcore.replay import config_from_profile, run_replay
from fpmcore.replay.model import KIND_RING, GroupSpec


def test_rv1_window_long_context_bounded_storage(backend):
    """RV-1 (R-4 window range, R-23 sampling boundary)."""
    r = run([window(4, 8, 4)], 24, 8, trace(("A", 32, 5)), backend)
    assert [s["scheduled"] for s in r.steps] == [
        [["A", 8, 0]],
        [["A", 8, 8]],
        [["A", 8, 16]],
        [["A", 8, 24]],
        [["A", 1, 32]],
        [["A", 1, 33]],
        [["A", 1, 34]],
        [["A", 1, 35]],
    ]
    assert col(r, "used_bytes_scheduled") == [16, 24, 24, 24, 16, 16, 16, 8]
    assert col(r, "sum_prefill_kv_tokens")[:4] == [0, 8, 16, 24]
    assert col(r, "num_decode_requests") == [0, 0, 0, 0, 1, 1, 1, 1]
    assert col(r, "sum_decode_kv_tokens")[4:] == [32, 33, 34, 35]
    assert r.steps[-1]["used_bytes_end"] == 0
    assert r.requests[0]["output_tokens"] == 5
    assert r.summary["preemptions_total"] == 0


def test_rv2_full_window_convolution_pages(backend):
    """RV-2: used after steps 0…4 is 16, 30, 38, 46, 52; releasing leaves 0."""
    groups = [full(4, 8), window(4, 4, 4), conv(2, 2, 2)]
    r = run(groups, 100, 4, trace(("A", 16, 5)), backend)
    assert col(r, "used_bytes_scheduled")[:5] == [16, 30, 38, 46, 52]
    assert [s["scheduled"][0][2] for s in r.steps[:5]] == [0, 4, 8, 12, 16]
    assert r.steps[-1]["used_bytes_end"] == 0


def test_rv3_contention_preempts_and_retries(backend):
    """RV-3 (R-15: the last running request preempts itself; recompute on resume)."""
    r = run([full(4, 4), window(4, 4, 4)], 24, 8, trace(("A", 4, 6), ("B", 4, 6)), backend)
    assert sched(r) == [["A4", "B4"], ["A1"], ["A1"], ["A1"], ["A1"], ["A1"], ["B5"], ["B1"], ["B1"], ["B1"], ["B1"]]
    assert col(r, "used_bytes_scheduled") == [16, 16, 16, 16, 12, 20, 16, 16, 16, 12, 20]
    assert col(r, "preempted") == [[], ["B"], [], [], [], [], [], [], [], [], []]
    assert col(r, "finished") == [[], [], [], [], [], ["A"], [], [], [], [], ["B"]]
    assert max(col(r, "used_bytes_scheduled")) <= 24
    assert r.steps[-1]["used_bytes_end"] == 0
    assert [q["preemptions"] for q in r.requests] == [0, 1]


def test_rv4_waiting_request_cannot_preempt(backend):
    """RV-4 (R-16)."""
    r = run([window(4, 4, 4)], 12, 8, trace(("A", 8, 2), ("B", 8, 2)), backend)
    assert sched(r) == [["A8"], ["A1"], ["B8"], ["B1"]]
    assert col(r, "used_bytes_end")[1] == 0
    assert col(r, "admitted") == [["A"], [], ["B"], []]
    assert r.summary["preemptions_total"] == 0


def test_rv5_oversized_chunk_stops(backend):
    """RV-5 (R-9): the exact diagnostic, state unchanged."""
    r = run([window(4, 4, 4)], 8, 8, trace(("A", 16, 2)), backend)
    assert r.error is not None and r.error.rule == "R-9"
    assert r.error.message == (
        "grouped kv forward needs 12 bytes for 8 scheduled tokens after 8 computed tokens, exceeding the "
        "entire 8-byte cache pool; reduce max_num_batched_tokens or increase cache memory"
    )
    assert len(r.steps) == 1 and r.steps[0]["used_bytes_end"] == 8
    assert r.summary["preemptions_total"] == 0


def test_rv5_fixed_state_bytes_named(backend):
    """R-9 with fixed state bytes: the suffix names them."""
    r = run([window(4, 4, 4), state(1, 4)], 12, 8, trace(("A", 16, 2)), backend)
    assert r.error is not None
    assert (
        "exceeding the entire 12-byte cache pool (including 4 fixed state bytes per request); reduce" in r.error.message
    )


def test_rv9_state_group_prefill_and_decode(backend):
    r = run([full(4, 8), state(1, 16)], 100, 8, trace(("A", 12, 3)), backend)
    assert sched(r) == [["A8"], ["A4"], ["A1"], ["A1"]]
    assert col(r, "used_bytes_scheduled") == [32, 40, 48, 48]
    assert r.steps[-1]["used_bytes_end"] == 0


def test_rv10_window_pages_expire_next_to_state_group(backend):
    r = run([window(4, 8, 4), state(2, 64)], 256, 8, trace(("A", 20, 4)), backend)
    assert sched(r) == [["A8"], ["A8"], ["A4"], ["A1"], ["A1"], ["A1"]]
    assert col(r, "used_bytes_scheduled") == [144, 152, 144, 144, 144, 144]
    assert r.steps[-1]["used_bytes_end"] == 0


@pytest.mark.parametrize("gate", [False, True])
def test_rv11_preemption_and_resume_with_state_group(backend, gate):
    """RV-11, verified against vLLM 0.33.0 (block mode)."""
    r = run(
        [full(4, 4), state(1, 4)],
        28,
        8,
        trace(("A", 8, 6), ("B", 8, 6)),
        backend,
        max_model_len=24,
        reserve_full_isl=gate,
    )
    if not gate:
        assert sched(r) == [
            ["A8"],
            ["A1", "B7"],
            ["A1", "B1"],
            ["A1"],
            ["A1", "B7"],
            ["A1"],
            ["B8"],
            ["B1"],
            ["B1"],
            ["B1"],
            ["B1"],
            ["B1"],
        ]
        assert col(r, "preempted") == [[], [], [], ["B"], [], ["B"], [], [], [], [], [], []]
        assert col(r, "used_blocks_end") == [3, 7, 7, 4, 7, 0, 3, 4, 4, 4, 4, 0]
        assert r.summary["preemptions_total"] == 2
    else:
        assert sched(r) == [
            ["A8"],
            ["A1", "B7"],
            ["A1", "B1"],
            ["A1"],
            ["A1"],
            ["A1"],
            ["B8"],
            ["B1"],
            ["B1"],
            ["B1"],
            ["B1"],
            ["B1"],
        ]
        assert col(r, "used_blocks_end") == [3, 7, 7, 4, 4, 0, 3, 4, 4, 4, 4, 0]
        assert r.summary["preemptions_total"] == 1
    assert col(r, "finished")[5] == ["A"] and col(r, "finished")[11] == ["B"]
    assert col(r, "free_blocks") == [7 - u for u in col(r, "used_blocks_end")]


@pytest.mark.parametrize("gate", [False, True])
def test_rv12_state_block_does_not_fit(backend, gate):
    r = run([window(4, 4, 4), state(1, 4)], 20, 8, trace(("A", 8, 3), ("B", 8, 2)), backend, reserve_full_isl=gate)
    assert sched(r) == [["A8"], ["A1"], ["A1"], ["B8"], ["B1"]]
    assert col(r, "used_bytes_scheduled") == [12, 12, 12, 12, 12]
    assert col(r, "used_bytes_end") == [12, 12, 0, 12, 0]


def _glm(pc: bool):
    return config_from_profile(load_profile(DATA / "glm53flash-tp4.fpm-profile.json"), prefix_caching=pc)


def test_rv8_glm_sizing():
    for pc, peak, mfc, conc in ((False, 6_582_681_600, 28, 13_697 / 487), (True, 6_690_816_000, 27, 13_697 / 495)):
        cfg = _glm(pc)
        r = run_replay(cfg, trace(("A", 10, 1)), backend="python")
        s = r.summary
        assert s["usable_blocks"] == 13_696
        assert s["capacity_bytes"] == 185_126_092_800
        assert s["peak_request_bytes_at_max_model_len"] == 6_582_681_600
        assert (s["align_peak_request_bytes_at_max_model_len"] or s["peak_request_bytes_at_max_model_len"]) == peak
        assert s["max_full_context_requests"] == mfc
        assert s["kv_cache_max_concurrency"] == conc
    assert _glm(True).fixed_request_bytes == 67_584_000
    assert _glm(True).usable_blocks == 13_696


def test_rv13_glm_prefix_caching_off(backend):
    r = run_replay(_glm(False), trace(("A", 10_000, 3)), backend=backend)
    assert [[n for _i, n, _c in s["scheduled"]] for s in r.steps] == [[8192], [1808], [1], [1]]
    assert col(r, "used_blocks_scheduled") == [9, 10, 10, 10]
    assert col(r, "used_bytes_scheduled")[:2] == [121_651_200, 135_168_000]
    assert r.steps[-1]["used_blocks_end"] == 0
    assert r.steps[0]["held_blocks_end"] == {"A": [1, 1, 1, 1, 4, 1]}


def test_rv14_glm_prefix_caching_on_align(backend):
    r = run_replay(_glm(True), trace(("A", 10_000, 3)), backend=backend)
    assert [[n for _i, n, _c in s["scheduled"]] for s in r.steps] == [[6528], [3472], [1], [1]]
    assert col(r, "used_blocks_scheduled") == [8, 18, 10, 10]
    assert col(r, "used_bytes_scheduled") == [108_134_400, 243_302_400, 135_168_000, 135_168_000]
    assert r.steps[0]["held_blocks_end"] == {"A": [1, 1, 1, 1, 3, 1]}
    assert r.steps[1]["held_blocks_end"] == {"A": [3, 3, 3, 3, 5, 1]}
    assert r.steps[-1]["used_blocks_end"] == 0


def test_rv15_tiny_hybrid(backend):
    """RV-15, verified against vLLM 0.33.0."""
    groups = [full(16, 512, "attn"), mamba(16, 512, 1, 4)]
    r = run(
        groups,
        15 * 512,
        64,
        trace(("A", 40, 12)),
        backend,
        max_num_seqs=4,
        max_model_len=64,
        prefix_caching=True,
        reserve_full_isl=True,
    )
    assert sched(r) == [["A40"]] + [["A1"]] * 11
    held = [s["held_blocks_end"].get("A") for s in r.steps]
    assert held == [[3, 2]] + [[3, 1]] * 8 + [[4, 2], [4, 1], None]
    assert col(r, "free_blocks") == [10] + [11] * 8 + [9, 10, 15]
    assert r.steps[-1]["finished"] == ["A"]


def _glm_like_tp1():
    page = 52_322_688
    groups = [mamba(4608, page, 1, 16, f"runtime_group_{i}") for i in range(4)]
    groups += [
        full(4608, page, "runtime_group_4"),
        GroupSpec("runtime_group_5", KIND_RING, 16, page, blocks_per_request=1),
    ]
    return groups, 1145 * page


def test_rv16_shared_prefix_with_mamba_checkpoint_hit(backend):
    """RV-16 (R-36, R-37): A's checkpoint at 9,216 stays cached; B hits it at step 4."""
    groups, cap = _glm_like_tp1()
    x = {"shared_prefix_id": "X", "shared_prefix_len": 9300}
    tr = trace(("A", 10_000, 4, 0, x), ("C", 3000, 3, 0), ("B", 12_000, 3, 4, x))
    r = run(
        groups,
        cap,
        8192,
        tr,
        backend,
        max_num_seqs=256,
        max_model_len=131_072,
        prefix_caching=True,
        reserve_full_isl=True,
    )
    assert sched(r) == [["A4608", "C3000"], ["A5392", "C1"], ["A1", "C1"], ["A1"], ["A1", "B2784"], ["B1"], ["B1"]]
    assert col(r, "used_blocks_end") == [12, 22, 8, 8, 12, 8, 0]
    assert r.steps[1]["held_blocks_end"]["A"] == [3, 3, 3, 3, 3, 1]
    assert r.steps[4]["held_blocks_end"] == {"B": [2, 2, 2, 2, 3, 1]}
    assert [q["prefix_hit_tokens"] for q in r.requests] == [0, 0, 9216]
    assert col(r, "finished")[2] == ["C"] and col(r, "finished")[4] == ["A"]


def test_rv17a_attention_blocks_hit_in_the_same_step(backend):
    tr = trace(("A", 300, 2), ("B", 300, 2, 0, {"prefix_of": "A", "prefix_of_len": 256}))
    r = run(
        [full(16, 1)],
        99,
        1024,
        tr,
        backend,
        max_num_seqs=256,
        max_model_len=1024,
        prefix_caching=True,
        reserve_full_isl=True,
    )
    assert sched(r) == [["A300", "B44"], ["A1", "B1"]]
    assert r.steps[0]["held_blocks_end"] == {"A": [19], "B": [19]}
    assert col(r, "free_blocks") == [77, 99]
    assert r.requests[1]["prefix_hit_tokens"] == 256


def test_rv17b_mamba_state_cached_this_step_is_not_hit(backend):
    tr = trace(("A", 40, 3), ("B", 40, 3, 0, {"prefix_of": "A", "prefix_of_len": 36}))
    r = run(
        [full(16, 512, "attn"), mamba(16, 512, 1, 4)],
        15 * 512,
        64,
        tr,
        backend,
        max_num_seqs=4,
        max_model_len=64,
        prefix_caching=True,
        reserve_full_isl=True,
    )
    assert sched(r) == [["A40"], ["A1", "B8"], ["A1", "B1"], ["B1"]]
    assert col(r, "held_blocks_end") == [{"A": [3, 2]}, {"A": [3, 1], "B": [3, 2]}, {"B": [3, 1]}, {}]
    assert col(r, "free_blocks") == [10, 8, 11, 15]
    assert r.requests[1]["prefix_hit_tokens"] == 32


def test_rv18_free_queue_order(backend):
    """RV-18 (R-38): partly filled blocks go to the front, cached ones to the back; E hits A's 32 tokens."""
    tr = trace(("A", 32, 1), ("C", 40, 1), ("D", 32, 1, 1), ("E", 48, 1, 2, {"prefix_of": "A", "prefix_of_len": 32}))
    r = run(
        [full(16, 1)], 6, 128, tr, backend, max_num_seqs=4, max_model_len=96, prefix_caching=True, reserve_full_isl=True
    )
    assert sched(r) == [["A32", "C40"], ["D32"], ["E16"]]
    assert col(r, "free_blocks") == [6, 6, 6]
    assert r.requests[3]["prefix_hit_tokens"] == 32


def test_rv18_queue_after_each_step():
    """RV-18 block by block: queue 5, 6, 2, 1, 4, 3 after step 0 and 2, 1, 4, 3, 6, 5 after step 1."""
    from fpmcore.replay.engine import engine_requests
    from fpmcore.replay.model import ARRIVE_STEP
    from fpmcore.replay.reference import ReferenceEngine

    tr = trace(("A", 32, 1), ("C", 40, 1), ("D", 32, 1, 1))
    from fpmcore.replay import make_config

    cfg = make_config(
        [full(16, 1)], 6, max_num_batched_tokens=128, max_num_seqs=4, max_model_len=96, prefix_caching=True
    )
    reqs, mode = engine_requests(cfg, tr)
    assert mode == ARRIVE_STEP
    eng = ReferenceEngine(cfg, reqs[:2], mode)
    eng.run()
    assert eng.prefix.pool.queue() == [5, 6, 2, 1, 4, 3]
    eng = ReferenceEngine(cfg, reqs, mode)
    eng.run()
    assert eng.prefix.pool.queue() == [2, 1, 4, 3, 6, 5]


def test_rv7_sizing_python_and_c():
    """RV-7 (R-10, 01 P-14 … P-17): window(16, 160, 32), T = 128, plus a state group 2 × 64."""
    from fpmcore.replay import make_config
    from fpmcore.replay.records import block_range, occupancy_request_bytes, peak_request_blocks, peak_request_bytes

    w = window(16, 160, 32)
    cfg = make_config([w], 160 * 100, max_num_batched_tokens=128, max_num_seqs=1, max_model_len=4096)
    assert peak_request_bytes(cfg, 4096) == 1760
    assert occupancy_request_bytes(cfg, 4096) == 480
    assert block_range(w, 32, 33) == (0, 3) and block_range(w, 48, 49) == (1, 4)
    assert block_range(w, 512, 640) == (30, 40)
    fr = block_range(full(16, 160), 64, 65)
    assert (block_range(w, 64, 65)[1] - block_range(w, 64, 65)[0]) * 160 == 480 and (fr[1] - fr[0]) * 160 == 800
    cfg2 = make_config(
        [w, state(2, 64)], 160 * 100 + 64, max_num_batched_tokens=128, max_num_seqs=1, max_model_len=4096
    )
    assert peak_request_bytes(cfg2, 4096) == 1888
    assert occupancy_request_bytes(cfg2, 4096) == 608
    assert cfg2.fixed_request_bytes == 128
    try:
        from fpmcore.replay import _native  # noqa: F401
    except ImportError:  # pragma: no cover - installs without the C library
        return
    from fpmcore.replay.cengine import block_range_c, peak_request_blocks_c

    for c, t in ((32, 33), (48, 49), (64, 65), (512, 640), (0, 32)):
        assert block_range_c(w, c, t) == block_range(w, c, t)
    assert peak_request_blocks_c(w, 4096, 128) == peak_request_blocks(w, 4096, 128) == 11
    assert peak_request_blocks_c(w, 4096, 1) == 3


def test_r10_window_concurrency_uses_vllm_count():
    """R-10: W 4,096, B 16, T = L = 8,192: vLLM counts 513 blocks where P-16 gives 512."""
    from fpmcore.replay import make_config
    from fpmcore.replay.records import peak_request_blocks, sizing

    w = window(16, 1, 4096)
    cfg = make_config([w], 1025, max_num_batched_tokens=8192, max_num_seqs=1, max_model_len=8192)
    assert peak_request_blocks(w, 8192, 8192) == 512
    s = sizing(cfg)
    assert s["kv_cache_max_concurrency"] == 1026 / 513
    assert s["max_full_context_requests"] == 1025 // 512
