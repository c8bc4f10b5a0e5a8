"""fpm collect on the live vLLM 0.32.0 CPU engine (marked live: tox -e vllm032-live).

The tiny plain model (float32) is probed, imported and planned; the engine
driver of ``vllm_032`` then runs real repetitions — a cached prefill whose
prefix the seed put in the prefix cache, and a decode at a seeded context —
and a smoke collection that validates under the engine-steps contract and
publishes a table ``fpm replay`` reads.  One engine at a time, one OpenMP thread.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from fpmcore.collect.content import TokenSource
from fpmcore.collect.measure import Measurer, PlannedPoint, ProtocolSettings
from fpmcore.collect.run import engine_options
from fpmcore.jsonio import load_path
from fpmcore.testing import make_host, run_fpm

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("tiny_models", ROOT / "tools" / "tiny_models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tiny_models"] = module
    spec.loader.exec_module(module)
    return Path(module.write_model("llama", tmp_path_factory.mktemp("models") / "llama", seed=0)["dir"])


@pytest.fixture(scope="module")
def campaign(tiny, tmp_path_factory) -> Path:
    """fpm onboard --smoke of the tiny plain model: probe, import, plan, collect, validate, publish."""
    out = tmp_path_factory.mktemp("campaign") / "llama"
    r = run_fpm("onboard", str(tiny), "-o", str(out), "--smoke", "--max-model-len", "1024", "--dtype", "float32",
                "--kv-cache-space", "0.25", "--repetitions", "3", "--warmup", "1",
                host=make_host(entry_points=("vllm_032",)))
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
        m = Measurer(engine, TokenSource(7, engine.facts.vocab_size, engine.facts.excluded_token_ids),
                     ProtocolSettings(1, 3, 3, 7), H, engine.facts.prefix_caching)
        pre = m.measure(PlannedPoint(1, "prefill", 2, new_tokens=64, prefix_tokens=2 * H))
        dec = m.measure(PlannedPoint(2, "decode", 2, context_tokens=2 * H + 2))
    finally:
        engine.close()
    assert [r["role"] for r in pre["repetitions"]] == ["warmup", "measured", "measured", "measured"]
    for s in pre["raw"]:
        assert (s["scheduled"]["num_prefill_requests"], s["scheduled"]["sum_prefill_tokens"],
                s["scheduled"]["sum_prefill_kv_tokens"]) == (2, 128, 4 * H)
    assert [w["kind"] for w in pre["warmups"]][:1] == ["real_prefix_seed"]
    for s in dec["raw"]:
        assert (s["scheduled"]["num_decode_requests"], s["scheduled"]["sum_decode_kv_tokens"]) == (2, 2 * (2 * H + 2))
        assert s["wall_time"] > 0
