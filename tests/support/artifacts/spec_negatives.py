"""The negative cases of 05 §9.3 (N1 … N40): each changes the valid GLM smoke example and returns the
diagnostic the rule must refuse it with (and the plan and cell, where the case changes the cell)."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

from fpmcore.validate.measured_values import canonical_digest, point_key
from tests.support.artifacts.edits import (
    A32,
    SUFFIX,
    bm,
    edit_line,
    fpm,
    other_cell,
    raw,
    retained_from_raw,
    sync,
)
from tests.support.artifacts.example_campaign import (
    PRODUCER_DIR,
    SMOKE_MANIFEST,
)


def n1(plan, cell, files):
    bm(files)["estimate"]["method"] = "repetition_median"
    sync(files)
    return A32 + "method=repetition_median, raw_samples=10, expected_internal_samples=10" + SUFFIX


def n2(plan, cell, files):
    m = bm(files)
    m["raw_fpms"].pop()
    m["expected_internal_samples"] = 9
    retained_from_raw(files, indices=range(1, 9))
    sync(files)
    return A32 + "method=adjacent_upper_median, raw_samples=9, expected_internal_samples=9" + SUFFIX


def n3(plan, cell, files):
    m = bm(files)
    extra = copy.deepcopy(m["raw_fpms"][-1])
    extra["benchmark_sample"]["sample_index"] = 10
    extra["benchmark_sample"]["forward_index"] += 1
    m["raw_fpms"].append(extra)
    m["expected_internal_samples"] = 11
    retained_from_raw(files, indices=range(1, 11))
    sync(files)
    return A32 + "method=adjacent_upper_median, raw_samples=11, expected_internal_samples=11" + SUFFIX


def n4(plan, cell, files):
    bm(files)["expected_internal_samples"] = 12
    sync(files)
    return A32 + "method=adjacent_upper_median, raw_samples=10, expected_internal_samples=12" + SUFFIX


def n5(plan, cell, files):
    bm(files)["estimate"] = {"method": "last_step", "raw_sample_indices": [9]}
    fpm(files)["wall_time"] = 0.0352
    sync(files)
    return A32 + "method=last_step, raw_samples=10, expected_internal_samples=10" + SUFFIX


def n6(plan, cell, files):
    fpm(files)["wall_time"] = 0.0352
    sync(files)
    return "benchmark_measurement reduction disagrees with retained timing: retained=0.0352, reduced=0.0348" + SUFFIX


def n7(plan, cell, files):
    raw(files, 3)["benchmark_sample"]["sample_index"] = 4
    sync(files)
    return (
        "raw sample 3 has an invalid sample/forward index: sample_index=4, forward_index=26, previous forward_index=25"
        + SUFFIX
    )


def n8(plan, cell, files):
    raw(files, 5)["benchmark_sample"]["forward_index"] = 27
    sync(files)
    return (
        "raw sample 5 has an invalid sample/forward index: sample_index=5, forward_index=27, previous forward_index=27"
        + SUFFIX
    )


def n9(plan, cell, files):
    raw(files, 2)["benchmark_sample"]["timing"]["end_monotonic"] = 5123.64
    sync(files)
    return "raw sample 2 contradicts its timing interval: start=5123.6, end=5123.64, wall_time=0.0347" + SUFFIX


def n10(plan, cell, files):
    raw(files, 0)["benchmark_sample"]["timing"]["start_monotonic"] = None
    sync(files)
    return "benchmark_sample.timing.start_monotonic of raw sample 0 expected a number, found null" + SUFFIX


def n11(plan, cell, files):
    raw(files, 7)["benchmark_sample"]["cudagraph"] = {
        "status": "unavailable",
        "runtime_mode": None,
        "num_unpadded_tokens": None,
        "num_padded_tokens": None,
        "num_paddings": None,
    }
    sync(files)
    return "benchmark_sample.cudagraph.status of raw sample 7 expected observed, found unavailable" + SUFFIX


def n12(plan, cell, files):
    files["r0.json"]["producer"]["vllm_package_version"] = "0.33.1"
    files["provenance.json"]["runtime"]["backend_version"] = "0.33.1"
    return (
        "native glm-5.3-flash result lacks valid producer.vllm_package_version: expected 0.33.0, found 0.33.1: r0.json"
    )


def n13(plan, cell, files):
    files["provenance.json"]["runtime"]["backend_version"] = "0.33.1"
    return (
        "native glm-5.3-flash producer.vllm_package_version differs from the collector provenance runtime: "
        "expected 0.33.1, found 0.33.0: r0.json"
    )


def n14(plan, cell, files, producer_dir=PRODUCER_DIR):
    # the campaign was launched with a locally edited overlay: the shipped file plus one comment line
    shipped = files["r0.json"]["producer"]["overlay_sha256"]
    edited = (Path(producer_dir) / "glm53flash_prefix_scheduler.py").read_bytes() + b"# locally edited\n"
    d = hashlib.sha256(edited).hexdigest()
    files["r0.json"]["producer"]["overlay_sha256"] = d
    return f"native glm-5.3-flash result lacks valid producer.overlay_sha256: expected {shipped}, found {d}: r0.json"


def n15(plan, cell, files):
    del files["r1.json"]["serving_config"]["mamba_prefill_checkpoint"]
    return (
        'native ranks disagree on serving_config.mamba_prefill_checkpoint: rank 0={"alignment":16,"blocks":true}, '
        "rank 1=absent: r1.json"
    )


def n16(plan, cell, files):
    del files["r0.json"]["serving_config"]["mamba_prefill_checkpoint"]
    return (
        "native ranks disagree on serving_config.mamba_prefill_checkpoint: rank 0=absent, rank "
        '1={"alignment":16,"blocks":true}: r1.json'
    )


def n17(plan, cell, files):
    files["r0.json"]["execution_mode"] = "eager"
    return "native execution identity cell expects execution mode native_graph_policy, found eager: r0.json"


def n18(plan, cell, files):
    new = other_cell(plan, cell, files, "hbm_tp_sharded")
    return (
        plan,
        new,
        files,
        "native execution identity cell expects execution mode eager, found native_graph_policy: r0.json",
    )


def n19(plan, cell, files):
    new = other_cell(plan, cell, files, "host_offload")
    return plan, new, files, "native execution identity cell has no audited producer contract: host_offload: r0.json"


def n20(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["producer"]["reduction"] = "median_of_ten"
    return (
        "measurement_protocol.producer.reduction expected upper_median_after_first_repetition, found "
        "median_of_ten: r0.json"
    )


def n21(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["synthetic_content"] = "random"
    return "measurement_protocol.synthetic_content expected seeded_tokens, found random: r0.json"


def n22(plan, cell, files):
    doc = files["r0.json"]
    doc["warmup_evidence"] = {"status": "unavailable", "records": []}
    for k in range(len(doc["results"])):
        bm(files, k + 1)["preparation"]["warmup_records_before"] = None
        sync(files, k + 1)
    return "warmup_evidence.status expected recorded, found unavailable: rank 0: r0.json"


def n23(plan, cell, files):
    new = copy.deepcopy(cell)
    new["cell_id"] = "fpm-legacy-cell"
    del new["execution_identity"]
    files["provenance.json"]["cell_id"] = new["cell_id"]
    return (
        plan,
        new,
        files,
        "measurement_protocol.producer belongs to the glm-5.3-flash producer contract, found in a cell with "
        "contract general: r0.json",
    )


def n24(plan, cell, files):
    x = hashlib.sha256(b"another repetition line").hexdigest()
    files["r0.json"]["results"][1]["repetition_evidence_sha256"] = x
    return (
        "repetition_evidence_sha256 of benchmark_id=2 rank=0 matches no line of the repetition evidence sidecar: "
        f"found {x}: r0.json"
    )


def n25(plan, cell, files):
    files["r0.json"]["repetition_evidence"]["records"] = True
    return "repetition_evidence.records must be an integer, found true: r0.json"


def n26(plan, cell, files):
    files["r0.json"]["repetition_evidence"]["records"] = 4
    return "repetition evidence sidecar holds 5 lines, artifact records 4: r0.json"


def n27(plan, cell, files):
    def change(obj: dict[str, Any]) -> None:
        next(r for r in obj["repetitions"] if r.get("raw_sample_index") == 3)["wall_time"] = 0.035

    edit_line(files, 1, change)
    return (
        "repetition evidence line for benchmark_id=2 rank=0 contradicts its row: measured wall_time of raw sample "
        "3 expected 0.0349, found 0.035: r0.json"
    )


def n28(plan, cell, files):
    raw(files, 4)["scheduled_requests"]["sum_prefill_kv_tokens"] = 0
    sync(files)
    return "raw sample 4 workload differs from its point: sum_prefill_kv_tokens expected 2176, found 0" + SUFFIX


def n29(plan, cell, files):
    raw(files, 6)["scheduled_requests"].update(num_decode_requests=1, sum_decode_kv_tokens=4096)
    sync(files)
    return "raw sample 6 workload differs from its point: num_decode_requests expected 0, found 1" + SUFFIX


def n30(plan, cell, files):
    files["r0.json"]["results"][1]["kv_seed_regime"] = "not_applicable"
    bm(files)["preparation"]["kv_seed_regime"] = "not_applicable"
    sync(files)
    return "kv_seed_regime does not follow its point: expected real_kv, found not_applicable" + SUFFIX


def n31(plan, cell, files):
    row = files["r0.json"]["results"][1]
    row["fpms"] = [row["fpms"][0], copy.deepcopy(row["fpms"][0])]
    return "benchmark_id=2: the native save did not keep one fpm of one rank: rank 0 holds 2 fpms: r0.json"


def n32(plan, cell, files):
    k = point_key(files["r0.json"]["results"][2]["point"])
    bm(files)["point_key"] = k
    sync(files)
    return (
        "benchmark_measurement has missing or inconsistent rank/point identity: point_key expected "
        f"d60ecb7532ce754610cb0521e84f5d0a1c9066f7876cf17a31462ed0d5c629f4, found {k}" + SUFFIX
    )


def n33(plan, cell, files):
    bm(files)["preparation"]["completed_points_before"] = 2
    sync(files)
    return (
        "benchmark_measurement has inconsistent grid/order/kv preparation: completed_points_before expected 1, found 2"
        + SUFFIX
    )


def n34(plan, cell, files):
    bm(files)["expected_internal_samples"] = 10.0
    sync(files)
    return "results[1].fpms[0].benchmark_measurement.expected_internal_samples must be an integer, found 10.0: r0.json"


def n35(plan, cell, files):
    raw(files, 0)["counter_id"] = 3
    sync(files)
    return "raw sample 0 has a different point/rank identity: counter_id=3, dp_rank=0, worker_id=dp0-worker" + SUFFIX


def n36(plan, cell, files):
    doc = files["r0.json"]
    row = doc["results"][1]
    row["point"].update(total_kv_read_tokens=4352, rows=[[64, 4352]])
    m = bm(files)
    m["point_key"] = point_key(row["point"])
    for f in [fpm(files)] + m["raw_fpms"]:
        f["scheduled_requests"]["sum_prefill_kv_tokens"] = 4352
    sync(files)
    c = canonical_digest(
        {
            **SMOKE_MANIFEST,
            "prefill": [
                SMOKE_MANIFEST["prefill"][0],
                {"batch_size": 1, "total_prefill_tokens": 64, "total_kv_read_tokens": 4352, "rows": [[64, 4352]]},
                SMOKE_MANIFEST["prefill"][2],
            ],
        }
    )
    return (
        f"native points differ from the staged plan list: expected manifest {canonical_digest(SMOKE_MANIFEST)}, "
        f"found {c}: r0.json"
    )


def n37(plan, cell, files):
    del files["r0.json"]["producer"]
    return (
        "native glm-5.3-flash result lacks valid producer.name: expected glm53flash_prefix_scheduler, found "
        "absent: r0.json"
    )


def n38(plan, cell, files):
    files["r0.json"]["serving_config"]["mamba_prefill_checkpoint"] = {"alignment": None, "blocks": False}
    return (
        "serving_config.mamba_prefill_checkpoint differs from the frozen plan: expected "
        '{"alignment":16,"blocks":true}, found {"alignment":null,"blocks":false}: r0.json'
    )


def n39(plan, cell, files):
    doc = files["r0.json"]
    doc.update(status="partial", valid=False, stop_reason="timeout")
    doc["coverage"]["completed_points"] = 4
    return "native rank artifact is not complete: status=partial, stop_reason=timeout: r0.json"


def n40(plan, cell, files):
    s = raw(files, 0)
    s["wall_time"] = 0.0
    s["benchmark_sample"]["timing"]["end_monotonic"] = s["benchmark_sample"]["timing"]["start_monotonic"]
    sync(files)
    return "raw sample 0 has a non-positive or non-finite wall_time: 0.0" + SUFFIX
