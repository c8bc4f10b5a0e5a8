"""Structure, merge invariants, plan and provenance: rules A-1 and A-3 … A-13 (05 §3, §5, §6.1, §8.1).

These artifact-level rules hold for every producer and run before the
contract is chosen (A-14); A-2 lives in :mod:`fpmcore.validate.integers`.
Each is evaluated for every rank artifact (ranks ascending) before the next.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from fpmcore.documents.rules_catalogue import checks
from fpmcore.documents.runtime_pin import FRAMEWORK
from fpmcore.host.hooktypes import Diagnostic
from fpmcore.validate.cell import ArtifactRule, CellView, benchmark_points, plan_digest
from fpmcore.validate.integers import integer_fields_are_integers
from fpmcore.validate.measured_values import (
    ABSENT,
    canonical_digest,
    close,
    first_difference,
    get,
    is_int,
    is_number,
    js,
    manifest_of,
    plain,
)


@checks("A-1")
def rank_artifacts_have_schema(view: CellView) -> Diagnostic | None:
    """A-1: every rank artifact is an object with ``schema_version`` 2 and ``artifact_type`` ``rank``."""
    for r in view.ranks:
        sv, at = get(r.doc, "schema_version"), get(r.doc, "artifact_type")
        if not (isinstance(r.doc, dict) and is_int(sv) and sv == 2 and at == "rank"):
            if not isinstance(r.doc, dict):
                sv = at = ABSENT
            return Diagnostic(
                "A-1",
                f"unsupported native rank artifact: schema_version={plain(sv)}, artifact_type={plain(at)}: {r.path}",
                r.path,
            )
    return None


@checks("A-3")
def one_artifact_per_dp_rank(view: CellView) -> Diagnostic | None:
    """A-3: one rank artifact per DP rank ``0 … dp.size−1``, ``dp.size`` equal on all ranks."""
    sizes = [get(get(r.doc, "dp"), "size") for r in view.ranks]
    ranks = [get(get(r.doc, "dp"), "rank") for r in view.ranks]
    size = sizes[0] if sizes else ABSENT
    ok = (
        bool(view.ranks)
        and is_int(size)
        and all(is_int(s) and s == size for s in sizes)
        and sorted(x for x in ranks if is_int(x)) == list(range(size))
        and all(is_int(x) for x in ranks)
    )
    if ok:
        view.sort_ranks()
        return None
    upper = f"{size - 1}" if is_int(size) else plain(size)
    found = js(sorted(x for x in ranks if is_int(x)))
    return Diagnostic(
        "A-3", f"native rank artifacts do not cover dp ranks 0..{upper}: found {found}: {view.attempt}", view.attempt
    )


@checks("A-4")
def artifacts_complete_and_usable(view: CellView) -> Diagnostic | None:
    """A-4: a complete, valid, usable artifact without stop reason or error; then ``timing_valid``."""
    for r in view.ranks:
        d = r.doc
        usable = get(d, "usable")
        ok = (
            get(d, "status") == "complete"
            and get(d, "valid") is True
            and (usable is ABSENT or usable is True)
            and get(d, "stop_reason") is None
            and get(d, "error") is None
            and get(d, "missing_phases") == []
        )
        if not ok:
            return Diagnostic(
                "A-4",
                f"native rank artifact is not complete: status={plain(get(d, 'status'))}, "
                f"stop_reason={plain(get(d, 'stop_reason'))}: {r.path}",
                r.path,
            )
        if get(d, "timing_valid") is not True:
            return Diagnostic(
                "A-4",
                f"native rank artifact has no valid timing: timing_valid={plain(get(d, 'timing_valid'))}: {r.path}",
                r.path,
            )
    return None


@checks("A-5")
def every_point_completed_once(view: CellView) -> Diagnostic | None:
    """A-5: completed = expected, nothing skipped, one result row and one group per point.

    Nothing skipped: the counter ``coverage.skipped_points`` is 0 and the
    artifact's list ``skipped_points`` is ``[]`` (05 §2: a publishable
    artifact lists no skipped point).
    """
    for r in view.ranks:
        cov = get(r.doc, "coverage")
        e, c, s = get(cov, "expected_points"), get(cov, "completed_points"), get(cov, "skipped_points")
        res, groups = get(r.doc, "results"), get(r.doc, "iteration_groups")
        nres = len(res) if isinstance(res, list) else ABSENT
        ngr = len(groups) if isinstance(groups, list) else ABSENT
        if not (is_int(e) and is_int(c) and is_int(s) and c == e and s == 0 and nres == c and ngr == c):
            return Diagnostic(
                "A-5",
                f"native coverage is inconsistent: expected_points={plain(e)}, completed_points={plain(c)}, "
                f"skipped_points={plain(s)}, results={plain(nres)}, iteration_groups={plain(ngr)}: {r.path}",
                r.path,
            )
        skipped = get(r.doc, "skipped_points")
        if skipped != [] or skipped.__class__ is not list:
            return Diagnostic(
                "A-5",
                f"native coverage is inconsistent: skipped_points expected [], found {js(skipped)}: {r.path}",
                r.path,
            )
    return None


_EQUAL_FIELDS = ("run_id", "grid_digest", "status", "coverage", "stop_reason", "dp.size", "iteration_groups")


def _compare_points(view: CellView) -> bool:
    """Compare, point by point, the iteration groups of every rank with those of the first (A-6) and
    each rank's row with its entry in the rank's own group (A-8, kept in ``view.rows_match_groups``);
    ``True`` when the groups of all ranks are equal.

    One walk for both comparisons, so that the objects of a point are compared while they are at
    hand (a 577-point two-rank artifact holds some 40,000 FPM copies).
    """
    docs = [r.doc for r in view.ranks]
    groups, rows = [get(d, "iteration_groups") for d in docs], [get(d, "results") for d in docs]
    n = len(groups[0]) if isinstance(groups[0], list) else -1
    if not all(isinstance(x, list) and len(x) == n for x in (*groups, *rows)):
        return False
    equal, matching = True, set(range(len(docs)))
    for k in range(n):
        g0 = groups[0][k]
        for i, r in enumerate(view.ranks):
            g = groups[i][k]
            if i and equal and g != g0:
                equal = False
            if i in matching and not _row_matches(r.rank, rows[i][k], g):
                matching.discard(i)
    view.rows_match_groups = {view.ranks[i].rank for i in matching}
    return equal


def _row_matches(rank: int, row: Any, group: Any) -> bool:
    try:
        return bool(row["point"] == group["point"] and row["fpms"][0] == group["rank_results"][rank]["fpms"][0])
    except (KeyError, IndexError, TypeError):
        return False


@checks("A-6")
def ranks_agree(view: CellView) -> Diagnostic | None:
    """A-6: §3.3 cross-rank equalities (``measurement_protocol`` is left to A-18).

    The first differing sub-field is named, so that a difference deep inside
    ``iteration_groups`` shows the values that differ.
    """
    for r in view.ranks:
        for key in ("run_id", "grid_digest"):
            v = get(r.doc, key)
            if not (isinstance(v, str) and v):
                return Diagnostic("A-6", f"native {key} must be a non-empty string, found {js(v)}: {r.path}", r.path)
    ref = view.ranks[0]
    groups_equal = _compare_points(view)
    for r in view.ranks[1:]:
        for field in _EQUAL_FIELDS:
            if field == "iteration_groups" and groups_equal:
                continue
            a, b = ref.doc, r.doc
            for k in field.split("."):
                a, b = get(a, k), get(b, k)
            if a == b and (a is ABSENT) == (b is ABSENT):
                continue
            diff = first_difference(a, b, field) or (field, a, b)
            return Diagnostic(
                "A-6",
                f"native ranks disagree on {diff[0]}: rank {ref.rank}={plain(diff[1])}, rank "
                f"{r.rank}={plain(diff[2])}: {r.path}",
                r.path,
            )
    return None


@checks("A-7")
def groups_complete_in_order(view: CellView) -> Diagnostic | None:
    """A-7: benchmark ids 1…N in order; every group complete for DP ranks 0…size−1 in order."""
    for r in view.ranks:
        groups = get(r.doc, "iteration_groups")
        size = get(get(r.doc, "dp"), "size")
        ids = [get(g, "benchmark_id") for g in groups]
        if ids != list(range(1, len(groups) + 1)) or not all(is_int(i) for i in ids):
            return Diagnostic(
                "A-7",
                "native iteration groups are not a contiguous 1-based sequence: found "
                f"{js([plain(i) if i is ABSENT else i for i in ids])}: {r.path}",
                r.path,
            )
        want = list(range(size))
        for g in groups:
            exp = get(g, "expected_dp_ranks")
            rr = get(g, "rank_results")
            got = [get(x, "dp_rank") for x in rr] if isinstance(rr, list) else None
            if exp != want or get(g, "complete") is not True or got != want:
                return Diagnostic(
                    "A-7",
                    f"iteration group benchmark_id={g['benchmark_id']} is incomplete: expected_dp_ranks={js(exp)}, "
                    f"complete={js(get(g, 'complete'))}: {r.path}",
                    r.path,
                )
    return None


def _rows_in_group_order(rank: int, rows: list[Any], groups: list[Any], compared: bool) -> bool:
    """The fast path of A-8: row ``k`` is benchmark id ``k + 1``, holds one FPM of the rank and equals
    group ``k`` (A-7 made the groups the ids 1…N in order; ``compared``: A-6 found each row equal to
    its group's entry, :func:`_compare_points`)."""
    if len(rows) != len(groups):
        return False
    try:
        for k, (row, g) in enumerate(zip(rows, groups), 1):
            fpms, gf = row["fpms"], g["rank_results"][rank]["fpms"]
            fpm = fpms[0]
            c, d = fpm["counter_id"], fpm["dp_rank"]
            if not (
                len(fpms) == 1 and len(gf) == 1 and c.__class__ is int and c == k and d.__class__ is int and d == rank
                and row["point"]["benchmark_id"] == k and (compared or (row["point"] == g["point"] and fpm == gf[0]))
            ):  # fmt: skip
                return False
    except (KeyError, IndexError, TypeError):
        return False
    return True


@checks("A-8")
def rows_equal_their_groups(view: CellView) -> Diagnostic | None:
    """A-8: one FPM per rank-point with the point's counter and the rank; each row equals its group."""
    for r in view.ranks:
        compared = r.rank in view.rows_match_groups
        if _rows_in_group_order(r.rank, r.doc["results"], r.doc["iteration_groups"], compared):
            continue
        groups = {g["benchmark_id"]: g for g in r.doc["iteration_groups"]}
        seen: set[Any] = set()
        for row in r.doc["results"]:
            bid = get(get(row, "point"), "benchmark_id")
            fpms = get(row, "fpms")
            if not isinstance(fpms, list) or len(fpms) != 1:
                n = len(fpms) if isinstance(fpms, list) else 0
                return Diagnostic(
                    "A-8",
                    f"benchmark_id={plain(bid)}: the native save did not keep one fpm of one rank: rank {r.rank} "
                    f"holds {n} fpms: {r.path}",
                    r.path,
                )
            fpm = fpms[0]
            c, dr = get(fpm, "counter_id"), get(fpm, "dp_rank")
            if not (is_int(c) and c == bid and is_int(dr) and dr == r.rank):
                return Diagnostic(
                    "A-8",
                    f"benchmark_id={plain(bid)}: fpm counter_id {plain(c)} or dp_rank {plain(dr)} does not match "
                    f"rank {r.rank}: {r.path}",
                    r.path,
                )
            g = groups.get(bid) if is_int(bid) else None
            gf = get(get(g, "rank_results")[r.rank], "fpms") if g is not None else ABSENT
            if (
                g is None
                or bid in seen
                or not isinstance(gf, list)
                or len(gf) != 1
                or get(row, "point") != g.get("point", ABSENT)
                or fpm != gf[0]
            ):
                return Diagnostic(
                    "A-8",
                    f"benchmark_id={plain(bid)}: rank {r.rank} row differs from its synchronized group: {r.path}",
                    r.path,
                )
            seen.add(bid)
    return None


@checks("A-9")
def wall_times_add_up(view: CellView) -> Diagnostic | None:
    """A-9: group wall time = slowest retained wall time; Σ group wall times = measured ≤ elapsed."""
    for r in view.ranks:
        total = 0.0
        for g in r.doc["iteration_groups"]:
            walls = [get(x["fpms"][0], "wall_time") for x in g["rank_results"]]
            w = get(g, "wall_time")
            if not all(is_number(x) for x in walls) or not is_number(w) or not close(w, max(walls)):
                m = max((x for x in walls if is_number(x)), default=ABSENT)
                return Diagnostic(
                    "A-9",
                    f"benchmark_id={g['benchmark_id']}: iteration wall time {plain(w)} differs from the slowest rank "
                    f"{plain(m)}: {r.path}",
                    r.path,
                )
            total += w
        timing = get(r.doc, "timing")
        s, elapsed = get(timing, "measured_iteration_seconds"), get(timing, "benchmark_elapsed_seconds")
        if not is_number(s) or not close(s, total) or not is_number(elapsed) or elapsed < 0 or s > elapsed + 1e-12:
            return Diagnostic(
                "A-9",
                f"measured_iteration_seconds {plain(s)} differs from the sum of iteration wall times {js(total)}: "
                f"{r.path}",
                r.path,
            )
    return None


@checks("A-10")
def points_match_staged_digest(view: CellView) -> Diagnostic | None:
    """A-10: the points of the groups, encoded as 04 G-22, have the digest the plan staged for the cell.

    The staged list is the full list or the smoke subset of the plan's
    ``options.benchmark_points`` (04 G-25); the staged manifest
    (``points.json``) says which one.  A plan without a benchmark-point record
    and without a staged manifest leaves the points to the runtime.
    """
    bp = benchmark_points(view.plan)
    staged = [bp.get("manifest_sha256"), bp.get("smoke_manifest_sha256")]
    staged = [s for s in staged if isinstance(s, str)]
    expected: Any = None
    if view.manifest is not None:
        path, man = view.manifest
        found = canonical_digest(man)
        if staged and found not in staged:
            return Diagnostic(
                "A-10",
                f"native points differ from the staged plan list: expected manifest {staged[0]}, found {found}: {path}",
                path,
            )
        expected = found
    elif staged:
        expected = staged
    if expected is None:
        return None
    # A-6 made the iteration groups of all ranks equal and A-2 their integers exact: one digest serves all ranks
    for r in view.ranks[:1]:
        found = canonical_digest(manifest_of(get(g, "point") for g in r.doc["iteration_groups"]))
        ok = found == expected if isinstance(expected, str) else found in expected
        if not ok:
            exp = expected if isinstance(expected, str) else expected[0]
            return Diagnostic(
                "A-10",
                f"native points differ from the staged plan list: expected manifest {exp}, found {found}: {r.path}",
                r.path,
            )
    return None


_ENGINE_DROP = ("resolved", "resolution", "resolved_scope", "worker_probe")
_ATTENTION_DROP = ("backend_resolved", "mla_prefill_backend_resolved", "resolution")


def engine_identity(engine: Any) -> Any:
    """An ``engine`` block without the fields that may differ across ranks (05 §3.4)."""
    if not isinstance(engine, dict):
        return engine
    out = {k: v for k, v in engine.items() if k not in _ENGINE_DROP and k != "capture_error"}
    att = out.get("attention")
    if isinstance(att, dict):
        out["attention"] = {k: v for k, v in att.items() if k not in _ATTENTION_DROP}
    par = out.get("parallel")
    if isinstance(par, dict):
        out["parallel"] = {k: v for k, v in par.items() if k != "data_parallel_rank"}
    return out


@checks("A-11")
def engine_blocks_equal(view: CellView) -> Diagnostic | None:
    """A-11: the ``engine`` blocks of all ranks without a capture error are equal (05 §3.4)."""
    if not any(get(r.doc, "engine") is not ABSENT for r in view.ranks):
        return None
    live = [r for r in view.ranks if get(get(r.doc, "engine"), "capture_error") in (ABSENT, None)]
    if not live:
        return None
    ref = live[0]
    a = engine_identity(get(ref.doc, "engine"))
    for r in live[1:]:
        b = engine_identity(get(r.doc, "engine"))
        diff = first_difference(a, b, "engine")
        if diff is not None:
            return Diagnostic(
                "A-11",
                f"native ranks disagree on engine provenance: field={diff[0]}, rank {ref.rank} vs rank {r.rank}: "
                f"{r.path}",
                r.path,
            )
    return None


def merge_ranks(
    ranks: Sequence[Mapping[str, Any]], *, rank_files: Sequence[str] = (), merged_output_path: str = "merged.json"
) -> dict[str, Any]:
    """Dynamo's merge of rank artifacts (05 §5), as fpmcore re-computes it for A-12.

    The reference rank is the lowest rank.  ``rank_files`` and
    ``merged_output_path`` are the paths the merge wrote (not compared).
    """
    ranks = sorted(ranks, key=lambda d: d["dp"]["rank"])
    out = copy.deepcopy(dict(ranks[0]))
    size = len(ranks)
    out["artifact_type"] = "merged"
    out["dp"] = {
        "ranks": list(range(size)),
        "source_ranks": [d["dp"]["rank"] for d in ranks],
        "managed_size": size,
        "global_size": size,
    }
    out["rank_files"] = list(rank_files)
    out["merged_output_path"] = merged_output_path
    rows = []
    by_rank = [{row["point"]["benchmark_id"]: row for row in d["results"]} for d in ranks]
    for bid in sorted(by_rank[0]):
        for r, rows_of in enumerate(by_rank):
            row = rows_of[bid]
            entry: dict[str, Any] = {"point": {**row["point"], "dp_rank": r}, "fpms": copy.deepcopy(row["fpms"])}
            if "kv_seed_regime" in row:
                entry["kv_seed_regime"] = row["kv_seed_regime"]
            rows.append(entry)
    out["results"] = rows
    out["coverage"] = {k: v * size for k, v in ranks[0]["coverage"].items()}
    slowest = max(ranks, key=lambda d: d["timing"]["benchmark_elapsed_seconds"])
    out["timing"] = dict(copy.deepcopy(slowest["timing"]))
    out["timing"]["rank_benchmark_elapsed_seconds"] = {
        str(d["dp"]["rank"]): d["timing"]["benchmark_elapsed_seconds"] for d in ranks
    }
    out["rank_warmup_evidence"] = {
        str(d["dp"]["rank"]): d.get("warmup_evidence", {"status": "unavailable", "records": []}) for d in ranks
    }
    if isinstance(out.get("engine"), dict):
        out["engine"] = copy.deepcopy(out["engine"])
        if isinstance(out["engine"].get("parallel"), dict):
            out["engine"]["parallel"]["data_parallel_rank"] = None
        out["engine"]["capture_errors"] = [
            d["dp"]["rank"] for d in ranks if get(d.get("engine"), "capture_error") not in (ABSENT, None)
        ]
    return out


@checks("A-12")
def merged_artifact_is_the_merge(view: CellView) -> Diagnostic | None:
    """A-12: a present merged artifact equals the merge of the rank artifacts (05 §5)."""
    if view.merged is None:
        return None
    path, merged = view.merged
    expected = merge_ranks([r.doc for r in view.ranks])
    if not isinstance(merged, dict):
        return Diagnostic(
            "A-12", f"native merged artifact differs from the merge of its rank artifacts: artifact_type: {path}", path
        )
    for key in list(expected) + [k for k in merged if k not in expected]:
        if key in ("rank_files", "merged_output_path"):
            continue
        diff = first_difference(expected.get(key, ABSENT), merged.get(key, ABSENT), key)
        if diff is not None:
            return Diagnostic(
                "A-12", f"native merged artifact differs from the merge of its rank artifacts: {diff[0]}: {path}", path
            )
    return None


#: The fixed fields of a collector provenance file (05 §6.1), as ``(key path, value)`` in check order
#: (``cell_id`` and ``plan_sha256`` come between the first two and the last: they name the cell and plan).
PROVENANCE_CONSTANTS: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("schema_name",), "fpmcore_collector_provenance"),
    (("schema_version",), 1),
    (("runtime", "backend"), FRAMEWORK),
)
#: The string fields of a collector provenance file besides ``cell_id`` (05 §6.1), in check order.
PROVENANCE_STRINGS: tuple[tuple[str, ...], ...] = (("attempt_id",), ("runtime", "backend_version"))


