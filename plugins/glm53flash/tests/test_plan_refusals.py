"""The planner's refusals (04 G-12, G-8), their diagnostics and their order."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fpmcore import PlanLimits
from fpmcore.documents.errors import FpmError
from fpmcore.documents.profile import parse_profile
from fpmcore_glm53flash.plan_inputs import deployment_facts
from fpmcore_glm53flash.planner import generate_points, plan_points

PROFILE = Path(__file__).parent / "data" / "plan" / "glm53flash-tp4.fpm-profile.json"
TP4 = PlanLimits(token_budget=8192, max_model_len=1048576, block_size=2176, hash_block_size=2176)
P = "glm-5.3-flash collection"


def groups(data: dict, d: int = 0) -> list[dict[str, Any]]:
    return data["deployments"][d]["resources"]["cache_groups"]


def runtime(data: dict, d: int = 0) -> dict[str, Any]:
    return data["deployments"][d]["resources"]["runtime_memory"]


def triton(data: dict, d: int = 0) -> None:
    for g in groups(data, d):
        if "prefill_checkpoint_blocks" in g:
            g["prefill_checkpoint_blocks"] = 0
            g.pop("prefill_checkpoint_alignment", None)


def add_tp2(data: dict, configuration: str = "glm53flash-tp2") -> dict:
    dep = json.loads(json.dumps(data["deployments"][0]))
    dep["tp"] = dep["moe_tp"] = 2
    prov = json.loads(dep["resources"]["runtime_memory"]["provenance"])
    prov["configuration"] = configuration
    dep["resources"]["runtime_memory"]["provenance"] = json.dumps(prov, sort_keys=True, separators=(",", ":"))
    data["deployments"].append(dep)
    return dep


def refusal(edit: Callable[[dict], None] | None = None, limits: PlanLimits = TP4, warmup: int = 0) -> FpmError:
    data = json.loads(PROFILE.read_text())
    if edit is not None:
        edit(data)
    profile = parse_profile(json.dumps(data))
    facts = [deployment_facts(d, i) for i, d in enumerate(profile.deployments)]
    with pytest.raises(FpmError) as info:
        plan_points(facts, limits, profile.model_revision, warmup_iterations=warmup)
    return info.value


def _no_alignment(data: dict) -> None:
    del groups(data)[2]["prefill_checkpoint_alignment"]


def test_n_checkpoint_without_alignment() -> None:
    err = refusal(_no_alignment)
    assert err.rule == "G-12"
    assert err.message == (
        f"{P} requires a prefill_checkpoint_alignment on mamba group 'runtime_group_2' "
        "with prefill_checkpoint_blocks 1: found absent"
    )
    assert err.where == "deployments[0].resources.cache_groups[2]"


def test_n_comes_before_a_and_b() -> None:
    """(n) first: with a second, Triton deployment (a) would fail too."""

    def edit(data: dict) -> None:
        add_tp2(data)
        triton(data, 1)
        _no_alignment(data)

    assert "prefill_checkpoint_alignment on mamba group" in refusal(edit).message


def test_a_mixed_checkpoint_settings() -> None:
    def edit(data: dict) -> None:
        add_tp2(data)
        triton(data, 1)

    assert refusal(edit).message == (
        f"{P} requires the same prefill checkpoint setting across the accepted deployments: "
        "glm53flash-tp4=checkpoint(blocks=1, alignment=16), glm53flash-tp2=none"
    )


def test_a_partial_checkpoint_is_no_checkpoint_g11() -> None:
    """G-11: a deployment where only some Mamba groups hold the block has no checkpoint rule."""

    def edit(data: dict) -> None:
        add_tp2(data)
        g = groups(data, 1)[3]
        g["prefill_checkpoint_blocks"] = 0
        del g["prefill_checkpoint_alignment"]

    assert refusal(edit).message.endswith("glm53flash-tp4=checkpoint(blocks=1, alignment=16), glm53flash-tp2=none")


def test_b_two_alignments() -> None:
    def edit(data: dict) -> None:
        groups(data)[1]["prefill_checkpoint_alignment"] = 32

    assert refusal(edit).message == (
        f"{P} requires one prefill checkpoint alignment across the accepted deployments: found 16, 32"
    )


def test_c_budget_multiple_of_4() -> None:
    err = refusal(limits=PlanLimits(8190, 1048576, 2176, 2176))
    assert err.message == f"{P} requires max_num_batched_tokens to be a multiple of 4: found 8190"


def test_d_hash_block_multiple_of_4() -> None:
    """A separate message for the hash block (c is checked first)."""
    err = refusal(limits=PlanLimits(8192, 1048576, 2178, 2178))
    assert err.message == f"{P} requires hash_block_size_tokens to be a multiple of 4: found 2178"
    err = refusal(limits=PlanLimits(8190, 1048576, 2178, 2178))
    assert "max_num_batched_tokens" in err.message


def test_e_hash_block_differs_from_mamba_block() -> None:
    def edit(data: dict) -> None:
        runtime(data)["hash_block_size_tokens"] = 1088

    err = refusal(edit, limits=PlanLimits(8192, 1048576, 2176, 1088))
    assert err.message == (
        f"{P} requires the hash block to equal the mamba block: hash_block_size_tokens=1088, "
        "mamba block_size_tokens=2176, attention block_size_tokens=2176"
    )
    assert err.where == "deployments[0]"


def test_e_mamba_block_differs_from_attention_block() -> None:
    def edit(data: dict) -> None:
        groups(data)[4]["block_size_tokens"] = 4352

    err = refusal(edit)
    assert err.message.endswith(
        "hash_block_size_tokens=2176, mamba block_size_tokens=2176, attention block_size_tokens=4352"
    )


def test_g8_scheduler_block() -> None:
    err = refusal(limits=PlanLimits(8192, 1048576, 4352, 2176))
    assert err.rule == "G-8"
    assert err.message == f"{P} does not model this launch in its align-mode rule: scheduler_block_size=4352"


@pytest.mark.parametrize("revision", ["04C4E9E95C5DA8862DCED7E5056455116F83A7E0", "04c4e9e9", "v1.0"])
def test_f_model_revision(revision: str) -> None:
    def edit(data: dict) -> None:
        data["model_revision"] = revision

    assert refusal(edit).message == (
        f"{P} requires a 40-character lowercase hexadecimal model revision: found '{revision}'"
    )


def test_g_prefix_caching_align() -> None:
    def edit(data: dict) -> None:
        runtime(data)["mamba_cache_mode"] = "none"

    assert refusal(edit).message == (
        f"{P} requires prefix caching with mamba_cache_mode align: found enable_prefix_caching=true, "
        "mamba_cache_mode=none"
    )

    def absent(data: dict) -> None:
        del runtime(data)["mamba_cache_mode"]
        del runtime(data)["enable_prefix_caching"]

    assert refusal(absent).message.endswith("found enable_prefix_caching=absent, mamba_cache_mode=absent")


@pytest.mark.parametrize(
    ("field", "change", "found"),
    [
        ("max_num_batched_tokens", lambda d: d["resources"].update(max_num_tokens=4096), "8192, 4096"),
        ("max_model_len", lambda d: d["resources"]["runtime_memory"].update(max_model_len=524288), "1048576, 524288"),
        ("number of state groups", lambda d: d["resources"]["cache_groups"].pop(), "5, 4"),
    ],
)
def test_h_equal_settings_across_deployments(field: str, change: Callable[[dict], None], found: str) -> None:
    def edit(data: dict) -> None:
        change(add_tp2(data))

    assert refusal(edit).message == f"{P} requires one {field} across the accepted deployments: found {found}"


def test_i_group_page() -> None:
    def edit(data: dict) -> None:
        groups(data)[5]["page_size_bytes"] = 4096

    err = refusal(edit)
    assert err.message == (
        "glm-5.3-flash capacity estimate requires every cache group page to equal the pool "
        "page: group runtime_group_5 page 4096, pool page 13516800"
    )
    assert err.where == "deployments[0].resources.cache_groups[5]"


def test_j_attention_and_mamba_groups() -> None:
    def edit(data: dict) -> None:
        groups(data)[4].update(kind="state", blocks_per_request=1)

    assert refusal(edit).message == (
        f"{P} requires an attention group and at least one mamba state group: "
        "found state, state, state, state, state, state"
    )


def test_k_half_kv_cache() -> None:
    def edit(data: dict) -> None:
        data["deployments"][0]["kv_cache_dtype"] = "half"

    assert refusal(edit).message == "glm-5.3-flash collection refuses a half kv cache: kv_cache_dtype=half"


def test_l_native_warmup() -> None:
    assert refusal(warmup=5).message == f"{P} requires collection.warmup_iterations 0: found 5"


def test_m_pure_tensor_parallelism() -> None:
    def edit(data: dict) -> None:
        data["deployments"][0].update(moe_tp=1, moe_ep=4)  # TEP: valid profile, not pure TP

    assert refusal(edit).message == (
        f"{P} supports pure tensor parallelism only: found pp=1, dp=1, cp=1, moe_tp=1, moe_ep=4"
    )


def test_unknown_deployment_index() -> None:
    profile = parse_profile(PROFILE.read_bytes())
    with pytest.raises(FpmError) as info:
        generate_points(profile, 1, TP4)
    assert info.value.message == "glm-5.3-flash collection has no deployment 1: the profile has 1"
