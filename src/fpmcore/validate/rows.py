"""Row rules of every cell: A-29 … A-35, A-37 and A-40 (05 §4.2, §4.3, §7.4, §8.4).

They run rank by rank (ascending) and, within a rank, row by row in
``results`` order, all row rules of a row before the next row (05 §8).  A-37
(``kv_seed_regime`` follows its point, 05 §7.4) is not a general rule: a
contract that publishes cached rows ``real_kv`` adds :data:`KV_SEED_REGIME`
to its rules; A-41 (publication) labels rows by the same table.
"""

from __future__ import annotations

import functools
import math
from operator import itemgetter
from typing import Any

from fpmcore.documents.rules_catalogue import checks
from fpmcore.host.hooktypes import Diagnostic
from fpmcore.validate.cell import HEX64, CellView, RankView, RowRule, RowSuffix
from fpmcore.validate.measured_values import (
    ABSENT,
    TRIMMED_MEAN,
    UPPER_MEDIAN,
    canonical_digest,
    close,
    get,
    is_int,
    is_number,
    js,
    plain,
    point_key,
    reduce_samples,
    same,
)

#: ``benchmark_sample.timing.basis`` of a raw sample (05 §4.3).
TIMING_BASES = ("schedule_to_output", "inter_output")
#: ``benchmark_sample.cudagraph.status`` of a raw sample (05 §4.3).
GRAPH_STATUSES = ("observed", "unavailable")
#: ``benchmark_measurement.prompts.status`` (05 §4.2).
PROMPT_STATUSES = ("recorded", "unavailable")


def measurement(row: Any) -> Any:
    """The ``benchmark_measurement`` of a row's retained FPM, :data:`ABSENT` if none."""
    try:
        fpm = row["fpms"][0]
    except (KeyError, IndexError, TypeError):
        return ABSENT
    return fpm.get("benchmark_measurement", ABSENT) if fpm.__class__ is dict else ABSENT


def raw_fpms(row: Any) -> list[Any]:
    """The raw FPMs of a row's measurement, ``[]`` if none."""
    bm = measurement(row)
    raw = bm.get("raw_fpms") if bm.__class__ is dict else None
    return raw if raw.__class__ is list else []


def _row_point_key(view: CellView, point: dict[str, Any]) -> str:
    """``point_key`` of a row's point, computed once per benchmark id for points equal on all ranks."""
    bid = point.get("benchmark_id")
    hit = view.point_keys.get(bid) if type(bid) is int and point.get("partition") is None else None
    if hit is not None and hit[0] == point:
        return hit[1]
    key = point_key(point)
    if type(bid) is int:
        view.point_keys[bid] = (point, key)
    return key


