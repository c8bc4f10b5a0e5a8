"""The model-agnostic point grid (fpmcore.plan.point_grid): axes, drop rules, coverage, smoke subset, digests, cells."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from fpmcore import AlignStopQuery
from fpmcore.documents.jsonio import digest
from fpmcore.documents.profile import load_profile
from fpmcore.plan import point_grid as g
from fpmcore.plan.planning import resolve_limits
from tests.collect.conftest import PROBE, make_plan, plan_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "profiles"
PLAIN = EXAMPLES / "plain-llama8b-like.fpm-profile.json"
GLM = EXAMPLES / "glm53flash-tp4.fpm-profile.json"


def _plain(max_batch_size: int = 256, kv_cache_bytes: int | None = None):
    p = load_profile(PLAIN)
    d = p.deployments[0]
    res = attrs.evolve(d.resources, max_batch_size=max_batch_size)
    if kv_cache_bytes is not None:
        res = attrs.evolve(res, runtime_memory=attrs.evolve(res.runtime_memory, kv_cache_bytes=kv_cache_bytes))
    return attrs.evolve(p, deployments=(attrs.evolve(d, resources=res),))


def test_axes_and_drop_counts_of_a_small_plain_deployment():
    """Block = hash block 16, budget 512, L 1,024, max_num_seqs 4, prefix caching on (counted by hand):

    new tokens 16 … 512 (6), batches 1 … 32 (6), prefixes 0, 1, 2, 4, 8, 16, 32 blocks and the longest
    (L − n − 2) // 16 (8 per n): 288 prefill candidates; contexts m × 16 + 2 for m = 0, 1, 2, 4, 8, 16, 32 and
    (L − 3) // 16 = 63: 8 × 6 = 48 decode candidates.  max_model_len drops (P 512, n 512) at 6 batch sizes;
    max_num_seqs drops batches 8, 16, 32: 3 × 48 − 3 prefill and 3 × 8 decode = 165; token_budget drops
    b × n > 512 among b ≤ 4: n 256 at b 4 (8 prefixes) and n 512 at b 2, 4 (7 prefixes) = 22."""
    p = _plain(max_batch_size=4)
    inputs = g.grid_inputs(p, 0, resolve_limits(p, 0, token_budget=512, max_model_len=1024))
    assert g.new_token_axis(512, 16) == [16, 32, 64, 128, 256, 512]
    assert g.prefix_axis(512, inputs) == [0, 16, 32, 64, 128, 256, 496, 512]
    assert g.context_axis(inputs) == [2, 18, 34, 66, 130, 258, 514, 1010]
    plan = g.select_points(inputs)
    assert dict(plan.candidates) == {"prefill": 288, "decode": 48}
    assert dict(plan.dropped) == {
        "max_model_len": 6,
        "max_num_seqs": 165,
        "token_budget": 22,
        "align_split": 0,
        "capacity": 0,
    }
    assert (len(plan.prefill), len(plan.decode)) == (119, 24)
    assert dict(plan.evaluated) == {
        "max_model_len": 336,
        "max_num_seqs": 330,
        "token_budget": 165,
        "align_split": 119,
        "capacity": 143,
    }


def test_capacity_drops_exactly_what_the_pool_cannot_hold():
    """A pool of 96 blocks of 2 MiB: a point is kept iff b × cdiv(P + n, 16) (decode: cdiv(c + 1, 16)) ≤ 96."""
    p = _plain(kv_cache_bytes=96 * 2097152)
    inputs = g.grid_inputs(p, 0, resolve_limits(p, 0, token_budget=512, max_model_len=1024))
    plan = g.select_points(inputs)
    need = {}
    for c in g.prefill_candidates(inputs):
        need[c] = c.batch_size * -(-(c.prefix_tokens + c.new_tokens) // 16)
    for c in g.decode_candidates(inputs):
        need[c] = c.batch_size * -(-(c.context_tokens + 1) // 16)
    kept = set(plan.prefill) | set(plan.decode)
    assert plan.dropped["capacity"] > 0
    assert all(need[k] <= 96 for k in kept)
    assert sum(1 for c, n in need.items() if n > 96 and c not in kept) >= plan.dropped["capacity"]
    assert max(need[k] for k in kept) == 96  # a need of exactly the pool fits (03 C-16)


def _glm(checkpoint: bool):
    p = load_profile(GLM)
    d = p.deployments[0]
    groups = tuple(grp if grp.prefill_checkpoint_blocks is None or checkpoint
                   else attrs.evolve(grp, prefill_checkpoint_blocks=0, prefill_checkpoint_alignment=None)
                   for grp in d.resources.cache_groups)  # fmt: skip
    return attrs.evolve(p, deployments=(attrs.evolve(d, resources=attrs.evolve(d.resources, cache_groups=groups)),))


@pytest.mark.parametrize("checkpoint", [True, False])
def test_glm_points_run_in_one_step_by_the_glm_plugins_own_align_rule(checkpoint):
    """On the GLM-5.3-Flash profile (align mode, B = H = 2,176) every kept prefill point schedules its n new tokens
    of every request in the first step — for a prompt of P + n, or of P + n + 1 when the point records
    prompt_extension 1 — by the glm53flash plugin's align stop, an implementation independent of the replay's.
    With the checkpoint rule (A = 16) every shape runs in one step (04 G-7); without it n > B splits unless n is
    whole blocks, which run as the non-final chunk of a prompt one token longer."""
    from fpmcore_glm53flash.align import align_stop

    p = _glm(checkpoint)
    limits = resolve_limits(p, 0, max_model_len=40_000)
    inputs = g.grid_inputs(p, 0, limits)
    assert inputs.align_mode and inputs.checkpoint_alignment == (16 if checkpoint else None)
    plan = g.select_points(inputs)
    B, A = 2176, inputs.checkpoint_alignment

    def first_steps(pt, ext):
        left, out = limits.token_budget, []
        for _ in range(pt.batch_size):
            k = min(pt.new_tokens + ext, left)
            out.append(
                align_stop(
                    AlignStopQuery(
                        start=pt.prefix_tokens,
                        num_new_tokens=k,
                        prompt_len=pt.prefix_tokens + pt.new_tokens + ext,
                        num_tokens=pt.prefix_tokens + pt.new_tokens + ext,
                        block_size=B,
                        hash_block_size=B,
                        max_num_batched_tokens=limits.token_budget,
                        checkpoint_alignment=A,
                    )
                )
            )
            left -= pt.new_tokens
        return out

    for pt in plan.prefill:
        assert first_steps(pt, pt.extension) == [pt.new_tokens] * pt.batch_size
    extended = {pt.new_tokens for pt in plan.prefill if pt.extension}
    if checkpoint:
        assert plan.dropped["align_split"] == 0 and not extended
    else:
        assert extended == {2 * B, 3 * B}
        assert not any(pt.new_tokens in (4096, 8192) for pt in plan.prefill)
        assert plan.dropped["align_split"] > 0


def test_the_grid_spans_what_the_latency_model_interpolates(gdn_profile):
    """R-29/R-30: per batch slice the prefill rows form (T, K) knots for every new-token count at several
    prefixes, and the decode rows every context; the largest whole-block chunk, the longest prefix and the
    longest context are knots, so the deployment's own limits are never extrapolated."""
    p = load_profile(gdn_profile)
    limits = resolve_limits(p, 0, max_model_len=4096, token_budget=2048)
    plan = g.select_points(g.grid_inputs(p, 0, limits))
    B = H = 544
    by_batch: dict[int, dict[int, set[int]]] = {}
    for pt in plan.prefill:
        by_batch.setdefault(pt.batch_size, {}).setdefault(pt.new_tokens, set()).add(pt.prefix_tokens)
    assert sorted(by_batch) == [1, 2, 4, 8, 16, 32]
    for b, per_n in by_batch.items():
        for n, prefixes in per_n.items():
            assert b * n <= 2048 and 0 in prefixes and len(prefixes) >= 2, (b, n)
    assert max(by_batch[1]) == 2048 // B * B == 1632
    assert max(max(v) + n for n, v in by_batch[1].items()) >= 4096 - H - 2
    contexts = sorted({d.context_tokens for d in plan.decode})
    assert contexts[0] == 2 and contexts[-1] == (4096 - 3) // H * H + 2
    assert all(c % H == 2 for c in contexts)
    assert {d.batch_size for d in plan.decode} == {1, 2, 4, 8, 16, 32}


