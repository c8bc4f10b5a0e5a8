"""The GLM-5.3-Flash point list at the TP 4 limits (04 §9 acceptance values, G-13 … G-25)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fpmcore import PlanLimits, PointPlan
from fpmcore.documents.jsonio import canonical_bytes
from fpmcore.documents.profile import parse_profile
from fpmcore_glm53flash import fpm_generate_points
from fpmcore_glm53flash.plan_inputs import deployment_facts
from fpmcore_glm53flash.planner import (
    DecodePoint,
    PrefillPoint,
    decode_candidates,
    decode_tail,
    plan_points,
    prefill_shapes,
    prefix_blocks,
)
from fpmcore_glm53flash.planner import (
    manifest_digest as digest,
)

PROFILE = Path(__file__).parent / "data" / "plan" / "glm53flash-tp4.fpm-profile.json"
PAGE = 13516800
H = 2176
TP4 = PlanLimits(token_budget=8192, max_model_len=1048576, block_size=2176, hash_block_size=2176)

DIGEST = {
    True: "9957b8429d4864bd851daf48b557c3ee4c01ff982d04af7619a514f6e036850e",
    False: "b7fd6af7aae39682935d0efc8042d90f53cbe4c8524c0379205cb481accdac18",
}
SMOKE_DIGEST = {
    True: "5fe3d7e281abbfdd451d5796ad412a5121fdafe0625a44e8498261d6e20eb93c",
    False: "fb67956a23e70a40cd70b02fb791d2f01ac4d55a6432cdc1de7be7a1abb3b6b5",
}


def profile_data(checkpoint: bool = True, free_blocks: int | None = None) -> dict[str, Any]:
    data = json.loads(PROFILE.read_text())
    res = data["deployments"][0]["resources"]
    if free_blocks is not None:
        res["runtime_memory"]["kv_cache_bytes"] = free_blocks * PAGE
    if not checkpoint:  # the Triton KDA backend: no prefill checkpoint block (G-11)
        for g in res["cache_groups"]:
            if "prefill_checkpoint_blocks" in g:
                g["prefill_checkpoint_blocks"] = 0
                del g["prefill_checkpoint_alignment"]
    return data


def plan(
    checkpoint: bool = True,
    free_blocks: int | None = None,
    limits: PlanLimits = TP4,
    edit: Callable[[dict], None] | None = None,
):
    data = profile_data(checkpoint, free_blocks)
    if edit is not None:
        edit(data)
    profile = parse_profile(json.dumps(data))
    facts = [deployment_facts(d, i) for i, d in enumerate(profile.deployments)]
    return plan_points(facts, limits, profile.model_revision)


@pytest.fixture(scope="module", params=[True, False], ids=["flashkda", "triton"])
def both(request):
    return request.param, plan(request.param)


def test_candidate_axes_g13_g15() -> None:
    """G-13: 57 power-of-two shapes + 5 whole-block shapes; G-14: eight prefixes each; G-15: 97 decode."""
    shapes = prefill_shapes(8192, H, 32)
    assert len(shapes) == 62
    assert [s for s in shapes if s[1] % H == 0] == [(1, 2176), (1, 4352), (1, 6528), (2, 2176), (3, 2176)]
    longest = {n: prefix_blocks(n, H, 131072)[-1] for _, n in shapes}
    assert {n: k for n, k in longest.items() if k != 60} == {
        1024: 59,
        2048: 59,
        2176: 59,
        4096: 58,
        4352: 58,
        6528: 57,
        8192: 56,
    }
    assert max(n for n, k in longest.items() if k == 60) == 512
    assert all(len(prefix_blocks(n, H, 131072)) == 8 for _, n in shapes)
    decode = decode_candidates(H, 131072, 32)
    assert len(decode) == 97
    assert DecodePoint(2177, 1) in decode  # the [RECONSTRUCTION] slot (1, H + 1)


def test_tail_g15() -> None:
    """G-15 uncached tail, the values of the G-18 table."""
    assert [decode_tail(c, H) for c in (512, 1024, 2048, 4096, 8192, 16384, 131072, 2177)] == [
        511,
        1023,
        2047,
        1919,
        1663,
        1151,
        511,
        2176,
    ]


def test_counts_g16_g20(both) -> None:
    """§9: 577 (496 + 81) with the checkpoint, 537 (456 + 81) without; per-rule drops and their bases."""
    ckpt, p = both
    assert p.candidates == {"prefill": 496, "decode": 97}
    assert len(p.prefill) == (496 if ckpt else 456)
    assert len(p.decode) == 81
    assert p.dropped == {"align_split": 0 if ckpt else 40, "token_budget": 16, "capacity": 0}
    assert p.evaluated == (
        {"align_split": 496, "token_budget": 593, "capacity": 577}
        if ckpt
        else {"align_split": 496, "token_budget": 553, "capacity": 537}
    )
    assert len(p.points) == (577 if ckpt else 537)


def test_token_budget_drops_g18(both) -> None:
    """G-18: exactly these 16 decode candidates fail the budget, all with b ≥ 8."""
    _, p = both
    kept = set(p.decode)
    dropped = {
        (c, b)
        for c in (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
        for b in (1, 2, 4, 8, 16, 32)
        if DecodePoint(c, b) not in kept
    }
    assert dropped == {
        (512, 32),
        (1024, 16),
        (1024, 32),
        *((c, b) for c in (2048, 4096, 8192, 16384) for b in (8, 16, 32)),
        (131072, 32),
    }


def test_align_split_drops_without_checkpoint_g17() -> None:
    """G-17: the 40 Triton drops are the 5 shapes with n > 2176 at each of their 8 prefixes."""
    with_ckpt, without = plan(True), plan(False)
    gone = set(with_ckpt.prefill) - set(without.prefill)
    assert len(gone) == 40
    assert {(p.batch_size, p.new_tokens) for p in gone} == {(1, 4096), (2, 4096), (1, 8192), (1, 4352), (1, 6528)}
    assert Counter((p.batch_size, p.new_tokens) for p in gone) == Counter(
        {s: 8 for s in [(1, 4096), (2, 4096), (1, 8192), (1, 4352), (1, 6528)]}
    )


def test_per_n_counts_and_ends_g21(both) -> None:
    """§9: per-n counts of the FlashKDA list, first/last points, canonical order and contiguous ids."""
    ckpt, p = both
    per_n = Counter(q.new_tokens for q in p.prefill)
    expected = {n: 48 for n in (4, 8, 16, 32, 64, 128, 256)}
    expected.update({512: 40, 1024: 32, 2048: 24, 2176: 24})
    if ckpt:
        expected.update({4096: 16, 4352: 8, 6528: 8, 8192: 8})
    assert dict(per_n) == expected
    assert p.prefill[0] == PrefillPoint(0, 4, 1)
    assert p.prefill[-1] == PrefillPoint(130560, 512, 16)
    assert p.decode[0] == DecodePoint(4, 1)
    assert p.decode[-1] == DecodePoint(131072, 16)
    assert list(p.prefill) == sorted(p.prefill) and list(p.decode) == sorted(p.decode)
    pp = p.point_plan()
    assert [q["benchmark_id"] for q in pp.points] == list(range(1, len(p.points) + 1))
    assert pp.points[0] == {"benchmark_id": 1, "phase": "prefill", "batch_size": 1, "new_tokens": 4, "prefix_tokens": 0}


def test_digests_g23(both) -> None:
    """G-23: fpmcore's own list and smoke digests (§9), over the G-22 manifest."""
    ckpt, p = both
    pp = p.point_plan()
    assert pp.digest == DIGEST[ckpt]
    assert pp.report["smoke_digest"] == SMOKE_DIGEST[ckpt]
    # the reference's digests (2c81f2f524251c18…, 299abe8eb499f911…) use another point encoding
    assert not pp.digest.startswith(("2c81f2f524251c18", "299abe8eb499f911"))


