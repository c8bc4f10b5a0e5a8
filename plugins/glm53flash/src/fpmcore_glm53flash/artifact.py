"""The GLM-5.3-Flash producer contract ``glm53flash_native_graph_policy`` (05 §7, §8).

A GLM cell (Engram residency ``none``, 05 §6.3) is read with the general rules
of :mod:`fpmcore.validate` plus the rules below, all in numeric order:

* artifact level: A-18 (a protocol is required), A-21 (the producer record
  against the producer files of this installation, :mod:`.artifact_producer`),
  A-22 (the producer's vLLM is the collector's runtime), A-23 (seeded tokens,
  execution evidence, the exact protocol producer), A-25 (recorded warm-ups),
  A-26/A-27 (the Mamba prefill checkpoint across ranks and against the plan),
  A-28 (the repetition-evidence sidecar's digest, newline and record count);
* row level: A-32 (ten measured repetitions, ``expected_internal_samples`` 10,
  ``adjacent_upper_median``), A-36 (a start time and an observed CUDA graph
  dispatch on every raw sample), A-37 (``kv_seed_regime`` per 05 §7.4, the
  host's rule), A-38
  (each row bound to one sidecar line by its SHA-256, compared as multisets)
  and A-39 (the bound line agrees with its row).
"""

from __future__ import annotations

import re
from typing import Any

from fpmcore.plugin_api import (
    ABSENT,
    KV_SEED_REGIME,
    CellView,
    ContractRules,
    Diagnostic,
    RankView,
    RepetitionRules,
    bind_repetition_line,
    check_no_unbound_repetition_lines,
    check_repetition_sidecar,
    check_seeded_tokens_with_evidence,
    check_warmup_recorded,
    checks,
    get,
    is_int,
    is_number,
    js,
    plain,
    plan_benchmark_points,
    producer_runtime_rule,
    repetition_line_rule,
    row_measurement,
    row_raw_fpms,
)
from fpmcore_glm53flash import CONTRACT
from fpmcore_glm53flash.artifact_producer import (
    INTERNAL_POSITIONS,
    PRODUCER_NAME,
    PROTOCOL_PRODUCER,
    expected_producer_record,
    producer_files,
)

