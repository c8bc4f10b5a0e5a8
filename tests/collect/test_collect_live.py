"""fpm collect on the live vLLM 0.32.0 CPU engine (marked live: tox -e vllm032-live).

The tiny plain model (float32) is probed, imported and planned; the engine
driver of ``vllm_032`` then runs real repetitions — a cached prefill whose
prefix the seed put in the prefix cache, and a decode at a seeded context —
and a smoke collection that validates under the engine-steps contract and
publishes a table ``fpm replay`` reads.  One engine at a time, one OpenMP thread.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fpmcore.campaign import onboard
from fpmcore.collect.content import TokenSource
from fpmcore.collect.measure import Measurer, PlannedPoint, ProtocolSettings
from fpmcore.collect.run import engine_options
from fpmcore.documents.jsonio import load_path
from fpmcore.testing import make_host, run_fpm

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from fpmcore_vllm032.tiny_models import write_model

    return Path(write_model("llama", tmp_path_factory.mktemp("models") / "llama", seed=0)["dir"])


@pytest.fixture(scope="module")
def campaign(tiny, tmp_path_factory) -> Path:
    """fpm onboard --smoke of the tiny plain model: probe, import, plan, collect, validate, publish."""
    out = tmp_path_factory.mktemp("campaign") / "llama"
    r = run_fpm(
        "onboard",
        str(tiny),
        "-o",
        str(out),
        "--smoke",
        "--max-model-len",
        "1024",
        "--dtype",
        "float32",
        "--kv-cache-space",
        "0.25",
        "--repetitions",
        "3",
        "--warmup",
        "1",
        host=make_host(entry_points=("vllm_032",)),
    )
    assert r.exit_code == 0, r.stderr
    return out


def test_the_producer_pins_the_installed_vllm_files():
    from fpmcore_vllm032 import measure

    assert measure.installed_differences() == []
    record = measure.producer()
    paths = [f.path for f in record.files]
    assert "vllm/v1/core/sched/scheduler.py" in paths and "fpmcore_vllm032/measure.py" in paths
    own = Path(measure.__file__).read_bytes()
    assert {f.path: f.sha256 for f in record.files}["fpmcore_vllm032/measure.py"] == hashlib.sha256(own).hexdigest()


def test_onboard_smoke_validates_and_publishes(campaign):
    plan = load_path(campaign / "plan.json")
    table = load_path(campaign / "table.json")
    assert load_path(campaign / "validation.json")["status"] == "accepted"
    assert len(table["rows"]) == len(plan["smoke"])
    assert table["source"]["runtime"] == "vllm==0.32.0"
    art = load_path(campaign / "run" / "r0.json")
    assert art["producer"]["name"] == "vllm_032_cpu_engine_steps"
    assert art["serving_config"]["enable_prefix_caching"] is True


def test_real_repetitions_hit_the_seeded_prefix(campaign, tiny):
    """On the real engine: a prefill of 64 tokens after a 2-block prefix hits exactly the seeded 256 tokens and
    runs in one forward; a decode at context 2 blocks + 2 runs prefill, lockstep decode, measured decode."""
    from fpmcore_vllm032.measure import start

    plan = load_path(campaign / "plan.json")
    engine = start(str(tiny), engine_options(plan))
    try:
        H = engine.facts.hash_block_size
        m = Measurer(
            engine,
            TokenSource(7, engine.facts.vocab_size, engine.facts.excluded_token_ids),
            ProtocolSettings(1, 3, 3, 7),
            H,
            engine.facts.prefix_caching,
        )
        pre = m.measure(PlannedPoint(1, "prefill", 2, new_tokens=64, prefix_tokens=2 * H))
        dec = m.measure(PlannedPoint(2, "decode", 2, context_tokens=2 * H + 2))
    finally:
        engine.close()
    # a repetition judged contended is retaken (the collection protocol), and is in the list too
    assert [r["role"] for r in pre["repetitions"] if r["role"] != "contended"] == ["warmup", "measured", "measured",
                                                                                   "measured"]  # fmt: skip
    for s in pre["raw"]:
        assert (
            s["scheduled"]["num_prefill_requests"],
            s["scheduled"]["sum_prefill_tokens"],
            s["scheduled"]["sum_prefill_kv_tokens"],
        ) == (2, 128, 4 * H)
    assert [w["kind"] for w in pre["warmups"]][:1] == ["real_prefix_seed"]
    for s in dec["raw"]:
        assert (s["scheduled"]["num_decode_requests"], s["scheduled"]["sum_decode_kv_tokens"]) == (2, 2 * (2 * H + 2))
        assert s["wall_time"] > 0


@pytest.fixture(scope="module")
def hybrid_campaign(tmp_path_factory) -> Path:
    """fpm onboard --smoke of the tiny hybrid (Gated DeltaNet + attention + MoE, bfloat16: the CPU GDN kernel's
    dtype), the deployment of the onboarding guide: 384-token hash blocks, a 768-token budget, eight running requests."""
    from fpmcore_vllm032.tiny_models import write_model

    root = tmp_path_factory.mktemp("hybrid")
    model = Path(write_model("qwen3-next", root / "tiny-hybrid", seed=0)["dir"])
    out = root / "campaign"
    r = run_fpm("onboard", str(model), "-o", str(out), "--smoke", "--dtype", "bfloat16", "--max-model-len", "1024",
                "--max-num-seqs", "8", "--max-num-batched-tokens", "768", "--kv-cache-space", "0.25",
                "--repetitions", "3", "--warmup", "1", host=make_host(entry_points=("vllm_032",)))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    return out


def test_onboard_smoke_of_the_hybrid_publishes_a_table_the_replay_reads(hybrid_campaign, tmp_path):
    """The tiny hybrid end to end (issue 11 acceptance): every stage finished, the run validated, the table records
    its plan and profile, and ``fpm replay --fpm-table`` times a step whose coordinates are a table row with that
    row's measured wall time (R-29, R-30: a knot is read exactly), prefill and decode alike."""
    c = hybrid_campaign
    manifest = load_path(c / "onboard.json")
    assert [(s["name"], s["status"]) for s in manifest["stages"]] == [(name, "done") for name in onboard.STAGES]
    ready = load_path(c / "readiness.json")
    assert ready["ready_for_full_collection"] is True and ready["blockers"] == []
    plan = load_path(c / "plan.json")
    table = load_path(c / "table.json")
    assert load_path(c / "validation.json")["status"] == "accepted"
    assert load_path(c / "run" / "r0.json")["serving_config"]["mamba_cache_mode"] == "align"
    assert table["source"]["plan_sha256"] == plan["plan_sha256"]
    assert table["source"]["profile_sha256"] == plan["profile"]["profile_sha256"]
    assert len(table["rows"]) == len(plan["smoke"])
    first_prefill = next(r for r in table["rows"] if r["phase"] == "prefill" and r["total_kv_read_tokens"] == 0)
    one_decode = next(r for r in table["rows"] if r["phase"] == "decode" and r["batch_size"] == 1)
    assert first_prefill["batch_size"] == 1
    ctx = one_decode["total_kv_read_tokens"]  # the tokens a decode at context ctx has computed before it
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        f'{{"request_id":"a","arrival_time":0,"prompt_len":{first_prefill["total_prefill_tokens"]},"output_len":1}}\n'
        f'{{"request_id":"b","arrival_time":1000,"prompt_len":{ctx - 1},"output_len":3}}\n'
    )
    r = run_fpm("replay", str(c / "profile.json"), "--trace", str(trace), "--fpm-table", str(c / "table.json"),
                "--prefix-caching", "on", "--steps", "--json", host=make_host(entry_points=("vllm_032",)))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["summary"]["finished"] == 2
    steps = doc["steps"]
    prefill_a = next(s for s in steps if s["scheduled"] == [["a", first_prefill["total_prefill_tokens"], 0]])
    assert (prefill_a["duration_s"], prefill_a["extrapolated"]) == (first_prefill["wall_time_seconds"], False)
    decode_b = next(s for s in steps if s["scheduled"] == [["b", 1, ctx]])  # the second decode of b
    assert (decode_b["num_decode_requests"], decode_b["sum_decode_kv_tokens"]) == (1, ctx)
    assert (decode_b["duration_s"], decode_b["extrapolated"]) == (one_decode["wall_time_seconds"], False)
    req_a = next(q for q in doc["requests"] if q["request_id"] == "a")
    assert req_a["ttft_s"] == first_prefill["wall_time_seconds"]