def test_digest_is_sha256_of_the_canonical_form_g23(both) -> None:
    """The planner's digest equals SHA-256 of ``fpmcore.documents.jsonio.canonical_bytes`` (01 §9.2)."""
    import hashlib

    _, p = both
    for man in (p.manifest, p.smoke_manifest):
        assert digest(man) == hashlib.sha256(canonical_bytes(man)).hexdigest()


def test_manifest_follows_dynamo_rules_g22(both) -> None:
    """G-22: schema_version 3; rows sum to both totals; decode kv read ≥ batch size; no partition."""
    _, p = both
    man = p.manifest
    assert set(man) == {"schema_version", "prefill", "decode"} and man["schema_version"] == 3
    for e in man["prefill"]:
        assert set(e) == {"batch_size", "total_prefill_tokens", "total_kv_read_tokens", "rows"}
        assert len(e["rows"]) == e["batch_size"]
        assert sum(r[0] for r in e["rows"]) == e["total_prefill_tokens"] >= e["batch_size"]
        assert sum(r[1] for r in e["rows"]) == e["total_kv_read_tokens"]
        assert all(type(n) is int and n >= 1 and type(k) is int and k >= 0 for n, k in e["rows"])
    for e in man["decode"]:
        assert set(e) == {"batch_size", "total_kv_read_tokens"}
        assert e["total_kv_read_tokens"] >= e["batch_size"]
    assert man["prefill"][1] == {
        "batch_size": 2,
        "total_prefill_tokens": 8,
        "total_kv_read_tokens": 0,
        "rows": [[4, 0], [4, 0]],
    }
    assert canonical_bytes(man).startswith(b'{"decode":[{"batch_size":1,"total_kv_read_tokens":4}')