LABEL = "native glm-5.3-flash"
MEASURED = 10
WARMUPS = 5
MAX_REJECTED = 10
METHOD = "adjacent_upper_median"
_HEX40 = re.compile(r"[0-9a-f]{40}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


# -- artifact level -------------------------------------------------------------


@checks("A-18")
def cell_has_measurement_protocol(view: CellView) -> Diagnostic | None:
    """A-18 (GLM): a GLM cell requires ``measurement_protocol``."""
    for r in view.ranks:
        if r.protocol is ABSENT:
            return Diagnostic("A-18", f"{LABEL} result lacks measurement_protocol: {r.path}", r.path)
    return None


def _cell_value(view: CellView, key: str) -> Any:
    v = get(view.cell, key)
    return v if v is not ABSENT else get(view.plan, key)


@checks("A-21")
def producer_record_is_expected(view: CellView) -> Diagnostic | None:
    """A-21 (GLM): the producer record equals the expected one; model and revision equal the cell's.

    The expected digests come from the producer files of this installation
    (:mod:`.artifact_producer`); a digest whose file is not installed refuses
    every artifact at its field, naming the missing producer files.
    """
    shipped = producer_files()
    expected = expected_producer_record(shipped)

    def bad(field: str, want: Any, v: Any, path: str) -> Diagnostic:
        return Diagnostic(
            "A-21",
            f"{LABEL} result lacks valid producer.{field}: expected {plain(want)}, found {plain(v)}: {path}",
            path,
        )

    for r in view.ranks:
        prod = get(r.doc, "producer")
        for field, want in expected.items():
            v = get(prod, field)
            if want is None:  # the producer file is not installed: no value can be expected
                return bad(field, shipped.missing(field), v, r.path)
            if v != want or type(v) is not type(want):
                return bad(field, want, v, r.path)
        for field, form in (("model", None), ("model_revision", _HEX40)):
            want, v = _cell_value(view, field), get(prod, field)
            if isinstance(want, str):
                if v != want:
                    return bad(field, want, v, r.path)
            elif not (isinstance(v, str) and v and (form is None or form.match(v))):
                return bad(field, "a 40-hex revision" if form else "a model id", v, r.path)
        cd = get(prod, "checkpoint_dir")
        if not (isinstance(cd, str) and cd):
            return bad("checkpoint_dir", "a non-empty string", cd, r.path)
        cp = get(prod, "context_policy")
        mc = get(cp, "measured_context")
        ip = get(cp, "internal_positions")
        if not (
            isinstance(cp, dict)
            and set(cp) == {"measured_context", "internal_positions"}
            and is_int(mc)
            and mc >= 1
            and is_int(ip)
            and ip == INTERNAL_POSITIONS
        ):
            return bad(
                "context_policy",
                f'{{"internal_positions":{INTERNAL_POSITIONS},"measured_context":<integer ≥ 1>}}',
                cp,
                r.path,
            )
    return None


#: A-22 (GLM): ``producer.vllm_package_version`` equals the collector provenance runtime.
producer_runs_collector_runtime = producer_runtime_rule(
    LABEL, "vllm_package_version", lambda view: view.provenance_value("runtime", "backend_version")
)


@checks("A-23")
def protocol_is_seeded_with_evidence_and_producer(view: CellView) -> Diagnostic | None:
    """A-23 (GLM): seeded tokens, execution evidence present, the exact protocol producer."""
    for r in view.ranks:
        p = r.protocol

        def bad(field: str, want: str, v: Any, r: RankView = r) -> Diagnostic:
            return Diagnostic("A-23", f"measurement_protocol.{field} expected {want}, found {v}: {r.path}", r.path)

        opening = check_seeded_tokens_with_evidence(r)
        if opening is not None:
            return opening
        prod = get(p, "producer")
        if not isinstance(prod, dict):
            if prod is ABSENT:
                return bad("producer.name", PRODUCER_NAME, "absent")
            return bad("producer", js(PROTOCOL_PRODUCER), js(prod))
        for field, want in PROTOCOL_PRODUCER.items():
            v = get(prod, field)
            if v != want or type(v) is not type(want):
                return bad(f"producer.{field}", plain(want), plain(v))
        for key in prod:
            if key not in PROTOCOL_PRODUCER:
                return bad(f"producer.{key}", "absent", plain(prod[key]))
    return None


def _checkpoint(r: RankView) -> Any:
    return get(get(r.doc, "serving_config"), "mamba_prefill_checkpoint")


@checks("A-26")
def ranks_agree_on_checkpoint(view: CellView) -> Diagnostic | None:
    """A-26 (GLM): all ranks agree on ``serving_config.mamba_prefill_checkpoint``, presence included."""
    ref = view.ranks[0]
    a = _checkpoint(ref)
    for r in view.ranks[1:]:
        b = _checkpoint(r)
        if (a is ABSENT) != (b is ABSENT) or a != b:
            return Diagnostic(
                "A-26",
                f"native ranks disagree on serving_config.mamba_prefill_checkpoint: rank {ref.rank}={js(a)}, rank "
                f"{r.rank}={js(b)}: {r.path}",
                r.path,
            )
    return None


@checks("A-27")
def checkpoint_matches_plan(view: CellView) -> Diagnostic | None:
    """A-27 (GLM) [BEYOND]: a recorded checkpoint equals the plan's checkpoint record (04 G-25)."""
    want = plan_benchmark_points(view.plan).get("checkpoint", ABSENT)
    if want is ABSENT:
        return None
    for r in view.ranks:
        v = _checkpoint(r)
        if v is not ABSENT and (v != want or js(v) != js(want)):
            return Diagnostic(
                "A-27",
                f"serving_config.mamba_prefill_checkpoint differs from the frozen plan: expected {js(want)}, found "
                f"{js(v)}: {r.path}",
                r.path,
            )
    return None


# -- row level --------------------------------------------------------------------


@checks("A-32")
def ten_measured_repetitions(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-32 (GLM): ten raw samples, ``expected_internal_samples`` 10, ``adjacent_upper_median``."""
    bm = row_measurement(row)
    raw, exp = get(bm, "raw_fpms"), get(bm, "expected_internal_samples")
    method = get(get(bm, "estimate"), "method")
    n = len(raw) if isinstance(raw, list) else ABSENT
    if not (method == METHOD and n == MEASURED and is_int(exp) and exp == MEASURED):
        return Diagnostic(
            "A-32",
            "benchmark_measurement does not hold the producer's ten measured repetitions with their "
            "adjacent_upper_median "
            f"estimate: method={plain(method)}, raw_samples={plain(n)}, expected_internal_samples={plain(exp)}"
            + rank.row_suffix(row),
            rank.path,
        )
    return None


@checks("A-36")
def samples_have_start_and_graph_dispatch(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-36 (GLM): every raw sample has a numeric start time and an observed CUDA graph dispatch."""
    if rank.scratch.get("started_and_observed") == k:  # A-33's fast path saw a start and "observed" on each
        return None
    raw = row_raw_fpms(row)
    try:  # fast path
        if all(
            s["benchmark_sample"]["cudagraph"]["status"] == "observed"
            and is_number(s["benchmark_sample"]["timing"]["start_monotonic"])
            for s in raw
        ):
            return None
    except (KeyError, TypeError):
        pass
    for i, s in enumerate(raw):
        bs = get(s, "benchmark_sample")
        start = get(get(bs, "timing"), "start_monotonic")
        if not is_number(start):
            return Diagnostic(
                "A-36",
                f"benchmark_sample.timing.start_monotonic of raw sample {i} expected a number, found {plain(start)}"
                + rank.row_suffix(row),
                rank.path,
            )
        st = get(get(bs, "cudagraph"), "status")
        if st != "observed":
            return Diagnostic(
                "A-36",
                f"benchmark_sample.cudagraph.status of raw sample {i} expected observed, found {plain(st)}"
                + rank.row_suffix(row),
                rank.path,
            )
    return None


#: A-39 (GLM): five warm-ups, then the ten raw samples; at most ten rejections, all before the first warm-up.
REPETITIONS = RepetitionRules(warmups=WARMUPS, measured=MEASURED, max_rejected=MAX_REJECTED, rejected_first=True)


def line_problem(line: bytes, row: Any, rank: RankView) -> str | None:
    """What the sidecar line bound to ``row`` contradicts (A-39), or ``None``."""
    return REPETITIONS.line_problem(line, row, rank)


sidecar_line_agrees_with_row = repetition_line_rule(lambda view: REPETITIONS)


RULES = ContractRules(
    name=CONTRACT.name,
    artifact=(
        ("A-18", cell_has_measurement_protocol), ("A-21", producer_record_is_expected), ("A-22", producer_runs_collector_runtime), ("A-23", protocol_is_seeded_with_evidence_and_producer),
        ("A-25", check_warmup_recorded), ("A-26", ranks_agree_on_checkpoint), ("A-27", checkpoint_matches_plan),
        ("A-28", check_repetition_sidecar),
    ),
    rows=(
        ("A-32", ten_measured_repetitions), ("A-36", samples_have_start_and_graph_dispatch), KV_SEED_REGIME,
        ("A-38", bind_repetition_line), ("A-39", sidecar_line_agrees_with_row),
    ),
    rank_end=(("A-38", check_no_unbound_repetition_lines),),
    owns_protocol_producer=True,
)  # fmt: skip
