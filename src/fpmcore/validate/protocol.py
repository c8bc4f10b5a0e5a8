"""The contract identity, protocol and warm-up rules of every cell: A-15 … A-20 and A-24 (05 §4.1, §4.4, §8.2, §8.3).

A-15 and A-16 apply to cells read under a producer contract, A-17 to every
cell whose contract does not own ``measurement_protocol.producer``; A-18 …
A-20 and A-24 to every artifact that carries a ``measurement_protocol``.
Contract-specific artifact rules (A-21 … A-23, A-25 … A-28) live in the
model plugin that owns the contract.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from fpmcore.documents.rules_catalogue import checks
from fpmcore.host.hooktypes import Diagnostic
from fpmcore.validate.cell import IDENTITY_COLUMNS, ArtifactRule, CellView, RankView
from fpmcore.validate.measured_values import ABSENT, first_difference, get, is_int, js, plain


@checks("A-15")
def execution_identity_is_cells(view: CellView) -> Diagnostic | None:
    """A-15: the artifact's ``execution_identity`` equals the cell's (contract cells only)."""
    if view.contract is None:
        return None
    for r in view.ranks:
        ident = get(r.doc, "execution_identity")
        for col in IDENTITY_COLUMNS:
            want, v = getattr(view.identity, col), get(ident, col)
            if v != want or not isinstance(v, str):
                return Diagnostic(
                    "A-15",
                    f"native execution identity differs from the frozen cell: {col} expected {plain(want)}, found "
                    f"{plain(v)}: {r.path}",
                    r.path,
                )
    return None


@checks("A-16")
def execution_mode_is_contracts(view: CellView) -> Diagnostic | None:
    """A-16: the artifact's ``execution_mode`` is the contract's mode (contract cells only)."""
    if view.contract is None:
        return None
    for r in view.ranks:
        mode = get(r.doc, "execution_mode")
        if mode != view.contract.execution_mode or not isinstance(mode, str):
            return Diagnostic(
                "A-16",
                f"native execution identity cell expects execution mode {view.contract.execution_mode}, found "
                f"{plain(mode)}: {r.path}",
                r.path,
            )
    return None


@checks("A-17")
def no_foreign_protocol_producer(view: CellView) -> Diagnostic | None:
    """A-17: a cell whose contract does not own ``measurement_protocol.producer`` carries none.

    The contract rules being run (``view.rules``) say whether they own it.
    """
    if view.rules is not None and view.rules.owns_protocol_producer:
        return None
    for r in view.ranks:
        prod = get(r.protocol, "producer")
        if prod is not ABSENT:
            name = get(prod, "name")
            owner = view.owners.get(name) if isinstance(name, str) else None
            label = owner or (name if isinstance(name, str) else "another")
            return Diagnostic(
                "A-17",
                f"measurement_protocol.producer belongs to the {label} producer contract, found in a cell with "
                f"contract {view.contract_name}: {r.path}",
                r.path,
            )
    return None


@checks("A-18")
def protocol_on_all_ranks_or_none(view: CellView) -> Diagnostic | None:
    """A-18: every rank has ``measurement_protocol`` or none does, and all are equal."""
    ref = view.ranks[0]
    for r in view.ranks[1:]:
        a, b = ref.protocol, r.protocol
        if (a is ABSENT) != (b is ABSENT) or first_difference(a, b) is not None:
            return Diagnostic("A-18", f"native ranks disagree on measurement_protocol: rank {r.rank}: {r.path}", r.path)
    return None


PROTOCOL_FIELDS: tuple[tuple[str, Any], ...] = (
    ("schema_version", 1),
    ("content_identity", "coordinate_rank_slot_v1"),
    ("prompt_hash_encoding", "uint32_le"),
    ("independent_repetitions", 1),
    ("timing_metric", "scheduler_wall_time"),
    ("input_evidence_scope", "injected_prompt_token_ids"),
)
SYNTHETIC_CONTENT = ("random", "sharegpt", "sharegpt_chain", "zeros", "seeded_tokens")
EXECUTION_EVIDENCE = {
    "schema_version": 1,
    "sample_field": "benchmark_sample",
    "warmup_field": "warmup_evidence",
    "forward_index_scope": "rank_process",
    "timing_clock": "process_local_monotonic",
    "cudagraph_source": "ModelRunnerOutput.cudagraph_stats",
    "warmup_scope": "request_completion_and_existing_shape_validation",
}


@checks("A-19")
def protocol_fields_have_contract_values(view: CellView) -> Diagnostic | None:
    """A-19: the field values of 05 §4.1."""
    for r in view.ranks:
        p = r.protocol
        if p is ABSENT:
            continue

        def bad(field: str, want: str, v: Any, r: RankView = r) -> Diagnostic:
            return Diagnostic(
                "A-19", f"measurement_protocol.{field} expected {want}, found {plain(v)}: {r.path}", r.path
            )

        if not isinstance(p, dict):
            return Diagnostic("A-19", f"measurement_protocol expected an object, found {js(p)}: {r.path}", r.path)
        for field, want in PROTOCOL_FIELDS:
            v = get(p, field)
            if first_difference(v, want) is not None or v is ABSENT:
                return bad(field, plain(want), v)
        for field in ("content_seed", "synthetic_pool_tag"):
            if not isinstance(get(p, field), str):
                return bad(field, "a string", get(p, field))
        sc = get(p, "synthetic_content")
        if sc not in SYNTHETIC_CONTENT or not isinstance(sc, str):
            return bad("synthetic_content", "|".join(SYNTHETIC_CONTENT), sc)
        un = get(p, "unobserved")
        if not (isinstance(un, list) and un and all(isinstance(x, str) and x for x in un)):
            return bad("unobserved", "a non-empty list of non-empty strings", un)
        prep = get(p, "preparation")
        for field in ("warmup_iterations", "giant_kv_threshold", "giant_kv_repeats"):
            v = get(prep, field)
            if not (is_int(v) and v >= 0):
                return bad(f"preparation.{field}", "an integer ≥ 0", v)
        for field in ("prefill_real_seed", "decode_real_kv_warmup"):
            v = get(prep, field)
            if type(v) is not bool:
                return bad(f"preparation.{field}", "true|false", v)
    return None


@checks("A-20")
def execution_evidence_is_exact(view: CellView) -> Diagnostic | None:
    """A-20: ``execution_evidence``, when present, is the exact object of 05 §4.1."""
    for r in view.ranks:
        ev = get(r.protocol, "execution_evidence")
        if ev is not ABSENT and first_difference(ev, EXECUTION_EVIDENCE) is not None:
            return Diagnostic(
                "A-20",
                f"measurement_protocol.execution_evidence expected {js(EXECUTION_EVIDENCE)}, found {js(ev)}: {r.path}",
                r.path,
            )
    return None


WARMUP_KINDS = ("global", "eager_shape", "real_prefix_seed", "real_prefix_shape")
WARMUP_STATUS = ("running", "completed", "failed")
VALIDATION_STATUS = ("not_performed", "passed", "failed")


_WARMUP_PARTS = itemgetter(
    "kind", "status", "validation", "forward_index_start", "forward_index_end", "observed_forward_count",
    "completed_points_before",
)  # fmt: skip


def _warmup_records_pass(records: list[Any]) -> bool:
    """The fast path of :func:`warmup_problem`: ``True`` only when every record passes its checks
    with an integer forward range (a record without one is left to the full check)."""
    prev_end: int | None = None
    prev_points = 0
    try:
        for rec in records:
            kind, st, val, start, end, count, cpb = _WARMUP_PARTS(rec)
            vs, reason = val["status"], val.get("reason", "")
            if not (
                kind.__class__ is str and kind in WARMUP_KINDS and st.__class__ is str and st in WARMUP_STATUS
                and vs.__class__ is str and vs in VALIDATION_STATUS and reason.__class__ is str
                and count.__class__ is int and cpb.__class__ is int and cpb >= prev_points
                and start.__class__ is int and end.__class__ is int and 0 <= start <= end and end - start == count
                and (prev_end is None or start >= prev_end)
            ):  # fmt: skip
                return False
            prev_end, prev_points = end, cpb
    except (KeyError, TypeError, AttributeError):
        return False
    return True


def warmup_problem(ev: Any) -> str | None:
    """What is wrong with a ``warmup_evidence`` block (05 §4.4), or ``None``."""
    if not isinstance(ev, dict):
        return f"warmup_evidence expected an object, found {js(ev)}"
    status, records = get(ev, "status"), get(ev, "records")
    if status not in ("recorded", "unavailable") or not isinstance(status, str):
        return f"status expected recorded|unavailable, found {plain(status)}"
    if not isinstance(records, list):
        return f"records expected a list, found {js(records)}"
    if status == "unavailable" and records:
        return f"status unavailable with {len(records)} records"
    if _warmup_records_pass(records):
        return None
    prev_end: int | None = None
    prev_points = 0
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            return f"records[{i}] expected an object, found {js(rec)}"
        g = rec.get
        kind, st, val = g("kind", ABSENT), g("status", ABSENT), g("validation", ABSENT)
        if kind.__class__ is not str or kind not in WARMUP_KINDS:
            return f"records[{i}].kind expected {'|'.join(WARMUP_KINDS)}, found {plain(kind)}"
        if st.__class__ is not str or st not in WARMUP_STATUS:
            return f"records[{i}].status expected {'|'.join(WARMUP_STATUS)}, found {plain(st)}"
        vs = get(val, "status")
        if vs.__class__ is not str or vs not in VALIDATION_STATUS:
            return f"records[{i}].validation.status expected {'|'.join(VALIDATION_STATUS)}, found {plain(vs)}"
        reason = val.get("reason", ABSENT)
        if reason is not ABSENT and reason.__class__ is not str:
            return f"records[{i}].validation.reason expected a string, found {js(reason)}"
        start, end = g("forward_index_start", ABSENT), g("forward_index_end", ABSENT)
        count, cpb = g("observed_forward_count", ABSENT), g("completed_points_before", ABSENT)
        for name, v in (("forward_index_start", start), ("forward_index_end", end)):
            if not (v is None or (v.__class__ is int and v >= 0)):
                return f"records[{i}].{name} expected an integer ≥ 0 or null, found {plain(v)}"
        for name, v in (("observed_forward_count", count), ("completed_points_before", cpb)):
            if not (v.__class__ is int and v >= 0):
                return f"records[{i}].{name} expected an integer ≥ 0, found {plain(v)}"
        if start is not None and end is not None:
            if end < start or end - start != count:
                return (
                    f"records[{i}] forward range [{start}, {end}) holds {end - start} forwards, "
                    f"observed_forward_count {count}"
                )
        if start is not None and prev_end is not None and start < prev_end:
            return f"records[{i}] starts at forward {start} before the previous record ends ({prev_end})"
        if cpb < prev_points:
            return f"records[{i}].completed_points_before {cpb} is below the previous record's {prev_points}"
        if end is not None:
            prev_end = end
        prev_points = cpb
    return None


@checks("A-24")
def warmup_ledger_well_formed(view: CellView) -> Diagnostic | None:
    """A-24: the warm-up ledger is well formed when the protocol declares execution evidence."""
    for r in view.ranks:
        if get(r.protocol, "execution_evidence") is ABSENT:
            continue
        problem = warmup_problem(get(r.doc, "warmup_evidence"))
        if problem is not None:
            return Diagnostic("A-24", f"warmup_evidence is invalid: {problem}: rank {r.rank}: {r.path}", r.path)
    return None


GENERAL_ARTIFACT_RULES: tuple[tuple[str, ArtifactRule], ...] = (
    ("A-15", execution_identity_is_cells), ("A-16", execution_mode_is_contracts), ("A-17", no_foreign_protocol_producer),
    ("A-18", protocol_on_all_ranks_or_none), ("A-19", protocol_fields_have_contract_values), ("A-20", execution_evidence_is_exact),
    ("A-24", warmup_ledger_well_formed),
)  # fmt: skip


@checks("A-23")
def check_seeded_tokens_with_evidence(rank: RankView) -> Diagnostic | None:
    """A-23's opening for a contract whose protocol feeds seeded real tokens: ``synthetic_content`` is
    ``seeded_tokens`` and ``execution_evidence`` is present (the contract checks its producer after)."""
    p, path = rank.protocol, rank.path
    sc = get(p, "synthetic_content")
    if sc != "seeded_tokens":
        return Diagnostic(
            "A-23", f"measurement_protocol.synthetic_content expected seeded_tokens, found {plain(sc)}: {path}", path
        )
    if get(p, "execution_evidence") is ABSENT:
        return Diagnostic(
            "A-23",
            f"measurement_protocol.execution_evidence expected {js(EXECUTION_EVIDENCE)}, found absent: {path}",
            path,
        )
    return None


@checks("A-25")
def check_warmup_recorded(view: CellView) -> Diagnostic | None:
    """A-25: ``warmup_evidence.status`` is ``recorded`` (every contract whose protocol records its warm-ups)."""
    for r in view.ranks:
        st = get(get(r.doc, "warmup_evidence"), "status")
        if st != "recorded":
            return Diagnostic(
                "A-25", f"warmup_evidence.status expected recorded, found {plain(st)}: rank {r.rank}: {r.path}", r.path
            )
    return None


def producer_runtime_rule(label: str, key: str, expected: Callable[[CellView], Any]) -> ArtifactRule:
    """A-22 for a contract: the rule that every rank's ``producer.<key>`` equals ``expected(view)``, the runtime
    the collector provenance records (the engine-steps contract reads ``producer.runtime``, a pin; the GLM
    contract ``producer.vllm_package_version``, the version).  ``label`` names the contract in the diagnostic."""

    @checks("A-22")
    def producer_runs_collector_runtime(view: CellView) -> Diagnostic | None:
        want = expected(view)
        for r in view.ranks:
            v = get(get(r.doc, "producer"), key)
            if v != want:
                return Diagnostic(
                    "A-22",
                    f"{label} producer.{key} differs from the collector provenance runtime: expected {plain(want)}, "
                    f"found {plain(v)}: {r.path}",
                    r.path,
                )
        return None

    return producer_runs_collector_runtime