def test_smoke_subset_g24(both) -> None:
    """G-24: five points with the checkpoint, four without (point 3 splits), renumbered 1…k."""
    ckpt, p = both
    smoke = p.point_plan().smoke
    pre = [(s["batch_size"], s["new_tokens"], s["prefix_tokens"]) for s in smoke if s["phase"] == "prefill"]
    dec = [(s["batch_size"], s["context_tokens"]) for s in smoke if s["phase"] == "decode"]
    assert pre == ([(1, 64, 0), (1, 64, 2176), (1, 4352, 2176)] if ckpt else [(1, 64, 0), (1, 64, 2176)])
    assert dec == [(1, 4096), (2, 4096)]
    assert [s["benchmark_id"] for s in smoke] == list(range(1, (5 if ckpt else 4) + 1))


def test_capacity_report_g19_g20(both) -> None:
    """G-19/G-20: estimate 2,240 / 2,112, exact holding 2,240 for both, free 13,696, the log lines."""
    ckpt, p = both
    assert p.settings.free_blocks == 13696
    assert p.capacity_estimate == (2240 if ckpt else 2112)
    assert p.exact_holding == 2240
    assert p.over_free == 0
    n_budget, n_cap = (593, 577) if ckpt else (553, 537)
    assert p.log_lines() == [
        f"glm-5.3-flash point list: align_split dropped {0 if ckpt else 40} of 496 candidates",
        f"glm-5.3-flash point list: token_budget dropped 16 of {n_budget} candidates",
        f"glm-5.3-flash point list: capacity dropped 0 of {n_cap} candidates",
        f"glm-5.3-flash point list: capacity estimate {2240 if ckpt else 2112} blocks, exact holding 2240 "
        "blocks, free 13696 blocks, 0 kept points hold more than the free blocks",
    ]


@pytest.mark.parametrize(("ckpt", "need"), [(True, 2240), (False, 2112)], ids=["flashkda", "triton"])
def test_capacity_boundary_g19_c16(ckpt: bool, need: int) -> None:
    """03 C-16: the whole list at exactly ``need`` free blocks; with one fewer, 7 prefill points go."""
    whole = plan(ckpt, free_blocks=need)
    assert whole.dropped["capacity"] == 0
    assert len(whole.points) == (577 if ckpt else 537)
    assert whole.over_free == (0 if ckpt else 7)  # Triton holds 2,240 > 2,112 at these 7 points
    short = plan(ckpt, free_blocks=need - 1)
    assert short.dropped["capacity"] == 7
    lost = set(whole.points) - set(short.points)
    assert lost == {PrefillPoint(60 * H, n, 32) for n in (4, 8, 16, 32, 64, 128, 256)}
    assert len(short.decode) == 81


