"""Layout-level (dry-run) evidence [beyond reference]: what the import accepts, and what it still refuses.

``fpmcore.importer`` (module docstring) and ``examples/probes/README.md``: a
worker whose ``lifecycle.measurement`` is ``cache_planned`` may list exactly
the tensor-level paths in ``unresolved_fields`` (I-19), its lifecycle flags
must be false (I-20), one attempt never mixes dry and live workers (I-113),
and the planned bytes must fit the budget in whole pool pages (I-65) on one
backing size (I-66).  Live evidence is judged as 02 §7 says.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from fpmcore.importer import import_evidence
from fpmcore.importer.record_envelope import TENSOR_LEVEL_PATHS, tensor_level

EXAMPLE = Path(__file__).parents[2] / "examples" / "probes" / "glm53flash-tp4"
PLAIN_027 = Path(__file__).parents[2] / "examples" / "probes" / "vllm-0.27.0-plain"
LIVE = {"measurement": "after_warmup", "cache_initialized": True, "warmup_completed": True, "capture_completed": True}
DRY = {
    "measurement": "cache_planned",
    "cache_initialized": False,
    "warmup_completed": False,
    "capture_completed": False,
}


def test_the_examples_are_here():
    """The examples these tests edit are committed: a moved folder fails, it does not skip."""
    assert (EXAMPLE / "observations.json").is_file() and (PLAIN_027 / "observations.json").is_file()


def edited_copy(src: Path, dst: Path, edits: dict[str, callable]) -> Path:
    """Copy an example folder, apply ``edits`` (``phase/file name`` -> fn(record)) and re-pin the hashes."""
    shutil.copytree(src, dst)
    index = json.loads((dst / "observations.json").read_text())
    (conf,) = index["configurations"].values()
    for attempt in conf["attempts"]:
        for phase, entry in attempt["phases"].items():
            for art in entry["artifacts"]:
                key = f"{phase}/{art['path'].rsplit('/', 1)[-1]}"
                if key in edits:
                    path = dst / art["path"]
                    rec = json.loads(path.read_text())
                    edits[key](rec)
                    path.write_text(json.dumps(rec, indent=1) + "\n")
                    art["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (dst / "observations.json").write_text(json.dumps(index, indent=1) + "\n")
    return dst


def rules(run) -> list[str]:
    return [d.rule for d in run.diagnostics]


W1 = "prefill/runtime-observation-worker-dp0-tp1-pp0.json"
SCHED = "decode/runtime-observation-scheduler-dp0.json"


def test_the_tensor_level_paths():
    """I-19's accepted list: tensor and device evidence only."""
    assert all(
        tensor_level(p.replace("<k>", "3").replace("<layer>", "model.layers.0.attn")) for p in TENSOR_LEVEL_PATHS
    )
    for other in (
        "runtime.source_revision",
        "runtime.image",
        "cache.num_blocks",
        "cache.groups",
        "cache.available_cache_bytes",
        "cache.allocations[0].size",
        "settings.cache.hash_block_size",
        "cache.startup.kv_cache_max_concurrency",
        "model.path",
        "cache.storagesX",
        "hardware",
    ):
        assert not tensor_level(other), other


@pytest.mark.parametrize("path", ["runtime.source_revision", "cache.num_blocks", "cache.groups"])
def test_dry_record_with_a_non_tensor_unresolved_path_is_refused(tmp_path, services, path):
    """I-19: a dry worker may lack tensors, nothing else."""
    folder = edited_copy(EXAMPLE, tmp_path / "ev", {W1: lambda r: r["unresolved_fields"].append(path)})
    run = import_evidence(folder, services)
    assert not run.complete and rules(run) == ["I-19"]
    (d,) = run.diagnostics
    assert (d.phase, d.artifact) == ("prefill", "runtime-observation-worker-dp0-tp1-pp0.json")
    assert d.message.endswith(f"beyond the tensor-level evidence a dry run lacks: {path}: null")


def test_dry_record_with_an_error_is_refused(tmp_path, services):
    folder = edited_copy(EXAMPLE, tmp_path / "ev", {W1: lambda r: r.update(error="planning failed")})
    run = import_evidence(folder, services)
    assert rules(run) == ["I-19"] and run.diagnostics[0].message.endswith(": planning failed")


def test_a_dry_scheduler_lists_nothing(tmp_path, services):
    """I-19: the scheduler of a dry run was really initialized; it may not list tensor paths."""
    folder = edited_copy(EXAMPLE, tmp_path / "ev", {SCHED: lambda r: r["unresolved_fields"].append("cache.storages")})
    run = import_evidence(folder, services)
    assert rules(run) == ["I-19"]
    assert run.diagnostics[0].message == "runtime observation has unresolved fields: cache.storages: null"


