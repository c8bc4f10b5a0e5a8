"""fpmcore's own negative cases (X1 … X28), beside those of 05 §9.3: each changes the valid GLM smoke
example and returns the diagnostic the rule must refuse it with."""

from __future__ import annotations

import copy
import hashlib
import json

from fpmcore.validate.measured_values import canonical_digest
from fpmcore.validate.structure import merge_ranks
from tests.support.artifacts.edits import (
    SUFFIX,
    bm,
    edit_line,
    fpm,
    ranks_of,
    raw,
    reseal_sidecar,
    sync,
)
from tests.support.artifacts.example_campaign import (
    EXECUTION_EVIDENCE,
    GLM_REVISION,
    canonical,
)


def swapped_digests(plan, cell, files):
    rows = files["r0.json"]["results"]
    rows[0]["repetition_evidence_sha256"], rows[1]["repetition_evidence_sha256"] = (
        rows[1]["repetition_evidence_sha256"],
        rows[0]["repetition_evidence_sha256"],
    )
    return (
        "repetition evidence line for benchmark_id=1 rank=0 contradicts its row: benchmark_id expected 1, found "
        "2: r0.json"
    )


def bool_forward_index(plan, cell, files):
    raw(files, 3)["benchmark_sample"]["forward_index"] = True
    sync(files)
    return (
        "results[1].fpms[0].benchmark_measurement.raw_fpms[3].benchmark_sample.forward_index must be an integer, "
        "found true: r0.json"
    )


def bool_batch_size(plan, cell, files):
    files["r0.json"]["iteration_groups"][3]["point"]["batch_size"] = True
    return "iteration_groups[3].point.batch_size must be an integer, found true: r0.json"


def bool_sidecar(plan, cell, files):
    edit_line(files, 1, lambda obj: obj["repetitions"][2].update(index=True))
    return "lines[1].repetitions[2].index must be an integer, found true: repetitions.jsonl"


def other_workload(plan, cell, files):
    raw(files, 2)["scheduled_requests"] = copy.deepcopy(raw(files, 2, bid=1)["scheduled_requests"])
    sync(files)
    return "raw sample 2 workload differs from its point: sum_prefill_kv_tokens expected 2176, found 0" + SUFFIX


def retained_workload(plan, cell, files):
    fpm(files)["scheduled_requests"]["sum_prefill_tokens"] = 65
    sync(files)
    return "retained fpm workload differs from its point: sum_prefill_tokens expected 64, found 65" + SUFFIX


def unbound_line(plan, cell, files):
    lines = files["repetitions.jsonl"]
    extra = json.loads(lines[1])
    extra["benchmark_id"] = 9
    body = canonical(extra)
    lines.append(body + b"\n")
    reseal_sidecar(files)
    return f"repetition evidence sidecar line 6 is bound to no row: sha256 {hashlib.sha256(body).hexdigest()}: r0.json"


def no_final_newline(plan, cell, files):
    lines = files["repetitions.jsonl"]
    lines[-1] = lines[-1].rstrip(b"\n")
    reseal_sidecar(files)
    files["r0.json"]["repetition_evidence"]["records"] = 5
    return "repetition evidence sidecar must end every line with a newline: r0.json"


def sidecar_digest(plan, cell, files):
    want = files["r0.json"]["repetition_evidence"]["sha256"]
    files["repetitions.jsonl"][0] = files["repetitions.jsonl"][0].replace(b'"fpm_count":1', b'"fpm_count":2', 1)
    found = hashlib.sha256(b"".join(files["repetitions.jsonl"])).hexdigest()
    return f"repetition evidence sidecar digest differs: expected {want}, found {found}: r0.json"


def moved_median_to_slowest(plan, cell, files):
    fpm(files)["wall_time"] = 0.036
    sync(files)
    return "benchmark_measurement reduction disagrees with retained timing: retained=0.036, reduced=0.0348" + SUFFIX


def wrong_indices(plan, cell, files):
    bm(files)["estimate"]["raw_sample_indices"] = list(range(0, 9))
    sync(files)
    return (
        "benchmark_measurement has inconsistent raw sample indices: expected [1,2,3,4,5,6,7,8,9], found "
        "[0,1,2,3,4,5,6,7,8]" + SUFFIX
    )


def warmup_overlap(plan, cell, files):
    bm(files)["preparation"]["warmup_records_before"] = 13
    sync(files)
    return "warmup reference overlaps measurement: record 12 ends at forward 34 after the first raw sample 23" + SUFFIX


