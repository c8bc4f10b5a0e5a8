"""Every P- rule of 01-profile.md with its exact message, in the spec's order."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fpmcore.documents.errors import FpmError
from fpmcore.documents.profile import (
    FpmCacheGroup,
    FpmResourceProfile,
    from_data,
    load_profile,
)

ROOT = Path(__file__).resolve().parents[1]
GLM = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
G0 = "deployments[0].resources.cache_groups[0]"
G4 = "deployments[0].resources.cache_groups[4]"
RES = "deployments[0].resources"
RM = "deployments[0].resources.runtime_memory"
DEP = "deployments[0]"


@pytest.fixture
def glm() -> dict:
    return json.loads(GLM.read_text())


def _set(doc: dict, path: str, value: object) -> dict:
    """Set (or delete, with value ``...``) a dotted path with [i] indexes."""
    node = doc
    parts = path.replace("]", "").replace("[", ".").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    key = int(last) if last.isdigit() else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return doc


def refused(doc: dict) -> FpmError:
    with pytest.raises(FpmError) as info:
        from_data(doc)
    return info.value


# ---------------------------------------------------------------------------
# structural rules P-S1 … P-S4
# ---------------------------------------------------------------------------

STRUCTURAL = [
    # (path, value, rule, where, message)
    ("extra", 1, "P-S1", "", "unknown field 'extra'"),
    (f"{G0}.passed", True, "P-S1", G0, "unknown field 'passed'"),
    (f"{RM}.mamba_block_size", 16, "P-S1", RM, "unknown field 'mamba_block_size'"),
    ("model", ..., "P-S2", "", "missing required field 'model'"),
    (f"{G0}.page_size_bytes", ..., "P-S2", G0, "missing required field 'page_size_bytes'"),
    (f"{RES}.provenance", ..., "P-S2", RES, "missing required field 'provenance'"),
    (f"{G0}.num_layers", True, "P-S3", G0, "num_layers must be an integer; got true"),
    (f"{G0}.block_size_tokens", 2176.0, "P-S3", G0, "block_size_tokens must be an integer; got 2176.0"),
    (f"{G0}.block_size_tokens", "2176", "P-S3", G0, 'block_size_tokens must be an integer; got "2176"'),
    (f"{G0}.sliding_window", "none", "P-S3", G0, 'sliding_window must be an integer or null; got "none"'),
    (f"{G0}.kind", "mamba", "P-S3", G0, "kind must be one of attention, convolution or state; got 'mamba'"),
    (f"{RES}.cache_layout", "paged", "P-S3", RES, "cache_layout must be one of linear or grouped; got 'paged'"),
    (f"{DEP}.backend", "sglang", "P-S3", DEP, "backend must be vllm; got 'sglang'"),
    (f"{DEP}.enable_eplb", True, "P-S3", DEP, "enable_eplb must be false; got true"),
    (
        f"{DEP}.kv_cache_dtype",
        "fp8_e4m3",
        "P-S3",
        DEP,
        "kv_cache_dtype must be one of bfloat16, half, float32, fp8 or int8; got 'fp8_e4m3'",
    ),
    (f"{RM}.enable_prefix_caching", "false", "P-S3", RM, 'enable_prefix_caching must be a boolean; got "false"'),
    (f"{RM}.gpu_memory_utilization", "0.9", "P-S3", RM, 'gpu_memory_utilization must be a number; got "0.9"'),
    (f"{RM}.gpu_memory_utilization", False, "P-S3", RM, "gpu_memory_utilization must be a number; got false"),
    ("model", 7, "P-S3", "", "model must be a string; got 7"),
    ("deployments", {}, "P-S3", "", "deployments must be an array; got {}"),
    (f"{G0}.page_size_bytes", 9007199254740993, "P-S4", G0, "page_size_bytes is out of range; got 9007199254740993"),
    (f"{G0}.num_layers", -1, "P-S4", G0, "num_layers is out of range; got -1"),
    (f"{G0}.blocks_per_request", -1, "P-S4", G0, "blocks_per_request is out of range; got -1"),
    (f"{G0}.block_size_tokens", 4294967296, "P-S4", G0, "block_size_tokens is out of range; got 4294967296"),
    (f"{RM}.kv_cache_bytes", 2**53 + 1, "P-S4", RM, "kv_cache_bytes is out of range; got 9007199254740993"),
]


@pytest.mark.parametrize(("path", "value", "rule", "where", "message"), STRUCTURAL)
def test_structural_rules(glm, path, value, rule, where, message):
    err = refused(_set(glm, path, value))
    assert (err.rule, err.where, err.message) == (rule, where, message)


def test_structural_errors_come_before_object_rules(glm):
    # P-60 (schema_version) would fire first among object rules, but a structural
    # fault deeper in the tree is reported first (01 §1.3).
    _set(glm, "schema_version", 2)
    _set(glm, f"{G4}.page_size_bytes", True)
    err = refused(glm)
    assert (err.rule, err.where) == ("P-S3", G4)


def test_page_above_2_53_fails_ps4_before_p4(glm):
    # 01 §1.3 vector
    err = refused(_set(glm, f"{G0}.page_size_bytes", 9007199254740993))
    assert str(err) == f"{G0}: page_size_bytes is out of range; got 9007199254740993"


def test_sliding_window_may_be_missing_and_reads_as_null(glm):
    _set(glm, f"{G4}.sliding_window", ...)
    profile = from_data(glm)
    assert profile.deployments[0].resources.cache_groups[4].sliding_window is None


# ---------------------------------------------------------------------------
# cache group P-1 … P-13
# ---------------------------------------------------------------------------

GROUP_RULES = [
    # (edits on group 0 (state) or 4 (attention), rule, message)
    (G0, {"name": "  "}, "P-1", "cache group name must be non-blank; got '  '"),
    (G0, {"num_layers": 0}, "P-2", "cache group 'runtime_group_0': num_layers must be positive; got 0"),
    (G0, {"block_size_tokens": 0}, "P-3", "cache group 'runtime_group_0': block_size_tokens must be positive; got 0"),
    (G0, {"page_size_bytes": 0}, "P-4", "cache group 'runtime_group_0': page_size_bytes must be in 1..2**53; got 0"),
    (G4, {"sliding_window": 0}, "P-5", "cache group 'runtime_group_4': sliding_window must be positive or null; got 0"),
    (
        G4,
        {"kind": "convolution"},
        "P-6",
        "cache group 'runtime_group_4': convolution cache groups require a sliding_window",
    ),
    (
        G0,
        {"blocks_per_request": ...},
        "P-7",
        "cache group 'runtime_group_0': state cache groups require a positive blocks_per_request; got absent",
    ),
    (
        G0,
        {"blocks_per_request": 0},
        "P-7",
        "cache group 'runtime_group_0': state cache groups require a positive blocks_per_request; got 0",
    ),
    (
        G0,
        {"sliding_window": 4096},
        "P-8",
        "cache group 'runtime_group_0': state cache groups cannot have a sliding_window; got 4096",
    ),
    (
        G4,
        {"blocks_per_request": 1},
        "P-9",
        "cache group 'runtime_group_4': blocks_per_request is only valid for state cache groups; got 1 on kind attention",
    ),
    (
        G4,
        {"prefill_checkpoint_blocks": 1},
        "P-10",
        "cache group 'runtime_group_4': prefill_checkpoint_blocks is only valid for state cache groups; "
        "got 1 on kind attention",
    ),
    (
        G0,
        {"prefill_checkpoint_blocks": 2},
        "P-11",
        "cache group 'runtime_group_0': prefill_checkpoint_blocks must be 0 or 1; got 2",
    ),
    (
        G0,
        {"prefill_checkpoint_alignment": 0},
        "P-12",
        "cache group 'runtime_group_0': prefill_checkpoint_alignment must be positive; got 0",
    ),
    (
        G0,
        {"prefill_checkpoint_blocks": 0},
        "P-13",
        "cache group 'runtime_group_0': prefill_checkpoint_alignment requires prefill_checkpoint_blocks 1; got 16",
    ),
    (
        G0,
        {"prefill_checkpoint_blocks": ...},
        "P-13",
        "cache group 'runtime_group_0': prefill_checkpoint_alignment requires prefill_checkpoint_blocks 1; got 16",
    ),
]


@pytest.mark.parametrize(("where", "edits", "rule", "message"), GROUP_RULES)
def test_cache_group_rules(glm, where, edits, rule, message):
    for key, value in edits.items():
        _set(glm, f"{where}.{key}", value)
    err = refused(glm)
    assert (err.rule, err.where, err.message) == (rule, where, message)


def test_group_rules_report_the_first_failure_in_order(glm):
    _set(glm, f"{G0}.num_layers", 0)
    _set(glm, f"{G0}.page_size_bytes", 0)
    assert refused(glm).rule == "P-2"


def test_state_group_with_count_1_and_no_alignment_is_valid(glm):
    _set(glm, f"{G0}.prefill_checkpoint_alignment", ...)
    from_data(glm)


def test_convolution_group_with_window_is_valid(glm):
    _set(glm, f"{G4}.kind", "convolution")
    _set(glm, f"{G4}.sliding_window", 4)
    from_data(glm)


# ---------------------------------------------------------------------------
# block arithmetic P-14 … P-17 (01 §3.6 worked numbers)
# ---------------------------------------------------------------------------

A = FpmCacheGroup(
    name="A", kind="attention", num_layers=2, block_size_tokens=16, page_size_bytes=160, sliding_window=32
)
A_FULL = FpmCacheGroup(name="A", kind="attention", num_layers=2, block_size_tokens=16, page_size_bytes=160)


@pytest.mark.parametrize(
    ("group", "computed", "target", "blocks", "nbytes"),
    [
        (A, 0, 32, range(0, 2), 320),
        (A, 32, 33, range(0, 3), 480),
        (A, 48, 49, range(1, 4), 480),
        (A, 64, 65, range(2, 5), 480),
        (A_FULL, 64, 65, range(0, 5), 800),
        (A, 512, 640, range(30, 40), 1600),
    ],
)
def test_block_range_and_bytes_for_forward(group, computed, target, blocks, nbytes):
    assert group.block_range(computed, target) == blocks
    assert group.bytes_for_forward(computed, target) == nbytes


def test_p14_target_before_computed():
    with pytest.raises(FpmError) as info:
        A.bytes_for_forward(33, 32)
    assert (info.value.rule, info.value.message) == (
        "P-14",
        "cache group 'A': target_tokens must be >= computed_tokens; got target 32 < computed 33",
    )


def test_convolution_window_4():
    conv = FpmCacheGroup(name="c", kind="convolution", num_layers=1, block_size_tokens=4, page_size_bytes=8,
                         sliding_window=4)  # fmt: skip
    assert conv.block_range(8, 9) == range(1, 3)
    assert conv.bytes_for_forward(8, 9) == 16


def test_p15_exceeds_2_53():
    big = FpmCacheGroup(name="big", kind="attention", num_layers=1, block_size_tokens=16, page_size_bytes=2**53)
    with pytest.raises(FpmError) as info:
        big.bytes_for_forward(0, 17)
    assert (info.value.rule, info.value.message) == ("P-15", "cache group 'big': cache allocation exceeds 2**53 bytes")


def test_p16_peak_and_p17_occupancy():
    assert A.peak_request_bytes(4096, 128) == 1760  # 11 pages
    assert A.occupancy_request_bytes(4096, 4096) == 480  # 3 pages
    with pytest.raises(FpmError) as info:
        A.peak_request_bytes(0, 128)
    assert (info.value.rule, info.value.message) == (
        "P-16",
        "cache group 'A': context and max_num_tokens must be positive; got 0, 128",
    )
    big = FpmCacheGroup(name="big", kind="attention", num_layers=1, block_size_tokens=16, page_size_bytes=2**52)
    with pytest.raises(FpmError) as info:
        big.peak_request_bytes(48, 1)
    assert info.value.message == "cache group 'big': cache request allocation exceeds 2**53 bytes"
    with pytest.raises(FpmError) as info:
        A.occupancy_request_bytes(4097, 4096)
    assert (info.value.rule, info.value.message) == (
        "P-17",
        "request_occupancy_tokens must be positive and within context_length; got 4097",
    )


def test_state_group_block_range():
    s = FpmCacheGroup(name="s", kind="state", num_layers=9, block_size_tokens=2176, page_size_bytes=13516800,
                      blocks_per_request=1)  # fmt: skip
    assert s.block_range(0, 0) == range(0, 0)
    assert s.block_range(0, 1) == range(0, 1)
    assert s.block_range(100_000, 1_000_000) == range(0, 1)
    assert s.peak_request_bytes(1_048_576, 8192) == 13_516_800


def test_glm_request_peak_and_fixed_state_bytes():
    res = load_profile(GLM).deployments[0].resources
    attention = res.cache_groups[4]
    assert attention.peak_pages(1_048_576, 8192) == 482
    assert res.request_peak_cache_bytes(1_048_576) == (482 + 5) * 13_516_800 == 6_582_681_600
    assert res.fixed_state_bytes() == 5 * 13_516_800 == 67_584_000
    rm = res.runtime_memory
    assert 13_696 * 13_516_800 == rm.kv_cache_bytes == 185_126_092_800
    assert rm.kv_cache_bytes // attention.page_size_bytes == 13_696
    assert 185_139_609_600 // 13_697 == attention.page_size_bytes


# ---------------------------------------------------------------------------
# runtime memory P-20 … P-26
# ---------------------------------------------------------------------------

RUNTIME_RULES = [
    ({"kv_cache_bytes": 0}, "P-20", "runtime memory: kv_cache_bytes must be in 1..2**53; got 0"),
    (
        {"gpu_memory_utilization": 0},
        "P-21",
        "runtime memory: gpu_memory_utilization must be finite and in (0, 1]; got 0.0",
    ),
    (
        {"gpu_memory_utilization": 1.5},
        "P-21",
        "runtime memory: gpu_memory_utilization must be finite and in (0, 1]; got 1.5",
    ),
    (
        {"gpu_memory_utilization": -0.1},
        "P-21",
        "runtime memory: gpu_memory_utilization must be finite and in (0, 1]; got -0.1",
    ),
    ({"max_model_len": 0}, "P-22", "runtime memory: max_model_len must be positive; got 0"),
    ({"provenance": " "}, "P-23", "runtime memory: provenance must be non-blank"),
    ({"mamba_cache_mode": "all"}, "P-24", "runtime memory: mamba_cache_mode must be none or align; got 'all'"),
    (
        {"enable_prefix_caching": False},
        "P-25",
        "runtime memory: mamba_cache_mode align requires enable_prefix_caching=true; got false",
    ),
    (
        {"enable_prefix_caching": ...},
        "P-25",
        "runtime memory: mamba_cache_mode align requires enable_prefix_caching=true; got absent",
    ),
    ({"hash_block_size_tokens": 0}, "P-26", "runtime memory: hash_block_size_tokens must be positive; got 0"),
]


@pytest.mark.parametrize(("edits", "rule", "message"), RUNTIME_RULES)
def test_runtime_memory_rules(glm, edits, rule, message):
    for key, value in edits.items():
        _set(glm, f"{RM}.{key}", value)
    err = refused(glm)
    assert (err.rule, err.where, err.message) == (rule, RM, message)


def test_mode_none_with_prefix_caching_is_valid(glm):
    _set(glm, f"{RM}.mamba_cache_mode", "none")
    from_data(glm)


def test_gpu_memory_utilization_1_is_written_as_float(glm):
    _set(glm, f"{RM}.gpu_memory_utilization", 1)
    from fpmcore.documents.profile import dumps_profile

    assert b'"gpu_memory_utilization": 1.0,' in dumps_profile(from_data(glm))


# ---------------------------------------------------------------------------
# resources P-30 … P-41
# ---------------------------------------------------------------------------

RESOURCE_RULES = [
    ({"max_num_tokens": 0}, "P-30", RES, "resources: max_num_tokens must be positive; got 0"),
    ({"max_batch_size": 0}, "P-31", RES, "resources: max_batch_size must be positive; got 0"),
    ({"provenance": ""}, "P-32", RES, "resources: provenance must be non-blank"),
    (
        {"runtime_memory": ..., "weights_bytes": 2**53, "activations_bytes": 1},
        "P-33",
        RES,
        "resources: total non-KV resource bytes must not exceed 2**53; got 9007199254740993",
    ),
    (
        {"weights_bytes": 10, "comm_overhead_bytes": 5},
        "P-35",
        RES,
        "resources: runtime_memory cannot be combined with declared non-KV resource bytes: weights_bytes, comm_overhead_bytes",
    ),
    (
        {"cache_layout": "linear"},
        "P-36",
        RES,
        "resources: linear cache requires kv_bytes_per_token in 1..2**53 and no cache_groups",
    ),
    (
        {"cache_layout": "linear", "cache_groups": ..., "kv_bytes_per_token": 0},
        "P-36",
        RES,
        "resources: linear cache requires kv_bytes_per_token in 1..2**53 and no cache_groups",
    ),
    (
        {"kv_bytes_per_token": 10},
        "P-37",
        RES,
        "resources: grouped cache requires cache_groups and no kv_bytes_per_token",
    ),
    ({"cache_groups": []}, "P-37", RES, "resources: grouped cache requires cache_groups and no kv_bytes_per_token"),
    (
        {"runtime_memory.kv_cache_bytes": 0, "max_num_tokens": 0},
        "P-30",
        RES,
        "resources: max_num_tokens must be positive; got 0",
    ),
]


@pytest.mark.parametrize(("edits", "rule", "where", "message"), RESOURCE_RULES)
def test_resource_rules(glm, edits, rule, where, message):
    for key, value in edits.items():
        _set(glm, f"{RES}.{key}", value)
    err = refused(glm)
    assert (err.rule, err.where, err.message) == (rule, where, message)


def test_p34_runtime_memory_message_at_its_location(glm):
    _set(glm, f"{RM}.max_model_len", 0)
    err = refused(glm)
    assert str(err) == f"{RM}: runtime memory: max_model_len must be positive; got 0"


def test_p38_group_message_at_its_location(glm):
    _set(glm, f"{G4}.num_layers", 0)
    assert str(refused(glm)) == f"{G4}: cache group 'runtime_group_4': num_layers must be positive; got 0"


def test_p39_duplicate_group_names(glm):
    _set(glm, f"{G4}.name", "runtime_group_0")
    err = refused(glm)
    assert (err.rule, err.where, err.message) == (
        "P-39",
        RES,
        "resources: cache group names must be unique; 'runtime_group_0' repeats",
    )


def test_p40_pending_and_p41_breakdown(glm):
    from fpmcore.documents.budget import non_kv_breakdown

    _set(glm, f"{RES}.runtime_memory", ...)
    _set(glm, f"{RES}.weights_bytes", 100)
    pending = from_data(glm).deployments[0].resources
    assert pending.memory_pending  # valid but pending
    with pytest.raises(FpmError) as info:
        non_kv_breakdown(pending)
    assert (info.value.rule, info.value.message) == (
        "P-40",
        "FPM memory is pending runtime profiling; collect and finalize runtime memory or provide all four "
        "declared non-KV resource values before simulation",
    )
    observed = load_profile(GLM).deployments[0].resources
    with pytest.raises(FpmError) as info:
        non_kv_breakdown(observed)
    assert (info.value.rule, info.value.message) == (
        "P-41",
        "runtime memory records cache capacity, not a non-KV byte breakdown",
    )


# ---------------------------------------------------------------------------
# deployment P-50 … P-55
# ---------------------------------------------------------------------------

DEPLOYMENT_RULES = [
    ({"pp": 2}, 288, "P-50", "deployment: FPM deployments support PP1 and CP1; got pp=2, cp=1"),
    ({"cp": 2}, 288, "P-50", "deployment: FPM deployments support PP1 and CP1; got pp=1, cp=2"),
    (
        {"moe_tp": 2},
        0,
        "P-51",
        "deployment: dense models require dp=1, moe_ep=1 and moe_tp in {1, tp}; got dp=1, moe_tp=2, moe_ep=1",
    ),
    ({"moe_tp": 2}, 288, "P-52", "deployment: MoE topology must be TP, DEP or TEP; got tp=4, dp=1, moe_tp=2, moe_ep=1"),
    ({"moe_tp": 1, "moe_ep": 4, "tp": 4}, 290, "P-53", "deployment: num_experts 290 is not divisible by moe_ep 4"),
    (
        {"backend_version": "latest"},
        288,
        "P-54",
        "deployment: backend_version must be an exact runtime version; got 'latest'",
    ),
    (
        {"backend_version": "0.33 .0"},
        288,
        "P-54",
        "deployment: backend_version must be an exact runtime version; got '0.33 .0'",
    ),
    ({"backend_version": ""}, 288, "P-54", "deployment: backend_version must be an exact runtime version; got ''"),
]


@pytest.mark.parametrize(("edits", "experts", "rule", "message"), DEPLOYMENT_RULES)
def test_deployment_rules(glm, edits, experts, rule, message):
    glm["num_experts"] = experts
    for key, value in edits.items():
        _set(glm, f"{DEP}.{key}", value)
    err = refused(glm)
    assert (err.rule, err.where, err.message) == (rule, DEP, message)


@pytest.mark.parametrize(
    ("tp", "dp", "moe_tp", "moe_ep"),
    [(4, 1, 4, 1), (1, 8, 1, 8), (4, 1, 1, 4)],  # TP, DEP, TEP
)
def test_moe_topologies_accepted(glm, tp, dp, moe_tp, moe_ep):
    for key, value in {"tp": tp, "dp": dp, "moe_tp": moe_tp, "moe_ep": moe_ep}.items():
        _set(glm, f"{DEP}.{key}", value)
    from_data(glm)


def test_p55_resources_message_at_its_location(glm):
    _set(glm, f"{RES}.max_batch_size", 0)
    assert str(refused(glm)) == f"{RES}: resources: max_batch_size must be positive; got 0"


# ---------------------------------------------------------------------------
# profile P-60 … P-68
# ---------------------------------------------------------------------------

PROFILE_RULES = [
    ({"schema_version": 2}, "P-60", "profile: unsupported schema_version 2; expected 1"),
    ({"model": " "}, "P-61", "profile: model must be non-blank"),
    ({"model_revision": "main"}, "P-62", "profile: model_revision must be pinned; got 'main'"),
    ({"model_revision": "HEAD"}, "P-62", "profile: model_revision must be pinned; got 'HEAD'"),
    ({"model_revision": "abc def"}, "P-62", "profile: model_revision must be pinned; got 'abc def'"),
    ({"architecture": ""}, "P-63", "profile: architecture must be non-blank"),
    ({"context_length": 0}, "P-64", "profile: context_length must be positive; got 0"),
    ({"provenance": "\t"}, "P-65", "profile: provenance must be non-blank"),
    ({"deployments": []}, "P-66", "profile: fpm_profile requires deployments"),
]


@pytest.mark.parametrize(("edits", "rule", "message"), PROFILE_RULES)
def test_profile_rules(glm, edits, rule, message):
    glm.update(edits)
    err = refused(glm)
    assert (err.rule, err.where, err.message) == (rule, "", message)


def test_p67_deployment_message_at_its_location(glm):
    glm["deployments"].append(copy.deepcopy(glm["deployments"][0]))
    glm["deployments"][1]["tp"] = 8
    glm["deployments"][1]["moe_tp"] = 8
    glm["deployments"][1]["pp"] = 2
    err = refused(glm)
    assert (err.rule, err.where) == ("P-50", "deployments[1]")


def test_p68_duplicate_deployment(glm):
    glm["deployments"].append(copy.deepcopy(glm["deployments"][0]))
    glm["deployments"][1]["kv_cache_dtype"] = "bfloat16"  # precision is not part of the identity
    err = refused(glm)
    assert (err.rule, err.message) == (
        "P-68",
        "profile: duplicate FPM deployment resources for gb300 vllm 0.33.0 tp=4 pp=1 dp=1 moe_tp=4 moe_ep=1 cp=1",
    )


def test_resources_object_validates_on_its_own():
    err_doc = {"cache_layout": "grouped", "max_num_tokens": 1, "max_batch_size": 1, "provenance": "t"}
    with pytest.raises(FpmError) as info:
        from_data(err_doc, FpmResourceProfile)
    assert info.value.rule == "P-37"