def test_dry_lifecycle_flags_must_be_false(tmp_path, services):
    """I-20: a cache_planned worker with a completed warm-up contradicts itself."""
    folder = edited_copy(EXAMPLE, tmp_path / "ev", {W1: lambda r: r["lifecycle"].update(warmup_completed=True)})
    run = import_evidence(folder, services)
    assert rules(run) == ["I-20"]
    assert (
        run.diagnostics[0].message
        == "worker cache planning lifecycle evidence is inconsistent: warmup_completed not false"
    )


def test_dry_attempt_with_one_live_worker_is_refused_with_i113(tmp_path, services):
    """I-113 [beyond reference]: the first worker fixes the level; a live worker among dry ones is refused."""
    folder = edited_copy(EXAMPLE, tmp_path / "ev", {W1: lambda r: r["lifecycle"].update(LIVE)})
    run = import_evidence(folder, services)
    assert rules(run) == ["I-113"]
    (d,) = run.diagnostics
    assert d.artifact == "runtime-observation-worker-dp0-tp1-pp0.json"
    assert d.message == (
        "runtime evidence mixes layout-level and tensor-level records in one attempt: prefill worker dp0-tp0-pp0 "
        "is layout-level (measurement 'cache_planned'), prefill worker dp0-tp1-pp0 is tensor-level "
        "(measurement 'after_warmup')"
    )
    assert run.results[0].evidence == "layout"


def test_live_attempt_with_one_dry_worker_is_refused_with_i113(evidence, run_import):
    """I-113 on the live GLM evidence of 02 §11: a dry decode worker is refused, not excused."""
    rec = evidence.workers("decode")[2]
    rec["lifecycle"] = dict(DRY)
    rec["unresolved_fields"] = ["cache.storages"]
    run = run_import(evidence)
    assert rules(run) == ["I-113"]
    d = run.diagnostics[0]
    assert (d.phase, d.artifact) == ("decode", "runtime-observation-worker-dp0-tp2-pp0.json")
    assert "prefill worker dp0-tp0-pp0 is tensor-level (measurement 'after_warmup')" in d.message
    assert "decode worker dp0-tp2-pp0 is layout-level (measurement 'cache_planned')" in d.message


def test_live_record_with_unresolved_tensor_paths_is_still_refused(evidence, run_import):
    """I-19 (02 §7.2): a live record may not list even tensor-level paths."""
    evidence.workers("prefill")[1]["unresolved_fields"] = ["cache.layer_views", "cache.storages"]
    run = run_import(evidence)
    assert rules(run) == ["I-19"]
    assert (
        run.diagnostics[0].message
        == "runtime observation has unresolved fields: cache.layer_views, cache.storages: null"
    )


def test_live_evidence_result_is_tensor_level_without_a_provenance_key(evidence, run_import):
    """Live evidence: ``evidence`` ``tensor`` in the result; the provenance keeps 02 §9.3's keys."""
    run = run_import(evidence)
    assert run.complete
    (r,) = run.results
    assert r.evidence == "tensor" and r.to_json()["evidence"] == "tensor"
    assert "evidence" not in r.provenance


def test_live_worker_keeps_the_hardware_rule(evidence, run_import):
    """I-35 still runs for live evidence (it is skipped only for dry workers, which name no device)."""
    for w in evidence.workers("prefill"):
        w["hardware"]["device_name"] = None
    run = run_import(evidence)
    assert "I-35" in rules(run)


def _shrink_allocation(rec):
    rec["cache"]["allocations"][0]["size"] -= 13_516_800


def test_dry_allocations_must_share_one_backing_size(tmp_path, services):
    """I-66 on the plan: vLLM 0.33.0 places every KVCacheTensor in one backing allocation."""
    folder = edited_copy(EXAMPLE, tmp_path / "ev", {W1: _shrink_allocation})
    run = import_evidence(folder, services)
    assert rules(run) == ["I-66"]
    assert run.diagnostics[0].message == (
        "layer-strided allocations must share one backing storage: planned sizes 185126092800, 185139609600"
    )


def test_dry_plan_must_fit_the_budget(tmp_path, services):
    """I-65 on the plan: the planned bytes fit the profiled budget in whole pool pages."""

    def shrink(rec):
        rec["cache"]["available_cache_bytes"] = 185_139_609_599

    folder = edited_copy(EXAMPLE, tmp_path / "ev", {W1: shrink})
    run = import_evidence(folder, services)
    assert rules(run) == ["I-65"]
    assert "planned 185139609600, available 185139609599, num_blocks 13697" in run.diagnostics[0].message


def test_dry_pool_page_must_agree_across_phases_and_ranks(tmp_path, services):
    """I-107 runs on the planned pool page: 0.27.0 plain records sum one tensor per layer."""

    def grow(rec):
        rec["cache"]["allocations"][0]["size"] += 9536 * 64
        rec["cache"]["available_cache_bytes"] += 9536 * 64

    folder = edited_copy(PLAIN_027, tmp_path / "ev", {"decode/runtime-observation-worker-dp0-tp0-pp0.json": grow})
    run = import_evidence(folder, services)
    assert rules(run) == ["I-107"]
    assert run.diagnostics[0].message == "physical page cost differs across phases or ranks: 2097152 and 2097216"