@checks("A-29")
def measurement_identity_matches(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-29: ``benchmark_measurement`` identity (``schema_version``, ``dp_rank``, ``point_key``)."""
    bm = measurement(row)
    if rank.protocol is ABSENT:
        if bm is not ABSENT:
            return Diagnostic(
                "A-29", "benchmark_measurement has no measurement_protocol" + rank.row_suffix(row), rank.path
            )
        return None
    point = get(row, "point")
    pk = _row_point_key(view, point) if isinstance(point, dict) else ABSENT
    if bm.__class__ is dict:  # fast path: the three values exactly
        sv, dr, key = bm.get("schema_version"), bm.get("dp_rank"), bm.get("point_key")
        if (
            sv.__class__ is int and sv == 1 and dr.__class__ is int and dr == rank.rank
            and key.__class__ is str and key == pk
        ):  # fmt: skip
            return None
    for field, want in (("schema_version", 1), ("dp_rank", rank.rank), ("point_key", pk)):
        v = get(bm, field)
        if v is ABSENT or not same(v, want):
            return Diagnostic(
                "A-29",
                f"benchmark_measurement has missing or inconsistent rank/point identity: {field} expected "
                f"{plain(want)}, found {plain(v)}" + rank.row_suffix(row),
                rank.path,
            )
    return None


@checks("A-30")
def preparation_matches_grid(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-30: ``preparation``: the artifact's grid digest, the row's position and regime."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    prep = get(bm, "preparation")
    if prep.__class__ is dict:  # fast path: the three values exactly
        g, regime = prep.get("grid_digest"), row.get("kv_seed_regime")
        cpb, pr = prep.get("completed_points_before"), prep.get("kv_seed_regime")
        if (
            g.__class__ is str and g == rank.doc["grid_digest"] and cpb.__class__ is int and cpb == k
            and pr.__class__ is str and pr == regime
        ):  # fmt: skip
            return None
    for field, want in (
        ("grid_digest", get(rank.doc, "grid_digest")),
        ("completed_points_before", k),
        ("kv_seed_regime", get(row, "kv_seed_regime")),
    ):
        v = get(prep, field)
        if not same(v, want):
            return Diagnostic(
                "A-30",
                f"benchmark_measurement has inconsistent grid/order/kv preparation: {field} expected {plain(want)}, "
                f"found {plain(v)}" + rank.row_suffix(row),
                rank.path,
            )
    return None


@checks("A-31")
def prompt_evidence_well_formed(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-31: prompt evidence well formed; ``unavailable`` is a reported gap, not a refusal."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    pr = get(bm, "prompts")
    status, sha, reqs = get(pr, "status"), get(pr, "sha256"), get(pr, "requests")

    def bad(detail: str) -> Diagnostic:
        return Diagnostic(
            "A-31", f"benchmark_measurement has malformed prompt evidence: {detail}" + rank.row_suffix(row), rank.path
        )

    if status == "unavailable":
        if sha is not None or reqs != []:
            return bad(f"status=unavailable, sha256={plain(sha)}, requests={js(reqs)}")
        return None
    if status not in PROMPT_STATUSES:  # neither recorded nor unavailable
        return bad(f"status={plain(status)}")
    if not isinstance(reqs, list):
        return bad(f"requests={js(reqs)}")
    for i, req in enumerate(reqs):
        slot, n, h = get(req, "slot"), get(req, "num_tokens"), get(req, "sha256")
        if not (is_int(slot) and slot == i and is_int(n) and n >= 0 and isinstance(h, str) and HEX64.match(h)):
            return bad(f"requests[{i}]={js(req)}")
    agg = canonical_digest(reqs)
    if sha != agg:
        return Diagnostic(
            "A-31",
            f"recorded prompt evidence aggregate hash disagrees with requests: expected {agg}, found {plain(sha)}"
            + rank.row_suffix(row),
            rank.path,
        )
    return None


@checks("A-33")
def raw_samples_well_formed(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-33: raw samples: count, identity, sample and forward indices, timing, graph status, wall time."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    sfx = RowSuffix(rank, row)
    raw, exp = get(bm, "raw_fpms"), get(bm, "expected_internal_samples")
    fpm = row["fpms"][0]
    n = len(raw) if isinstance(raw, list) else ABSENT
    if (
        not (isinstance(raw, list) and raw and is_int(exp) and exp >= 1 and exp >= len(raw))
        or "benchmark_sample" in fpm
    ):
        return Diagnostic(
            "A-33",
            f"benchmark_measurement has malformed internal sample evidence: raw_samples={plain(n)}, "
            f"expected_internal_samples={plain(exp)}" + sfx,
            rank.path,
        )
    bid, worker = get(get(row, "point"), "benchmark_id"), get(fpm, "worker_id")
    if view.rules is not None and view.rules.interleaved_passes:  # rising within the row, unique in the rank
        rank.last_forward = None
        d = _shared_forward(rank, raw, sfx)
        if d is not None:
            return d
    passed = _raw_samples_pass(raw, bid, rank.rank, worker, rank.last_forward)
    if passed is not None:
        rank.last_forward, started = passed
        # every sample observed its graph dispatch; with a start time on each, A-36 has nothing to check
        rank.scratch["started_and_observed"] = k if started else None
        return None
    for i, s in enumerate(raw):
        w = get(s, "wall_time")
        if not is_number(w) or w <= 0:
            return Diagnostic(
                "A-33", f"raw sample {i} has a non-positive or non-finite wall_time: {plain(w)}" + sfx, rank.path
            )
        c, d, wk = get(s, "counter_id"), get(s, "dp_rank"), get(s, "worker_id")
        if not (is_int(c) and c == bid and is_int(d) and d == rank.rank and isinstance(wk, str) and wk == worker):
            return Diagnostic(
                "A-33",
                f"raw sample {i} has a different point/rank identity: counter_id={plain(c)}, dp_rank={plain(d)}, "
                f"worker_id={plain(wk)}" + sfx,
                rank.path,
            )
        bs = get(s, "benchmark_sample")
        si, fi = get(bs, "sample_index"), get(bs, "forward_index")
        prev = rank.last_forward
        if not (is_int(si) and si == i and is_int(fi) and fi >= 0 and (prev is None or fi > prev)):
            return Diagnostic(
                "A-33",
                f"raw sample {i} has an invalid sample/forward index: sample_index={plain(si)}, "
                f"forward_index={plain(fi)}, "
                f"previous forward_index={plain(prev)}" + sfx,
                rank.path,
            )
        rank.last_forward = fi
        t = get(bs, "timing")
        basis, start, end = get(t, "basis"), get(t, "start_monotonic"), get(t, "end_monotonic")
        if basis not in TIMING_BASES or not isinstance(basis, str) or not is_number(end):
            return Diagnostic("A-33", f"raw sample {i} has no timing interval: basis={plain(basis)}" + sfx, rank.path)
        if start is not ABSENT and start is not None:
            if not is_number(start) or start > end or not close(end - start, w, rel=1e-9, abs_=1e-9):
                return Diagnostic(
                    "A-33",
                    f"raw sample {i} contradicts its timing interval: start={plain(start)}, end={plain(end)}, "
                    f"wall_time={plain(w)}" + sfx,
                    rank.path,
                )
        g = get(bs, "cudagraph")
        st = get(g, "status")
        vals = [get(g, f) for f in ("runtime_mode", "num_unpadded_tokens", "num_padded_tokens", "num_paddings")]
        if st == "observed":
            mode, unp, pad, pads = vals
            if not (
                isinstance(mode, str)
                and mode
                and is_int(unp)
                and is_int(pad)
                and is_int(pads)
                and pad >= unp >= 0
                and pads == pad - unp
            ):
                return Diagnostic("A-33", f"raw sample {i} has invalid observed graph data: {js(g)}" + sfx, rank.path)
        elif st == "unavailable":
            if any(v is not None for v in vals):
                return Diagnostic(
                    "A-33",
                    f"raw sample {i} contradicts its graph observation status: status={plain(st)}" + sfx,
                    rank.path,
                )
        elif st not in GRAPH_STATUSES:
            return Diagnostic(
                "A-33", f"raw sample {i} contradicts its graph observation status: status={plain(st)}" + sfx, rank.path
            )
    return None


_INF = math.inf
_INT_TYPES = frozenset((int,))


def _shared_forward(rank: RankView, raw: list[Any], sfx: Any) -> Diagnostic | None:
    """A-33 for interleaved passes: no forward index of a raw sample is another sample's in the rank."""
    seen: set[int] = rank.scratch.setdefault("forward_indices", set())
    for i, s in enumerate(raw):
        fi = get(get(s, "benchmark_sample"), "forward_index")
        if is_int(fi):
            if fi in seen:
                return Diagnostic(
                    "A-33", f"raw sample {i} has an invalid sample/forward index: forward_index={fi} is another "
                            "raw sample's" + sfx, rank.path,
                )  # fmt: skip
            seen.add(fi)
    return None


_A33_RAW = itemgetter("wall_time", "counter_id", "dp_rank", "worker_id", "benchmark_sample")
_A33_SAMPLE = itemgetter("sample_index", "forward_index", "timing", "cudagraph")
_A33_TIMING = itemgetter("basis", "end_monotonic")
_A33_GRAPH = itemgetter("status", "runtime_mode", "num_unpadded_tokens", "num_padded_tokens", "num_paddings")


def _raw_samples_pass(
    raw: list[Any], bid: Any, rank_id: int, worker: Any, last: int | None
) -> tuple[int | None, bool] | None:
    """The fast path of A-33: ``(last forward index, every sample has a start time)`` when every
    raw sample passes with an observed graph dispatch, else ``None`` (then the rule's own loop
    finds the diagnostic)."""
    if type(bid) is not int or type(worker) is not str:
        return None
    started = True
    isclose = math.isclose
    try:
        for i, s in enumerate(raw):
            w, c, d, wk, bs = _A33_RAW(s)
            tw = type(w)
            if not ((tw is float or tw is int) and 0 < w < _INF):
                return None
            if type(c) is not int or c != bid or type(d) is not int or d != rank_id or wk != worker:
                return None
            si, fi, t, g = _A33_SAMPLE(bs)
            if type(si) is not int or si != i or type(fi) is not int or fi < 0 or (last is not None and fi <= last):
                return None
            basis, end = _A33_TIMING(t)
            te = type(end)
            if basis not in TIMING_BASES or not ((te is float or te is int) and -_INF < end < _INF):
                return None
            start = t.get("start_monotonic")
            if start is None:
                started = False
            else:
                ts = type(start)
                if not ((ts is float or ts is int) and start <= end):
                    return None
                gap = end - start - w
                if not -1e-9 <= gap <= 1e-9 and not isclose(end - start, w, rel_tol=1e-9, abs_tol=1e-9):
                    return None
            st, mode, unp, pad, pads = _A33_GRAPH(g)
            if not (st == "observed" and type(mode) is str and mode and type(unp) is int and type(pad) is int
                    and type(pads) is int and pad >= unp >= 0 and pads == pad - unp):  # fmt: skip
                return None
            last = fi
    except (KeyError, TypeError, AttributeError):
        return None
    return last, started


REDUCTIONS = ("single_step", "last_step", UPPER_MEDIAN, TRIMMED_MEAN)


@functools.lru_cache(maxsize=256)
def _reduction_indices(method: str, count: int, expected: int) -> tuple[int, ...] | None:
    want = reduction_indices(method, count, expected)
    return None if want is None else tuple(want)


def reduction_indices(method: str, count: int, expected: int) -> list[int] | None:
    """``raw_sample_indices`` of a reduction, or ``None`` when its preconditions fail (05 §4.2)."""
    if method == "single_step" and count == 1:
        return [0]
    if method == "last_step" and expected > 1 and count == expected:
        return [count - 1]
    if method in (UPPER_MEDIAN, TRIMMED_MEAN) and expected > 2 and count > 1:
        return list(range(1, count))
    return None


def _some_of(idx: Any, want: tuple[int, ...]) -> bool:
    """Whether ``idx`` is a non-empty ascending list of integers taken from ``want``."""
    if idx.__class__ is not list or not idx or not _INT_TYPES.issuperset(map(type, idx)):
        return False
    allowed = set(want)
    return all(i in allowed for i in idx) and all(a < b for a, b in zip(idx, idx[1:], strict=False))


@checks("A-34")
def reduction_retains_its_sample(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-34: the reduction method, its indices and the retained wall time (the upper median, or the trimmed
    mean of :func:`fpmcore.validate.measured_values.trimmed_mean`)."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    sfx = RowSuffix(rank, row)
    raw, exp = bm["raw_fpms"], bm["expected_internal_samples"]
    est = get(bm, "estimate")
    method, idx = get(est, "method"), get(est, "raw_sample_indices")
    want = _reduction_indices(method, len(raw), exp) if method.__class__ is str and exp.__class__ is int else None
    if want is None:
        return Diagnostic(
            "A-34",
            f"benchmark_measurement has inconsistent reduction method: method={plain(method)}, "
            f"raw_samples={len(raw)}, expected_internal_samples={exp}" + sfx,
            rank.path,
        )
    if method == TRIMMED_MEAN and _some_of(idx, want):
        want = tuple(idx)  # the mean may leave out a re-measured point's odd pass (the producer's contract says which)
    if idx.__class__ is not list or tuple(idx) != want or not _INT_TYPES.issuperset(map(type, idx)):
        return Diagnostic(
            "A-34",
            f"benchmark_measurement has inconsistent raw sample indices: expected {js(list(want))}, found {js(idx)}"
            + sfx,
            rank.path,
        )
    reduced = reduce_samples(method, [raw[i]["wall_time"] for i in want])
    retained = get(row["fpms"][0], "wall_time")
    if not is_number(retained) or not close(retained, reduced):
        return Diagnostic(
            "A-34",
            f"benchmark_measurement reduction disagrees with retained timing: retained={plain(retained)}, "
            f"reduced={js(reduced)}" + sfx,
            rank.path,
        )
    return None


def _warmup_prefix(rank: RankView, records: list[Any]) -> tuple[list[int], list[int]]:
    """Per prefix length ``n``: the largest end among the first ``n`` records, and how many of
    them are clean (finished with an integer end); kept per rank."""
    cached: tuple[list[int], list[int]] | None = rank.scratch.get("warmup_prefix")
    if cached is None:
        ends, clean = [-1], [0]
        ok = True
        top = -1
        for rec in records:
            end: Any
            if rec.__class__ is dict:
                end, status = rec.get("forward_index_end"), rec.get("status")
            else:
                end, status = get(rec, "forward_index_end"), get(rec, "status")
            good = end.__class__ is int
            ok = ok and good and status != "running"
            if good and end > top:
                top = end
            ends.append(top)
            clean.append(len(clean) if ok else clean[-1])
        cached = rank.scratch["warmup_prefix"] = (ends, clean)
    return cached


@checks("A-35")
def warmups_counted_before_first_sample(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-35: ``warmup_records_before`` counts finished warm-up records that end before the first raw sample."""
    bm = measurement(row)
    if bm is ABSENT:
        return None
    sfx = RowSuffix(rank, row)
    ev = get(rank.doc, "warmup_evidence")
    status, records = get(ev, "status"), get(ev, "records")
    wrb = get(get(bm, "preparation"), "warmup_records_before")
    if status == "recorded" and isinstance(records, list):
        if not (is_int(wrb) and 0 <= wrb <= len(records)):
            return Diagnostic(
                "A-35", f"warmup reference is invalid: warmup_records_before={plain(wrb)}" + sfx, rank.path
            )
        first = bm["raw_fpms"][0]["benchmark_sample"]["forward_index"]
        ends, clean = _warmup_prefix(rank, records)
        if clean[wrb] == wrb and ends[wrb] <= first:
            return None
        for j in range(wrb):
            rec = records[j]
            end = get(rec, "forward_index_end")
            if get(rec, "status") == "running" or not is_int(end) or end > first:
                return Diagnostic(
                    "A-35",
                    f"warmup reference overlaps measurement: record {j} ends at forward {plain(end)} after the first "
                    f"raw sample {first}" + sfx,
                    rank.path,
                )
    elif wrb is not None:
        return Diagnostic("A-35", f"warmup reference is invalid: warmup_records_before={plain(wrb)}" + sfx, rank.path)
    return None


def expected_workload(point: Any) -> list[tuple[str, Any]]:
    """The ``scheduled_requests`` values a point's forward must show (A-40), in check order."""
    b, tp, kv = get(point, "batch_size"), get(point, "total_prefill_tokens"), get(point, "total_kv_read_tokens")
    if get(point, "point_type") == "decode":
        return [("num_decode_requests", b), ("sum_decode_kv_tokens", kv), ("num_prefill_requests", 0)]
    return [
        ("num_prefill_requests", b),
        ("sum_prefill_tokens", tp),
        ("sum_prefill_kv_tokens", kv),
        ("num_decode_requests", 0),
    ]


def _workloads_match(fpms: list[Any], want: list[tuple[str, Any]]) -> bool:
    """The fast path of A-40: every FPM's ``scheduled_requests`` holds the wanted integers."""
    try:
        for f in fpms:
            sr = f["scheduled_requests"]
            for field, v in want:
                x = sr[field]
                if x.__class__ is not int or x != v:
                    return False
    except (KeyError, TypeError):
        return False
    return True


@checks("A-40")
def workloads_equal_point(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-40 [BEYOND]: every raw sample's workload, and the retained FPM's, equals its point."""
    want = expected_workload(get(row, "point"))
    raw = raw_fpms(row)
    if _workloads_match([*raw, row["fpms"][0]], want):
        return None
    sfx = RowSuffix(rank, row)
    for i, s in enumerate(raw):
        sr = get(s, "scheduled_requests")
        for field, v in want:
            got = get(sr, field)
            if not is_int(got) or got != v:
                return Diagnostic(
                    "A-40",
                    f"raw sample {i} workload differs from its point: {field} expected {plain(v)}, found {plain(got)}"
                    + sfx,
                    rank.path,
                )
    sr = get(row["fpms"][0], "scheduled_requests")
    for field, v in want:
        got = get(sr, field)
        if not is_int(got) or got != v:
            return Diagnostic(
                "A-40",
                f"retained fpm workload differs from its point: {field} expected {plain(v)}, found {plain(got)}" + sfx,
                rank.path,
            )
    return None


def expected_regime(point: Any) -> str:
    """05 §7.4: ``real_kv`` for decode and cached prefill, ``not_applicable`` for a prefill without prefix."""
    if get(point, "point_type") == "decode":
        return "real_kv"
    kv = get(point, "total_kv_read_tokens")
    return "real_kv" if is_int(kv) and kv > 0 else "not_applicable"


@checks("A-37")
def kv_seed_regime_follows_point(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-37: the row's ``kv_seed_regime`` follows its point (05 §7.4)."""
    want, v = expected_regime(get(row, "point")), get(row, "kv_seed_regime")
    if v != want:
        return Diagnostic(
            "A-37",
            f"kv_seed_regime does not follow its point: expected {want}, found {plain(v)}" + rank.row_suffix(row),
            rank.path,
        )
    return None


#: A-37 as a contract adds it to its row rules (``ContractRules(rows=(KV_SEED_REGIME, …))``).
KV_SEED_REGIME: tuple[str, RowRule] = ("A-37", kv_seed_regime_follows_point)

GENERAL_ROW_RULES: tuple[tuple[str, RowRule], ...] = (
    ("A-29", measurement_identity_matches), ("A-30", preparation_matches_grid), ("A-31", prompt_evidence_well_formed), ("A-33", raw_samples_well_formed),
    ("A-34", reduction_retains_its_sample), ("A-35", warmups_counted_before_first_sample), ("A-40", workloads_equal_point),
)  # fmt: skip
