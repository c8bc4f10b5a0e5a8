"""Tests of the Acme Hybrid 7B plugin, with fpmcore's test kit (fpm_host, run_fpm, check_plugin)."""

from __future__ import annotations

import pytest

import fpmcore_acme
from fpmcore.plugin_api import AlignStopQuery, ExecutionIdentity
from fpmcore.testing import DATA, check_plugin
from fpmcore_acme.rules import align_stop

#: A hybrid profile shipped with fpmcore (GLM-5.3-Flash TP 4: block 2,176, budget 8,192, max_model_len 1,048,576).
PROFILE = str(DATA / "conformance-hybrid.fpm-profile.json")


def test_the_plugin_conforms():
    """fpmcore's conformance suite: plugin info, registration, no runtime import, well-typed hooks."""
    assert check_plugin(fpmcore_acme) == []


def _query(start, k, prompt, block=2176):
    return AlignStopQuery(
        start=start,
        num_new_tokens=k,
        prompt_len=prompt,
        num_tokens=prompt,
        block_size=block,
        hash_block_size=block,
        max_num_batched_tokens=8192,
        checkpoint_alignment=None,
    )


@pytest.mark.parametrize("start,k,prompt,expected", [
    (0, 8192, 10_000, 6528),     # a first chunk of a longer prompt ends on the block boundary 3 x 2,176
    (6528, 3472, 10_000, 3472),  # the chunk that finishes the prompt is scheduled whole
    (0, 2000, 10_000, 0),        # no boundary within the budget left: not scheduled in this step
    (2176, 2176, 10_000, 2176),  # already on boundaries
])  # fmt: skip
def test_align_stop(start, k, prompt, expected):
    assert align_stop(_query(start, k, prompt)) == expected


def test_the_host_calls_the_align_stop_for_the_model_ids_only(fpm_host):
    host = fpm_host(fpmcore_acme)
    q = _query(0, 8192, 10_000)
    assert host.hooks.model("acme/Hybrid-7B").align_stop(runtime="vllm==0.33.0", query=q) == 6528
    with pytest.raises(Exception, match="no model plugin implements the align-stop rule for 'other'"):
        host.hooks.model("other").align_stop(runtime="vllm==0.33.0", query=q)
    with pytest.raises(Exception, match="align-stop rule for 'acme-hybrid-7b' on vllm==0.27.0"):
        host.hooks.model("acme-hybrid-7b").align_stop(runtime="vllm==0.27.0", query=q)


def test_fpm_plan_uses_the_plugin_points(run_fpm, fpm_host):
    r = run_fpm("plan", PROFILE, "--model", "acme-hybrid-7b", "--json", host=fpm_host(fpmcore_acme))
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    # 13 chunk sizes x 10 prefixes, of which the 3 multiples of the block (2,176, 4,352, 6,528) stay whole;
    # decode: 9 batch sizes x 9 contexts (2,176 x 2^k up to 1,048,576)
    assert doc["counts"] == {"prefill": 30, "decode": 81}
    assert doc["dropped"] == {"align_split": 100, "token_budget": 0}
    assert doc["points"][0] == {
        "benchmark_id": 1,
        "phase": "prefill",
        "batch_size": 1,
        "new_tokens": 2176,
        "prefix_tokens": 0,
    }
    assert {p["new_tokens"] for p in doc["points"] if p["phase"] == "prefill"} == {2176, 4352, 6528}


def test_the_producer_contract_is_chosen_by_residency(fpm_host):
    host = fpm_host(fpmcore_acme)
    plugin, contract = host.hooks.choose_producer_contract(
        identity=ExecutionIdentity("ab" * 32, "full", "host_offload", "text")
    )
    assert (plugin, contract.name, contract.execution_mode) == ("acme", "acme_eager", "eager")


def test_fpm_plugins_lists_it_when_installed(run_fpm):
    """Installed from its folder (tox -e plugin-template), the entry point makes it a plugin of fpm."""
    from importlib import metadata

    if not any(ep.name == "acme" for ep in metadata.entry_points(group="fpmcore.plugins")):
        pytest.fail("fpmcore-acme is not installed: pip install examples/plugin-template")
    r = run_fpm("plugins", "--json", env={"FPM_PLUGINS": "acme"})
    (row,) = r.json()["plugins"]
    assert (row["id"], row["distribution"], row["kind"], row["status"]) == ("acme", "fpmcore-acme", "model", "ok")
    assert "fpm_generate_points" in row["hooks"]
    plan = run_fpm("plan", PROFILE, "--model", "acme-hybrid-7b", "--json", env={"FPM_PLUGINS": "acme"})
    assert plan.exit_code == 0, plan.stderr
    assert plan.json()["counts"] == {"prefill": 30, "decode": 81}
