"""A hybrid whose cache groups have different blocks: the plan, the collection and the engine agree on them.

The profile is the live probe of ``examples/probes/live/tiny-granite-hybrid``
(``fpm tiny-model granite-hybrid``: three Mamba2 layers and one
attention layer, float32, prefix caching off, ``--max-model-len 2048``) on
the vLLM 0.32.0 CPU engine, imported without an engine.  Its engine reported
(``engine-report.json``): three ``MambaSpec`` groups of 2,048-token blocks
(``max_model_len``), one ``FullAttentionSpec`` group of 128-token blocks, a
scheduler block of 2,048 (the lcm) and a hash block of 2,048 (nothing is
hashed without prefix caching, so vLLM keeps it at the scheduler block).
Before the plan recorded the groups' blocks, a collection on that engine was
refused with ``block_size 2048, plan 128``: the plan's block is the block a
request grows by (128), the engine's the scheduler's (2,048).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fpmcore.collect import run as collect_run
from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import load_path
from fpmcore.host.engine_drivers import EngineFacts
from fpmcore.testing import make_host, run_fpm
from tests.collect.standin import StandinConfig, StandinRuntime, fake_model_dir

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "examples" / "probes" / "live" / "tiny-granite-hybrid"
#: What the engine reported (engine-report.json of the prefill phase).
GROUPS = (2048, 2048, 2048, 128)
SCHEDULER_BLOCK = HASH_BLOCK = 2048


def _engine_report() -> dict[str, Any]:
    (report,) = PROBE.glob("*/prefill/engine-report.json")
    return json.loads(report.read_text())["engine"]


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("granite")
    host = make_host(entry_points=("vllm_032",))
    result = run_fpm("import", str(PROBE), "-o", str(tmp / "profile.json"), host=host)
    assert result.exit_code == 0, result.stderr
    result = run_fpm("plan", str(tmp / "profile.json"), "-o", str(tmp / "plan.json"), "--smoke", host=make_host())
    assert result.exit_code == 0, result.stderr
    return load_path(tmp / "plan.json")  # type: ignore[no-any-return]


def _facts(**changes: Any) -> EngineFacts:
    e = _engine_report()
    values: dict[str, Any] = dict(
        runtime="vllm==0.32.0", vocab_size=512, excluded_token_ids=(509, 510, 511), block_size=e["block_size"],
        hash_block_size=e["hash_block_size"], max_num_batched_tokens=e["scheduler_config"]["max_num_batched_tokens"],
        max_num_seqs=e["scheduler_config"]["max_num_seqs"], max_model_len=e["max_model_len"],
        prefix_caching=e["cache_config"]["enable_prefix_caching"],
        kv_cache_bytes=(e["num_blocks"] - 1) * e["groups"][0]["page_size_bytes"],
        cache_block_sizes=tuple(g["block_size"] for g in e["groups"]),
    )  # fmt: skip
    values.update(changes)
    return EngineFacts(**values)


def test_the_engine_reported_groups_of_different_blocks():
    e = _engine_report()
    assert [(g["class"], g["block_size"]) for g in e["groups"]] == [
        ("MambaSpec", 2048), ("MambaSpec", 2048), ("MambaSpec", 2048), ("FullAttentionSpec", 128)]  # fmt: skip
    assert (e["block_size"], e["hash_block_size"]) == (SCHEDULER_BLOCK, HASH_BLOCK)
    assert e["cache_config"]["mamba_cache_mode"] == "none"


def test_the_plan_names_each_block_for_what_it_is(plan):
    assert plan["limits"]["block_size"] == 128  # the block a request grows by: the chunk sizes of the grid
    assert plan["limits"]["hash_block_size"] == HASH_BLOCK  # I-97, as the engine resolves it
    assert plan["engine"]["cache_block_sizes"] == list(GROUPS)
    assert plan["engine"]["scheduler_block_size"] == SCHEDULER_BLOCK  # I-96: lcm(2048, 2048, 2048, 128)
    assert plan["engine"]["prefix_caching"] is False


def test_the_engine_of_the_probe_runs_the_planned_deployment(plan):
    assert collect_run.deployment_differences(_facts(), plan) == []


def test_each_block_is_checked(plan):
    assert collect_run.deployment_differences(_facts(cache_block_sizes=(2048, 2048, 2048, 256)), plan) == [
        "cache group block sizes [2048, 2048, 2048, 256], plan [2048, 2048, 2048, 128]"
    ]
    assert collect_run.deployment_differences(_facts(block_size=128, hash_block_size=128), plan) == [
        "scheduler block_size 128, plan 2048", "hash_block_size 128, plan 2048"]  # fmt: skip


def test_a_plan_without_the_groups_compares_the_scheduler_block_with_its_block(plan):
    """A plan written before the groups were recorded: what the issue saw (``block_size 2048, plan 128``)."""
    old = {**plan, "engine": {k: v for k, v in plan["engine"].items()
                              if k not in ("cache_block_sizes", "scheduler_block_size")}}  # fmt: skip
    assert collect_run.deployment_differences(_facts(), old) == ["scheduler block_size 2048, plan 128"]


def test_without_caching_the_decode_contexts_step_by_the_growth_block(plan):
    """Nothing is cached, so the hash block (2,048 = the whole context) does not space the contexts: the block does."""
    contexts = sorted({p["context_tokens"] for p in plan["points"] if p["phase"] == "decode"})
    assert contexts == [2, 130, 258, 514, 1026, 1922]  # m × 128 + 2, m = 0, 1, 2, 4, 8 and the longest 15
    assert {p["prefix_tokens"] for p in plan["points"] if p["phase"] == "prefill"} == {0}
    assert [(p["phase"], p["batch_size"], p.get("new_tokens"), p.get("context_tokens")) for p in plan["smoke"]] == [
        ("prefill", 1, 64, None), ("decode", 1, None, 130), ("decode", 2, None, 130)]  # fmt: skip


def test_a_smoke_collection_runs_on_an_engine_with_these_blocks(plan, tmp_path):
    """The collection on a stand-in engine that reports the probed engine's blocks: no refusal, the run records them."""
    model = fake_model_dir(tmp_path / "model", (PROBE / "model-config.json").read_bytes())
    engine = StandinRuntime(StandinConfig(runtime="vllm==0.32.0", block_size=SCHEDULER_BLOCK,
                                          hash_block_size=HASH_BLOCK, align_mode=False,
                                          cache_block_sizes=GROUPS))  # fmt: skip
    c = collect_run.prepare(plan, model, tmp_path / "run", smoke=True, warmups=0, repetitions=3)
    collect_run.collect(c, engine.driver())
    assert c.run is not None
    assert (c.run["limits"]["block_size"], c.run["serving_config"]["hash_block_size"]) == (SCHEDULER_BLOCK, HASH_BLOCK)
    assert len(c.done) == 3 and engine.engines[0].closed


def test_an_engine_whose_groups_differ_from_the_plan_is_refused(plan, tmp_path):
    model = fake_model_dir(tmp_path / "model", (PROBE / "model-config.json").read_bytes())
    engine = StandinRuntime(StandinConfig(runtime="vllm==0.32.0", block_size=SCHEDULER_BLOCK,
                                          hash_block_size=HASH_BLOCK, align_mode=False,
                                          cache_block_sizes=(2048, 2048, 2048, 256)))  # fmt: skip
    c = collect_run.prepare(plan, model, tmp_path / "run", smoke=True, warmups=0, repetitions=3)
    with pytest.raises(FpmError, match=r"cache group block sizes \[2048, 2048, 2048, 256\], plan \[2048, 2048"):
        collect_run.collect(c, engine.driver())
    assert engine.engines[0].closed