def test_smoke_subset_digests_and_plan_record(gdn_profile, tmp_path):
    doc = plan_of(make_plan(gdn_profile, tmp_path / "plan.json", "--max-model-len", "4096"))
    record = doc["options"]["benchmark_points"]
    H = 544
    assert [
        (p["phase"], p["batch_size"], p.get("new_tokens"), p.get("prefix_tokens"), p.get("context_tokens"))
        for p in doc["smoke"]
    ] == [
        ("prefill", 1, 64, 0, None),
        ("prefill", 1, 64, H, None),
        ("prefill", 1, 2 * H, H, None),
        ("decode", 1, None, None, H + 2),
        ("decode", 2, None, None, H + 2),
    ]
    assert [p["benchmark_id"] for p in doc["smoke"]] == [1, 2, 3, 4, 5]
    assert record["origin"] == "fpmcore_grid_v1" == doc["origin"]
    assert record["manifest_sha256"] == digest(record["manifest"]) == doc["digest"]
    assert record["planned_point_count"] == len(doc["points"]) == sum(doc["counts"].values())
    smoke_manifest = {
        "schema_version": 3,
        "prefill": [
            {"batch_size": 1, "total_prefill_tokens": n, "total_kv_read_tokens": P, "rows": [[n, P]]}
            for n, P in ((64, 0), (64, H), (2 * H, H))
        ],
        "decode": [{"batch_size": b, "total_kv_read_tokens": b * (H + 2)} for b in (1, 2)],
    }
    assert record["smoke_manifest_sha256"] == digest(smoke_manifest)


