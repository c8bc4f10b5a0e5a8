"""The producer contract of ``fpm collect``: ``fpmcore_engine_steps`` (05 §6.3, §8).

A cell the model-agnostic grid plans (:mod:`fpmcore.plan.point_grid`) has the
execution identity ``(model config digest, "engine_steps", "none", "text")``;
the contract is chosen from that identity — residency ``none`` with the
execution profile ``engine_steps`` — never from the artifact's label.  It is
the contract of a runtime plugin's engine driver measuring with fpmcore's own
protocol (:mod:`fpmcore.collect.measure`), so its rules name neither a
runtime nor a model: the runtime comes from the plan, the expected producer
from the runtime plugin selected for it.

The cell is read with the general rules of :mod:`fpmcore.validate` plus:

* artifact level: A-18 (a protocol is required), A-21 (the producer record
  equals the one the runtime plugin of the plan's runtime gives — name,
  runtime, plugin, timing boundary, every installed file with its SHA-256 —
  and its model configuration digest is the cell's), A-22 (the producer's
  runtime is the collector provenance's), A-23 (seeded tokens, execution
  evidence, the protocol producer of this contract with its repetition
  counts), A-25 (recorded warm-ups), A-28 (the repetition-evidence sidecar);
* row level: A-32 (the protocol's measured repetitions and
  ``adjacent_trimmed_mean`` or ``adjacent_upper_median``: the protocol's reduction), A-37 (``kv_seed_regime``), A-38 and A-39 (each
  row bound to its sidecar line, which holds the protocol's warm-ups and
  measured repetitions; rejected repetitions may come anywhere, at most the
  protocol's bound).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore.collect.contention import Contention, ContentionBound
from fpmcore.collect.identity import CONTRACT as CONTRACT
from fpmcore.collect.identity import PROTOCOL_NAME
from fpmcore.collect.measure import MAX_DECODE_LEAD_IN
from fpmcore.collect.run import STATE_PROTOCOL
from fpmcore.documents.rules_catalogue import checks
from fpmcore.documents.runtime_pin import RuntimePin
from fpmcore.host.hooktypes import Diagnostic, ProducerContract
from fpmcore.validate.cell import CellView, RankView
from fpmcore.validate.evaluation import ContractRules, run_rules
from fpmcore.validate.integers import parse_line
from fpmcore.validate.measured_values import (
    ABSENT,
    PRODUCER_REDUCTIONS,
    TRIMMED_MEAN,
    estimate_method,
    get,
    is_int,
    is_number,
    js,
    plain,
)
from fpmcore.validate.protocol import check_seeded_tokens_with_evidence, check_warmup_recorded, producer_runtime_rule
from fpmcore.validate.repetition_evidence import (
    RepetitionRules,
    bind_repetition_line,
    check_no_unbound_repetition_lines,
    check_repetition_sidecar,
    reduced_indices,
    repetition_line_rule,
)
from fpmcore.validate.rows import KV_SEED_REGIME, measurement

LABEL = "engine-steps"
PRODUCER_FIELDS = ("name", "runtime", "plugin", "timing_boundary", "files")
MIN_MEASURED = 3


@checks("A-18")
def cell_has_measurement_protocol(view: CellView) -> Diagnostic | None:
    """A-18: an engine-steps cell requires ``measurement_protocol``."""
    for r in view.ranks:
        if r.protocol is ABSENT:
            return Diagnostic("A-18", f"{LABEL} result lacks measurement_protocol: {r.path}", r.path)
    return None


def _file_difference(want: Any, found: Any) -> tuple[str, Any, Any] | None:
    """The first installed file whose record differs: ``(field, expected, found)``."""
    if not isinstance(found, list):
        return "files", js(want), js(found)
    for i, w in enumerate(want):
        f = found[i] if i < len(found) else ABSENT
        if f != w:
            label = f"files[{w['path']}]"
            if get(f, "path") == w["path"]:
                return label, w["sha256"], get(f, "sha256")
            return label, js(w), js(f)
    if len(found) > len(want):
        return f"files[{plain(get(found[len(want)], 'path'))}]", "absent", js(found[len(want)])
    return None


@checks("A-21")
def producer_is_installed_runtime_plugin(view: CellView) -> Diagnostic | None:
    """A-21: the producer record is the installed runtime plugin's, and it measured the cell's model."""
    expected = view.producer
    for r in view.ranks:
        prod = get(r.doc, "producer")

        def bad(field: str, want: Any, v: Any, r: RankView = r) -> Diagnostic:
            return Diagnostic(
                "A-21", f"{LABEL} result lacks valid producer.{field}: expected {plain(want)}, found {plain(v)}: "
                        f"{r.path}", r.path,
            )  # fmt: skip

        if not isinstance(expected, Mapping) or "error" in expected:
            why = expected.get("error") if isinstance(expected, Mapping) else "no expected producer"
            return bad("name", f"the producer of an installed runtime plugin ({why})", get(prod, "name"))
        for field in PRODUCER_FIELDS:
            want, v = expected[field], get(prod, field)
            if field == "files":
                diff = _file_difference(want, v)
                if diff is not None:
                    return bad(*diff)
            elif v != want or not isinstance(v, str):
                return bad(field, want, v)
        want_sha = view.identity.model_config_sha256
        v = get(prod, "model_config_sha256")
        if v != want_sha:
            return bad("model_config_sha256", want_sha, v)
        cd = get(prod, "checkpoint_dir")
        if not (isinstance(cd, str) and cd):
            return bad("checkpoint_dir", "a non-empty string", cd)
    return None


def provenance_pin(view: CellView) -> str:
    """The runtime pin the collector provenance records (``backend``, ``backend_version``)."""
    backend = view.provenance_value("runtime", "backend")
    version = view.provenance_value("runtime", "backend_version")
    return str(RuntimePin(plain(version), plain(backend)))


#: A-22: ``producer.runtime`` is the collector provenance's runtime.
producer_runs_collector_runtime = producer_runtime_rule(LABEL, "runtime", provenance_pin)


def protocol_counts(view: CellView) -> RepetitionRules | None:
    """The repetition counts the protocol producer declares (A-23 checked them), as sidecar rules."""
    prod = get(view.ranks[0].protocol, "producer") if view.ranks else ABSENT
    w, m, x = (get(prod, k) for k in ("warmup_repetitions", "measured_repetitions", "max_rejected_repetitions"))
    p = get(prod, "passes")
    if not (is_int(w) and is_int(m) and is_int(x)):
        return None
    return RepetitionRules(warmups=w, measured=m, max_rejected=x, rejected_first=False,
                           passes=p if is_int(p) and p > 1 else None)  # fmt: skip


def protocol_bound(view: CellView) -> ContentionBound | None:
    """The contention bound the protocol producer declares (A-23 checked it)."""
    prod = get(view.ranks[0].protocol, "producer") if view.ranks else ABSENT
    return ContentionBound.from_json(get(prod, "contention_bound"))


@checks("A-23")
def protocol_is_seeded_with_evidence_and_producer(view: CellView) -> Diagnostic | None:
    """A-23: seeded tokens, execution evidence present, this contract's protocol producer field by field."""
    for r in view.ranks:
        p = r.protocol

        def bad(field: str, want: str, v: Any, r: RankView = r) -> Diagnostic:
            return Diagnostic("A-23", f"measurement_protocol.{field} expected {want}, found {v}: {r.path}", r.path)

        opening = check_seeded_tokens_with_evidence(r)
        if opening is not None:
            return opening
        prod = get(p, "producer")
        if not isinstance(prod, dict):
            return bad("producer.name", PROTOCOL_NAME, plain(prod))
        v = get(prod, "reduction")
        if v not in PRODUCER_REDUCTIONS.values() or not isinstance(v, str):
            return bad("producer.reduction", " or ".join(PRODUCER_REDUCTIONS.values()), plain(v))
        fixed = (("name", PROTOCOL_NAME), ("reduction", v), ("state_protocol", STATE_PROTOCOL),
                 ("timing_boundary", get(get(r.doc, "producer"), "timing_boundary")))  # fmt: skip
        for field, want in fixed:
            v = get(prod, field)
            if v != want or not isinstance(v, str):
                return bad(f"producer.{field}", plain(want), plain(v))
        for field, low in (("warmup_repetitions", 0), ("measured_repetitions", MIN_MEASURED),
                           ("max_rejected_repetitions", 0)):  # fmt: skip
            v = get(prod, field)
            if not (is_int(v) and v >= low):
                return bad(f"producer.{field}", f"an integer ≥ {low}", plain(v))
        for field in ("repetition_spacing_seconds", "retake_pause_seconds", "prefill_idle_seconds"):
            v = get(prod, field)
            if field == "prefill_idle_seconds" and v is ABSENT:  # a run collected before the prefill idle
                continue
            if not (type(v) in (int, float) and 0 <= v < 3600):
                return bad(f"producer.{field}", "a number of seconds ≥ 0", plain(v))
        m, passes = get(prod, "measured_repetitions"), get(prod, "passes")
        if not (is_int(passes) and 1 <= passes <= m):
            return bad("producer.passes", f"an integer from 1 to the measured repetitions ({plain(m)})", plain(passes))
        if ContentionBound.from_json(get(prod, "contention_bound")) is None:
            return bad("producer.contention_bound", "{max_wait_fraction, max_foreign_fraction} in (0, 1]",
                       js(get(prod, "contention_bound")))  # fmt: skip
        v = get(prod, "max_contended_samples")
        if not (is_int(v) and v >= 0):
            return bad("producer.max_contended_samples", "an integer ≥ 0", plain(v))
        v = get(prod, "pass_disagreement_bound")
        if not (type(v) in (int, float) and v > 0):
            return bad("producer.pass_disagreement_bound", "a fraction > 0", plain(v))
        v = get(prod, "decode_lead_in_steps")
        if v is not ABSENT and not (is_int(v) and 1 <= v <= MAX_DECODE_LEAD_IN):  # absent: a run before the lead-in
            return bad("producer.decode_lead_in_steps", f"an integer from 1 to {MAX_DECODE_LEAD_IN}", js(v))
        allowed = {f for f, _ in fixed} | {"warmup_repetitions", "measured_repetitions", "max_rejected_repetitions",
                                           "repetition_spacing_seconds", "retake_pause_seconds", "passes",
                                           "contention_bound", "max_contended_samples",
                                           "pass_disagreement_bound", "prefill_idle_seconds",
                                           "decode_lead_in_steps"}  # fmt: skip
        for key in prod:
            if key not in allowed:
                return bad(f"producer.{key}", "absent", plain(prod[key]))
    return None


