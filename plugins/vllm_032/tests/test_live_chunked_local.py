"""The chunked-local family on the live vLLM 0.32.0 CPU engine (marked live: ``tox -e vllm032-live``).

``fpm tiny-model llama4`` (Llama 4 text: three chunked-local layers with
a chunk of 256 tokens, two CPU blocks, and one global layer, float32) runs
with prefix caching on and off (README §9).  For each setting, as for the
Mamba2 hybrids (``test_live_hybrid.py``):

* ``fpm probe --live`` → ``fpm import``: a ``complete`` tensor-level profile
  whose three chunked-local groups are attention groups with
  ``attention_chunk_size`` 256 beside the full-attention group, every group
  of 128-token blocks;
* ``fpm onboard --smoke``: the plan records the groups' blocks and the
  scheduler block (all 128), the collection's engine shows the same, the run
  is accepted and published;
* ``fpm replay`` of the campaign's profile with its published table: a step
  whose coordinates are a table row takes that row's measured time, and a
  request past its first chunk holds in each chunked-local group only the
  blocks of its current chunk while the full group holds them all;
* the imported profile replayed step by step against an engine started with
  the probe's options (:data:`TRACES` random traces with shared prefixes),
  every step identical.

``test_live_replay.py`` checks the same family under memory pressure on 50
traces per caching setting.  One engine at a time, one OpenMP thread.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fpmcore.documents.jsonio import load_path
from fpmcore.testing import make_host, run_fpm

pytestmark = pytest.mark.live

OPTIONS = ["--dtype", "float32", "--max-model-len", "2048", "--kv-cache-space", "0.25"]
#: The chunk of the tiny model's chunked-local layers (fpmcore_vllm032.tiny_models.ATTENTION_CHUNK) and the CPU block.
CHUNK, BLOCK = 256, 128
#: The profile's groups as (kind, block, chunk): the three chunked-local layers, one group each, then the global one.
GROUPS = [("attention", BLOCK, CHUNK)] * 3 + [("attention", BLOCK, None)]
#: Random traces replayed against the campaign's engine.
TRACES = 5


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.fixture(scope="module", params=["on", "off"], ids=lambda c: f"caching-{c}")
def probed(request: pytest.FixtureRequest, model_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """``fpm probe --live`` and ``fpm import`` of the tiny llama4 with prefix caching ``request.param``."""
    caching = request.param
    root = tmp_path_factory.mktemp(f"llama4-{caching}")
    model = model_dirs["llama4"]
    host = make_host(entry_points=("vllm_032",))
    probe = run_fpm("probe", "--live", str(model), "-o", str(root / "ev"), "--caching", caching, *OPTIONS, host=host)
    assert probe.exit_code == 0, probe.stderr[-3000:]
    imported = run_fpm("import", str(root / "ev"), "-o", str(root / "profile.json"), "--json", host=host)
    assert imported.exit_code == 0, imported.stdout[-3000:]
    return {"caching": caching, "model": model, "root": root, "import": imported.json()["results"][0]}


@pytest.fixture(scope="module")
def onboarded(probed: dict[str, Any]) -> dict[str, Any]:
    """``fpm onboard --smoke`` of the same model and options: the campaign folder."""
    camp = probed["root"] / "campaign"
    r = run_fpm("onboard", str(probed["model"]), "-o", str(camp), "--smoke", "--caching", probed["caching"], *OPTIONS,
                "--repetitions", "3", "--warmup", "1", host=make_host(entry_points=("vllm_032",)))  # fmt: skip
    assert r.exit_code == 0, r.stderr[-3000:]
    return {**probed, "camp": camp}


def _groups(resources: dict[str, Any]) -> list[tuple[str, int, int | None]]:
    return [(g["kind"], g["block_size_tokens"], g.get("attention_chunk_size")) for g in resources["cache_groups"]]


def test_the_import_is_complete_with_the_chunk_on_each_chunked_local_group(probed):
    result = probed["import"]
    assert (result["status"], result["evidence"], result["diagnostics"]) == ("complete", "tensor", [])
    assert {n["rule"] for n in result["notes"]} == {"I-20", "I-31", "I-35", "I-64", "I-32", "I-33", "I-47"}
    resources = load_path(probed["root"] / "profile.json")["deployments"][0]["resources"]
    assert _groups(resources) == GROUPS
    assert resources["runtime_memory"]["enable_prefix_caching"] is (probed["caching"] == "on")
    assert resources["runtime_memory"]["hash_block_size_tokens"] == BLOCK


def test_the_imported_profile_steps_like_the_engine(probed, live_report):
    """The imported profile, replayed with the engine's scheduler settings, against an engine started with the
    probe's options (the same blocks and pool): every step of :data:`TRACES` random traces identical."""
    from fpmcore.documents.profile import load_profile
    from fpmcore_vllm032.engine import EngineOptions, running_engine
    from fpmcore_vllm032.replay_check import check_trace, replay_config
    from fpmcore_vllm032.steps import random_trace

    caching = probed["caching"]
    profile = load_profile(probed["root"] / "profile.json")
    options = EngineOptions(model=str(probed["model"]), dtype="float32", max_model_len=2048,
                            kv_cache_bytes=1 << 28, caching=caching == "on", max_num_seqs=8)  # fmt: skip
    differences: list[str] = []
    totals = {"traces": 0, "steps": 0, "admissions_with_prefix_hit": 0, "prefix_hit_tokens": 0, "finished": 0}
    with running_engine(options) as engine:
        config = replay_config(profile, engine)
        for seed in range(TRACES):
            engine.llm.reset_prefix_cache()
            result = check_trace(engine, config, random_trace(seed, 8, 2048, prompt_max=900, output_max=32))
            if result["difference"] is not None:
                differences.append(f"trace {seed}: {result['difference']}")
            totals["traces"] += 1
            for k in ("steps", "admissions_with_prefix_hit", "prefix_hit_tokens", "finished"):
                totals[k] += result[k]
    live_report[f"llama4 at the probe's pool, caching {caching}"] = totals
    assert differences == []
    assert totals["finished"] == 8 * TRACES
    if caching == "on":
        assert totals["admissions_with_prefix_hit"] > 0