def test_record_g25(both) -> None:
    """G-25: the plan record under options.benchmark_points."""
    ckpt, p = both
    rec = p.point_plan().report["plan_record"]
    assert list(rec) == [
        "origin",
        "checkpoint",
        "candidates",
        "dropped",
        "manifest_sha256",
        "smoke_manifest_sha256",
        "planned_point_count",
        "manifest",
    ]
    assert rec["origin"] == "glm53flash_grid_v1"
    assert rec["checkpoint"] == ({"blocks": True, "alignment": 16} if ckpt else {"blocks": False, "alignment": None})
    assert rec["candidates"] == {"prefill": 496, "decode": 97}
    assert rec["planned_point_count"] == (577 if ckpt else 537)
    assert rec["manifest_sha256"] == DIGEST[ckpt] and rec["smoke_manifest_sha256"] == SMOKE_DIGEST[ckpt]


def test_hook_generates_for_glm_only() -> None:
    """``fpm_generate_points``: a PointPlan for GLM; the host asks no other model's plugin."""
    from fpmcore.documents.errors import FpmError
    from fpmcore.testing import make_host

    profile = parse_profile(PROFILE.read_bytes())
    pp = fpm_generate_points(profile=profile, deployment=0, limits=TP4)
    assert isinstance(pp, PointPlan)
    assert dict(pp.counts) == {"prefill": 496, "decode": 81}
    assert dict(pp.dropped) == {"align_split": 0, "token_budget": 16, "capacity": 0}
    host = make_host(entry_points=("glm53flash", "dsv41"))
    with pytest.raises(
        FpmError, match=r"no model plugin generates points for 'dsv41' \(model plugin 'dsv41' gives none\)"
    ):
        host.hooks.model("dsv41").generate_points(profile=profile, deployment=0, limits=TP4)


def test_limits_override_the_profile_g9() -> None:
    """A smaller budget and context change the list: budget 4,096, max_model_len 65,543 (C = 65,536)."""
    p = plan(True, limits=PlanLimits(4096, 65543, 2176, 2176))
    assert p.settings.context == 65536
    assert max(q.new_tokens * q.batch_size for q in p.prefill) == 4096
    assert max(q.prefix_tokens + q.new_tokens for q in p.prefill) <= 65536
    assert p.decode[-1].context_tokens == 65536


def test_two_deployments_take_the_smallest_pool_g10() -> None:
    """G-10: free_blocks is the minimum over the accepted deployments, batch_cap the smallest max_num_seqs."""

    def add_tp2(data: dict) -> None:
        dep = json.loads(json.dumps(data["deployments"][0]))
        dep["tp"] = dep["moe_tp"] = 2
        dep["resources"]["runtime_memory"]["kv_cache_bytes"] = 2239 * PAGE
        dep["resources"]["max_batch_size"] = 16
        data["deployments"].append(dep)

    p = plan(True, edit=add_tp2)
    assert p.settings.free_blocks == 2239
    assert p.settings.batch_cap == 16
    assert max(q.batch_size for q in p.points) == 16


def test_hook_through_the_plugin_host() -> None:
    """``host.hooks.model(...).generate_points`` reaches the installed plugin: the Triton list, 537 points."""
    from fpmcore.testing import make_host

    host = make_host(entry_points=("glm53flash",))
    profile = parse_profile(json.dumps(profile_data(checkpoint=False)))
    pp = host.hooks.model("glm53flash").generate_points(profile=profile, deployment=0, limits=TP4)
    assert dict(pp.counts) == {"prefill": 456, "decode": 81}
    assert pp.digest == DIGEST[False]
    assert len(pp.smoke) == 4