@checks("A-32")
def measured_repetitions_recorded(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-32: the protocol's measured repetitions as raw samples, expected as many, ``adjacent_upper_median``
    (a point whose passes disagreed was re-measured once: its re-measuring visit's samples come on top,
    A-39 checks the visit)."""
    counts = protocol_counts(view)
    m = counts.measured if counts is not None else ABSENT
    bm = measurement(row)
    raw, exp = get(bm, "raw_fpms"), get(bm, "expected_internal_samples")
    method = get(get(bm, "estimate"), "method")
    prod = get(view.ranks[0].protocol, "producer") if view.ranks else ABSENT
    want_method = estimate_method(get(prod, "reduction"))
    n = len(raw) if isinstance(raw, list) else ABSENT
    want = {m}
    if counts is not None and counts.passes is not None:
        want.add(counts.measured + counts.share(counts.passes))
    idx = get(get(bm, "estimate"), "raw_sample_indices")
    if (want_method == TRIMMED_MEAN and counts is not None and isinstance(raw, list) and isinstance(idx, list)
            and all(is_number(get(x, "wall_time")) for x in raw)):  # fmt: skip
        chosen = reduced_indices([x["wall_time"] for x in raw], counts.measured, counts.passes or 1, want_method)
        if idx != chosen:
            return Diagnostic(
                "A-32",
                f"benchmark_measurement reduces other samples than the protocol's: expected raw_sample_indices "
                f"{js(chosen)}, found {js(idx)}" + rank.row_suffix(row),
                rank.path,
            )
    if not (method == want_method and n in want and is_int(exp) and exp == n):
        return Diagnostic(
            "A-32",
            f"benchmark_measurement does not hold the producer's {plain(m)} measured repetitions with their "
            f"{want_method} estimate: method={plain(method)}, raw_samples={plain(n)}, "
            f"expected_internal_samples={plain(exp)}" + rank.row_suffix(row),
            rank.path,
        )
    return None


@checks("A-43")
def repetitions_clean_under_bound(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-43: every measured repetition of the row's sidecar line records what the machine did to it
    (:mod:`fpmcore.collect.contention`) and was clean under the protocol's bound; every ``contended`` one was
    contended under it (it was retaken, and it is not a raw sample)."""
    i = rank.bound.get(k)
    bound = protocol_bound(view)
    if i is None or rank.sidecar is None or bound is None:
        return None
    obj = parse_line(rank.sidecar[i])
    reps = get(obj, "repetitions")
    if not isinstance(reps, list):
        return None
    bid = plain(get(get(row, "point"), "benchmark_id"))
    for j, rep in enumerate(reps):
        role = get(rep, "role")
        if role not in ("measured", "contended"):
            continue
        seen, wall = Contention.from_json(get(rep, "contention")), get(rep, "wall_time")
        if seen is None or not is_number(wall):
            return Diagnostic(
                "A-43", f"repetition {j} of benchmark_id={bid} records no contention (cpu_seconds, wait_seconds, "
                        f"foreign_seconds): found {js(get(rep, 'contention'))}: {rank.path}", rank.path,
            )  # fmt: skip
        if bound.contended(seen, wall) != (role == "contended"):
            state = "contended" if role == "measured" else "clean"
            return Diagnostic(
                "A-43", f"{role} repetition {j} of benchmark_id={bid} was {state} ({bound.describe(seen, wall)}; "
                        f"bound: wait {bound.max_wait_fraction:.0%}, others' CPU {bound.max_foreign_fraction:.0%}): "
                        f"{rank.path}", rank.path,
            )  # fmt: skip
    return None


RULES = ContractRules(
    name=CONTRACT.name,
    artifact=(
        ("A-18", cell_has_measurement_protocol), ("A-21", producer_is_installed_runtime_plugin), ("A-22", producer_runs_collector_runtime), ("A-23", protocol_is_seeded_with_evidence_and_producer),
        ("A-25", check_warmup_recorded), ("A-28", check_repetition_sidecar),
    ),
    rows=(
        ("A-32", measured_repetitions_recorded), KV_SEED_REGIME, ("A-38", bind_repetition_line),
        ("A-39", repetition_line_rule(protocol_counts)), ("A-43", repetitions_clean_under_bound),
    ),
    rank_end=(("A-38", check_no_unbound_repetition_lines),),
    owns_protocol_producer=True,
    interleaved_passes=True,
)  # fmt: skip


def validate(
    contract: ProducerContract,
    cell: Mapping[str, Any],
    files: Mapping[str, Any],
    plan: Mapping[str, Any],
    **hook_arguments: Any,
) -> list[Diagnostic] | None:
    """``fpm_validate_artifact`` of this contract: rules A-15 … A-40 (05 §8), the first refusal or ``[]``.

    ``hook_arguments`` are the hook's ``attempt``, ``owners`` and ``producer``.
    """
    if contract.name != CONTRACT.name:
        return None
    view = CellView.from_hook(contract, cell, files, plan, **hook_arguments)
    if not view.ranks:
        return [
            Diagnostic("A-3", f"native rank artifacts do not cover dp ranks: found []: {view.attempt}", view.attempt)
        ]
    return run_rules(view, RULES)