def test_onboard_smoke_plans_collects_and_publishes_with_the_engines_blocks(onboarded):
    camp = onboarded["camp"]
    plan = load_path(camp / "plan.json")
    assert (plan["limits"]["block_size"], plan["limits"]["hash_block_size"]) == (BLOCK, BLOCK)
    assert (plan["engine"]["cache_block_sizes"], plan["engine"]["scheduler_block_size"]) == ([BLOCK] * 4, BLOCK)
    # with prefix caching the smoke prefills also start after one cached hash block (point_grid.smoke_template)
    prefixes = [0, BLOCK, BLOCK] if onboarded["caching"] == "on" else [0]
    assert [(p["phase"], p["batch_size"], p.get("prefix_tokens")) for p in plan["smoke"]] == [
        *(("prefill", 1, prefix) for prefix in prefixes),
        ("decode", 1, None),
        ("decode", 2, None),
    ]
    # the campaign's profile is the probed one: the same groups and pool
    imported = load_path(onboarded["root"] / "profile.json")["deployments"][0]["resources"]
    resources = load_path(camp / "profile.json")["deployments"][0]["resources"]
    assert (resources["cache_groups"], resources["runtime_memory"]["kv_cache_bytes"]) == (
        imported["cache_groups"],
        imported["runtime_memory"]["kv_cache_bytes"],
    )
    assert load_path(camp / "validation.json")["status"] == "accepted"
    run = load_path(camp / "run" / "collect.json")
    assert run["serving_config"]["cache_block_sizes"] == [BLOCK] * 4
    assert (run["limits"]["block_size"], run["serving_config"]["hash_block_size"]) == (BLOCK, BLOCK)
    assert run["serving_config"]["enable_prefix_caching"] is (onboarded["caching"] == "on")
    table = load_path(camp / "table.json")
    assert len(table["rows"]) == len(plan["smoke"]) and table["source"]["plan_sha256"] == plan["plan_sha256"]


def test_the_replay_of_the_campaign_reads_its_table_and_releases_each_chunk(onboarded, tmp_path):
    camp = onboarded["camp"]
    table = load_path(camp / "table.json")
    prefill = next(r for r in table["rows"] if r["phase"] == "prefill" and r["total_kv_read_tokens"] == 0)
    prompt = 700  # past two chunks: its current chunk starts at 512
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        f'{{"request_id":"a","arrival_time":0,"prompt_len":{prefill["total_prefill_tokens"]},"output_len":1}}\n'
        f'{{"request_id":"b","arrival_time":1000,"prompt_len":{prompt},"output_len":3}}\n'
    )
    r = run_fpm("replay", str(camp / "profile.json"), "--trace", str(trace), "--fpm-table", str(camp / "table.json"),
                "--prefix-caching", onboarded["caching"], "--steps", "--json",
                host=make_host(entry_points=("vllm_032",)))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["summary"]["finished"], doc["summary"]["preemptions_total"]) == (2, 0)
    steps = doc["steps"]
    first = next(s for s in steps if s["scheduled"] == [["a", prefill["total_prefill_tokens"], 0]])
    assert (first["duration_s"], first["extrapolated"]) == (prefill["wall_time_seconds"], False)
    # b's prefill computes its 700 tokens in one step and holds every block; from the next step on (its first
    # decode, from 700 computed tokens) each chunked-local group holds only the blocks of the third chunk, which
    # starts at 512 (get_num_skipped_tokens: c // C * C), the full group all of them; its last decode finishes it
    held = [s["held_blocks_end"]["b"] for s in steps if "b" in (s["held_blocks_end"] or {})]
    whole = _cdiv(prompt, BLOCK)
    assert held == [[whole] * 4, [_cdiv(prompt - 2 * CHUNK, BLOCK)] * 3 + [whole]], held