def prompt_hash(plan, cell, files):
    reqs = [{"slot": 0, "num_tokens": 2240, "sha256": "a" * 64}]
    bm(files)["prompts"] = {"status": "recorded", "sha256": "b" * 64, "requests": reqs}
    sync(files)
    return (
        f"recorded prompt evidence aggregate hash disagrees with requests: expected {canonical_digest(reqs)}, found "
        f"{'b' * 64}" + SUFFIX
    )


def group_wall(plan, cell, files):
    files["r0.json"]["iteration_groups"][1]["wall_time"] = 0.05
    return "benchmark_id=2: iteration wall time 0.05 differs from the slowest rank 0.0348: r0.json"


def ids(plan, cell, files):
    files["r0.json"]["iteration_groups"][1]["benchmark_id"] = 3
    return "native iteration groups are not a contiguous 1-based sequence: found [1,3,3,4,5]: r0.json"


def coverage(plan, cell, files):
    files["r0.json"]["coverage"]["expected_points"] = 6
    return (
        "native coverage is inconsistent: expected_points=6, completed_points=5, skipped_points=0, results=5, "
        "iteration_groups=5: r0.json"
    )


def schema(plan, cell, files):
    files["r0.json"]["schema_version"] = 3
    return "unsupported native rank artifact: schema_version=3, artifact_type=rank: r0.json"


def missing_rank(plan, cell, files):
    del files["r1.json"]
    return "native rank artifacts do not cover dp ranks 0..1: found [0]: ."


def plan_hash(plan, cell, files):
    files["provenance.json"]["plan_sha256"] = "c" * 64
    return (
        f"collector provenance differs from the frozen cell: plan_sha256 expected {plan['sha256']}, found "
        f"{'c' * 64}: provenance.json"
    )


def identity(plan, cell, files):
    files["r0.json"]["execution_identity"]["model_config_sha256"] = "d" * 64
    want = cell["execution_identity"]["model_config_sha256"]
    return (
        f"native execution identity differs from the frozen cell: model_config_sha256 expected {want}, found "
        f"{'d' * 64}: r0.json"
    )


def content_identity(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["content_identity"] = "coordinate_rank_slot_v2"
    return (
        "measurement_protocol.content_identity expected coordinate_rank_slot_v1, found coordinate_rank_slot_v2: r0.json"
    )


def execution_evidence(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["execution_evidence"]["timing_clock"] = "wall"
    ev = files["r0.json"]["measurement_protocol"]["execution_evidence"]
    return (
        "measurement_protocol.execution_evidence expected "
        f"{json.dumps(EXECUTION_EVIDENCE, sort_keys=True, separators=(',', ':'))}, found "
        f"{json.dumps(ev, sort_keys=True, separators=(',', ':'))}: r0.json"
    )


def warmup_ledger(plan, cell, files):
    files["r0.json"]["warmup_evidence"]["records"][6]["observed_forward_count"] = 1
    return (
        "warmup_evidence is invalid: records[6] forward range [16, 18) holds 2 forwards, observed_forward_count "
        "1: rank 0: r0.json"
    )


def model_revision(plan, cell, files):
    files["r0.json"]["producer"]["model_revision"] = "f" * 40
    return (
        f"native glm-5.3-flash result lacks valid producer.model_revision: expected {GLM_REVISION}, found "
        f"{'f' * 40}: r0.json"
    )


def protocol_extra(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["producer"]["reduction_version"] = 2
    return "measurement_protocol.producer.reduction_version expected absent, found 2: r0.json"


def protocol_disagree(plan, cell, files):
    del files["r1.json"]["measurement_protocol"]
    return "native ranks disagree on measurement_protocol: rank 1: r1.json"


def merged(plan, cell, files):
    docs = ranks_of(files)
    files["merged.json"] = merge_ranks(docs, rank_files=["r0.json", "r1.json"])
    files["merged.json"]["coverage"]["completed_points"] = 5
    return "native merged artifact differs from the merge of its rank artifacts: coverage.completed_points: merged.json"


def engine(plan, cell, files):
    for r, doc in enumerate(ranks_of(files)):
        doc["engine"] = {
            "vllm_version": "0.33.0",
            "parallel": {"tensor_parallel_size": 4, "data_parallel_rank": r},
            "attention": {"backend": "FLASHMLA", "backend_resolved": f"x{r}"},
        }
    files["r1.json"]["engine"]["attention"]["backend"] = "TRITON_MLA"
    return "native ranks disagree on engine provenance: field=engine.attention.backend, rank 0 vs rank 1: r1.json"
