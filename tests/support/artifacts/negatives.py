"""Every negative case with the rule that must refuse it (05 §9.3 and fpmcore's own), and writing them."""

from __future__ import annotations

from pathlib import Path

from tests.support.artifacts import own_negatives as own
from tests.support.artifacts import spec_negatives as spec
from tests.support.artifacts.edits import Case
from tests.support.artifacts.example_campaign import PRODUCER_DIR
from tests.support.artifacts.writing import write_attempt, write_json

CASES: tuple[Case, ...] = (
    Case("N1", "A-32", "estimate.method = repetition_median", spec.n1),
    Case("N2", "A-32", "nine raw samples", spec.n2),
    Case("N3", "A-32", "eleven raw samples", spec.n3),
    Case("N4", "A-32", "expected_internal_samples = 12", spec.n4),
    Case("N5", "A-32", "last_step estimate", spec.n5),
    Case("N6", "A-34", "moved retained median", spec.n6),
    Case("N7", "A-33", "sample_index out of position", spec.n7),
    Case("N8", "A-33", "repeated forward_index", spec.n8),
    Case("N9", "A-33", "timing interval contradicts wall_time", spec.n9),
    Case("N10", "A-36", "start_monotonic null", spec.n10),
    Case("N11", "A-36", "cudagraph unavailable", spec.n11),
    Case("N12", "A-21", "vLLM 0.33.1 in the producer record", spec.n12),
    Case("N13", "A-22", "collector runtime 0.33.1", spec.n13),
    Case("N14", "A-21", "edited producer overlay", spec.n14),
    Case("N15", "A-26", "rank 1 lacks the checkpoint record", spec.n15, ranks=2),
    Case("N16", "A-26", "rank 0 lacks the checkpoint record", spec.n16, ranks=2),
    Case("N17", "A-16", "GLM cell with an eager artifact", spec.n17),
    Case("N18", "A-16", "V4.1 cell with a native_graph_policy artifact", spec.n18),
    Case("N19", "A-14", "unknown Engram residency", spec.n19),
    Case("N20", "A-23", "protocol producer reduction", spec.n20),
    Case("N21", "A-23", "synthetic_content random", spec.n21),
    Case("N22", "A-25", "warm-up evidence unavailable", spec.n22),
    Case("N23", "A-17", "GLM protocol producer in a general cell", spec.n23),
    Case("N24", "A-38", "row digest of no sidecar line", spec.n24),
    Case("N25", "A-2", "repetition_evidence.records = true", spec.n25),
    Case("N26", "A-28", "sidecar record count", spec.n26),
    Case("N27", "A-39", "sidecar wall time differs from the raw sample", spec.n27),
    Case("N28", "A-40", "raw sample without its cached prefix", spec.n28),
    Case("N29", "A-40", "raw sample with a decode request", spec.n29),
    Case("N30", "A-37", "cached prefill labelled not_applicable", spec.n30),
    Case("N31", "A-8", "retained FPM kept twice", spec.n31),
    Case("N32", "A-29", "point_key of another point", spec.n32),
    Case("N33", "A-30", "completed_points_before", spec.n33),
    Case("N34", "A-2", "expected_internal_samples = 10.0", spec.n34),
    Case("N35", "A-33", "raw sample of another counter", spec.n35),
    Case("N36", "A-10", "points differ from the staged list", spec.n36),
    Case("N37", "A-21", "producer record absent", spec.n37),
    Case("N38", "A-27", "checkpoint differs from the plan", spec.n38),
    Case("N39", "A-4", "partial artifact", spec.n39),
    Case("N40", "A-33", "zero raw wall time", spec.n40),
    Case("X1", "A-39", "swapped row digests", own.swapped_digests),
    Case("X2", "A-2", "true as forward_index", own.bool_forward_index),
    Case("X3", "A-2", "true as a group point's batch_size", own.bool_batch_size),
    Case("X4", "A-2", "true as a sidecar index", own.bool_sidecar),
    Case("X5", "A-40", "raw sample of another workload", own.other_workload),
    Case("X6", "A-40", "retained FPM of another workload", own.retained_workload),
    Case("X7", "A-38", "sidecar line bound to no row", own.unbound_line),
    Case("X8", "A-28", "sidecar without final newline", own.no_final_newline),
    Case("X9", "A-28", "sidecar edited after the digest", own.sidecar_digest),
    Case("X10", "A-34", "retained moved to the slowest repetition", own.moved_median_to_slowest),
    Case("X11", "A-34", "raw sample indices include the first", own.wrong_indices),
    Case("X12", "A-35", "warm-up reference overlaps measurement", own.warmup_overlap),
    Case("X13", "A-31", "prompt aggregate hash", own.prompt_hash),
    Case("X14", "A-9", "group wall time moved alone", own.group_wall),
    Case("X15", "A-7", "benchmark ids not contiguous", own.ids),
    Case("X16", "A-5", "coverage", own.coverage),
    Case("X17", "A-1", "schema_version 3", own.schema),
    Case("X18", "A-3", "rank artifact missing", own.missing_rank, ranks=2),
    Case("X19", "A-13", "provenance plan hash", own.plan_hash),
    Case("X20", "A-15", "artifact identity differs", own.identity),
    Case("X21", "A-19", "content identity", own.content_identity),
    Case("X22", "A-20", "execution evidence object", own.execution_evidence),
    Case("X23", "A-24", "warm-up ledger count", own.warmup_ledger),
    Case("X24", "A-21", "model revision of another checkpoint", own.model_revision),
    Case("X25", "A-23", "extra protocol producer key", own.protocol_extra),
    Case("X26", "A-18", "rank 1 without protocol", own.protocol_disagree, ranks=2),
    Case("X27", "A-12", "merged artifact differs", own.merged, ranks=2),
    Case("X28", "A-11", "engine blocks differ", own.engine, ranks=2),
)


def write_negatives(out: Path, producer_dir: str | Path = PRODUCER_DIR) -> None:
    """One attempt directory per case under ``out/<id>/`` (plan and cell beside it)."""
    for case in CASES:
        plan, cell, files, message = case.build(producer_dir)
        d = out / case.id
        write_attempt(d / "attempt", files, indent=1)
        write_json(d / "plan.json", plan)
        write_json(d / "expected.json", {"cell": cell, "rule": case.rule, "message": message, "change": case.change})