@checks("A-13")
def provenance_matches_plan(view: CellView) -> Diagnostic | None:
    """A-13: collector provenance identical across pods and equal to the frozen cell and plan (05 §6.1).

    The files are compared exactly (``schema_version`` is the integer 1, not
    ``1.0`` or ``true``, on every pod).
    """
    if not view.provenance:
        return Diagnostic(
            "A-13",
            "collector provenance differs from the frozen cell: provenance expected present, found absent: "
            f"{view.attempt}",
            view.attempt,
        )
    cell_id = get(view.cell, "cell_id")
    expect = (
        *PROVENANCE_CONSTANTS[:2],
        (("cell_id",), cell_id),
        (("plan_sha256",), plan_digest(view.plan)),
        *PROVENANCE_CONSTANTS[2:],
    )
    path0, first = view.provenance[0]
    for keys, want in expect:
        v = first
        for k in keys:
            v = get(v, k)
        if type(v) is not type(want) or v != want:  # exactly: 1.0 is not the schema version 1
            return Diagnostic(
                "A-13",
                f"collector provenance differs from the frozen cell: {'.'.join(keys)} expected {plain(want)}, found "
                f"{plain(v)}: {path0}",
                path0,
            )
    for keys in PROVENANCE_STRINGS:
        v = first
        for k in keys:
            v = get(v, k)
        if not isinstance(v, str):
            return Diagnostic(
                "A-13",
                f"collector provenance differs from the frozen cell: {'.'.join(keys)} expected a string, found "
                f"{plain(v)}: {path0}",
                path0,
            )
    for path, other in view.provenance[1:]:
        diff = first_difference(first, other, exact=True)
        if diff is not None:
            return Diagnostic("A-13", f"collector provenance differs across pods: {diff[0]}: {path}", path)
    return None


STRUCTURE_RULES: tuple[tuple[str, ArtifactRule], ...] = (
    ("A-1", rank_artifacts_have_schema), ("A-2", integer_fields_are_integers), ("A-3", one_artifact_per_dp_rank), ("A-4", artifacts_complete_and_usable), ("A-5", every_point_completed_once),
    ("A-6", ranks_agree), ("A-7", groups_complete_in_order), ("A-8", rows_equal_their_groups), ("A-9", wall_times_add_up),
    ("A-10", points_match_staged_digest), ("A-11", engine_blocks_equal), ("A-12", merged_artifact_is_the_merge), ("A-13", provenance_matches_plan),
)  # fmt: skip