def test_the_plan_names_its_collection_cells_and_engine(gdn_profile, tmp_path):
    """The cells carry the execution identity of the engine-steps contract and the digest of the model
    configuration the profile was probed with (its launch evidence); the engine block is the deployment's."""
    import hashlib

    doc = plan_of(make_plan(gdn_profile, tmp_path / "plan.json", "--max-model-len", "4096"))
    model_sha = hashlib.sha256((PROBE / "model-config.json").read_bytes()).hexdigest()
    assert [c["point_set"] for c in doc["cells"]] == ["full", "smoke"]
    for cell in doc["cells"]:
        assert cell["execution_identity"] == {
            "model_config_sha256": model_sha,
            "execution_profile": "engine_steps",
            "engram_residency": "none",
            "input_modality": "text",
        }
    e = doc["engine"]
    assert (
        e["runtime"],
        e["max_model_len"],
        e["max_num_batched_tokens"],
        e["max_num_seqs"],
        e["prefix_caching"],
        e["kv_cache_bytes"],
    ) == ("vllm==0.33.0", 262144, 8192, 256, True, 59988246528)


@pytest.mark.parametrize("rule", ["max_model_len", "token_budget", "capacity"])
def test_every_kept_point_obeys_the_rules(gdn_profile, rule):
    p = load_profile(gdn_profile)
    limits = resolve_limits(p, 0, max_model_len=3000, token_budget=1500)
    inputs = g.grid_inputs(p, 0, limits)
    plan = g.select_points(inputs)
    for pt in plan.prefill:
        t = pt.prefix_tokens + pt.new_tokens
        ok = {
            "max_model_len": t + 2 <= 3000,
            "token_budget": pt.batch_size * pt.new_tokens <= 1500,
            "capacity": pt.batch_size * inputs.request_bytes(t) <= inputs.pool_bytes,
        }[rule]
        assert ok, pt
    for d in plan.decode:
        ok = {
            "max_model_len": d.context_tokens + 1 <= 3000,
            "token_budget": d.batch_size == 1 or d.batch_size * g.decode_tail(d.context_tokens, 544) <= 1500,
            "capacity": d.batch_size * inputs.request_bytes(d.context_tokens + 1) <= inputs.pool_bytes,
        }[rule]
        assert ok, d
