"""A collected run on disk: durable per-point records, resume, and the artifacts built from them.

A run folder is one attempt of one plan cell (05 §1)::

    RUN_DIR/
      collect.json          what the run is: plan, cell, staged list, protocol settings, producer,
                            engine facts (written once, before the first point)
      points/000001.json    one record per finished point (:mod:`fpmcore.collect.measure`),
      points/000002.json    each written atomically the moment the point is done
      …
      points.json           the staged point manifest (04 G-22)          ┐
      provenance.json       the collector provenance (05 §6.1)           │ built from the records
      r0.json               the rank artifact (05 §2)                    │ once every point is done
      repetitions.jsonl     the repetition-evidence sidecar (05 §7.5)    │
      index.json            the artifact index: SHA-256 of the four above┘ (written last)

**Durability.**  Every file is written to a temporary file in its folder,
flushed, ``fsync``-ed and renamed over its name, then the folder is
``fsync``-ed: a kill at any moment leaves each file whole or absent, never
partial.  A point's record is written only when the point is finished, so a
kill loses at most the point in progress.  ``--resume`` reads ``collect.json``
(which must name the same plan, cell and list), removes stray temporary files,
keeps every record (each must be the point of the list it is named after),
continues with the first missing point — its forward index continues where
the records end, so forward indices keep rising across the run (05 §4.3) — and
builds the artifacts.  Building is deterministic from the records: a run
resumed after any number of kills builds the same artifacts as a run that was
never interrupted, except for the measured times themselves.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import JsonError, canonical_bytes, digest, is_finite_number, loads, one_line
from fpmcore.documents.runtime_pin import RuntimePin
from fpmcore.validate.measured_values import TRIMMED_MEAN, UPPER_MEDIAN, trimmed_mean, upper_median

RUN_SCHEMA = "fpmcore.collect/v1"
RUN_FILE = "collect.json"
#: The strings and the objects of ``collect.json`` that a resumed or finished run reads (:meth:`RunFolder.read_run`).
RUN_TEXT = ("plan_sha256", "cell_id", "point_set", "manifest_sha256", "grid_digest", "runtime", "attempt_id", "run_id",
            "started_at", "execution_mode")  # fmt: skip
RUN_OBJECTS = ("settings", "producer", "measurement_protocol", "manifest", "execution_identity", "serving_config",
               "limits")  # fmt: skip
POINTS_DIR = "points"
ARTIFACT = "r0.json"
SIDECAR = "repetitions.jsonl"
PROVENANCE = "provenance.json"
MANIFEST = "points.json"
INDEX = "index.json"
#: The files the artifact index pins, in the order they are written.
ARTIFACT_FILES = (MANIFEST, PROVENANCE, SIDECAR, ARTIFACT)
WORKER_ID = "dp0-worker"


# ---------------------------------------------------------------------------
# durable writes
# ---------------------------------------------------------------------------


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError:  # a file system that cannot sync a folder
        pass
    finally:
        os.close(fd)


def write_durable(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a kill leaves the old file or the new one, never a partial file.

    The one atomic writer of :mod:`fpmcore.documents.output_files` (file and folder synced); its
    folder must exist.
    """
    from fpmcore.documents.output_files import write_file

    write_file(path, data)


def json_bytes(value: Any) -> bytes:
    """Indented JSON with a trailing newline (records and artifacts); an integer beyond 64 bits (a run file may
    carry one into the artifacts) is written whole, in the same form, by :mod:`json`."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError as exc:
        if "Integer exceeds" not in str(exc):
            raise
    import json

    return (json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def json_text(value: Any) -> str:
    """``value`` as compact JSON for a message (any integer, however large)."""
    import json

    return json.dumps(value, ensure_ascii=True)


def remove_stray_temporaries(root: Path) -> list[str]:
    """Remove the temporary files a kill left behind (``.<name>.*`` next to their target)."""
    removed = []
    for folder in (root, root / POINTS_DIR):
        if not folder.is_dir():
            continue
        for p in folder.iterdir():
            if p.name.startswith(".") and p.is_file():
                p.unlink()
                removed.append(str(p.relative_to(root)))
    return removed


# ---------------------------------------------------------------------------
# the run folder
# ---------------------------------------------------------------------------


def record_name(benchmark_id: int, visit: int | None = None) -> str:
    """``000012.json`` (a one-pass run), ``000012.p1.json`` (the record of pass 1 of a multi-pass run)."""
    return f"{benchmark_id:06d}.json" if visit is None else f"{benchmark_id:06d}.p{visit}.json"


#: ``(benchmark id, pass)`` of a visit record; the pass is ``None`` in a one-pass run.
VisitKey = tuple[int, "int | None"]


class RunFolder:
    """One run folder: its ``collect.json`` and its point records (one per point and pass)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def points_dir(self) -> Path:
        return self.root / POINTS_DIR

    def read_run(self) -> dict[str, Any]:
        path = self.root / RUN_FILE
        try:
            run = loads(path.read_bytes(), str(path))
        except OSError as exc:
            raise FpmError(
                "collect", f"not a run folder: cannot read {RUN_FILE}: {exc.strerror}", str(self.root)
            ) from None
        if not isinstance(run, dict) or run.get("schema") != RUN_SCHEMA:
            raise FpmError("collect", f"not a run folder of fpm collect: {RUN_FILE} has no schema {RUN_SCHEMA}",
                           str(path))  # fmt: skip
        for keys, kind, what in ((RUN_TEXT, str, "a string"), (RUN_OBJECTS, dict, "an object")):
            for key in keys:
                if not isinstance(run.get(key), kind):
                    found = "nothing" if key not in run else one_line(json_text(run[key]))[:80]
                    raise FpmError("collect", f"{RUN_FILE} is damaged: {key} must be {what}, found {found}; "
                                              "start a new run folder", str(path))  # fmt: skip
        try:  # the artifacts' provenance is the pin's two sides
            RuntimePin.parse(run["runtime"])
        except ValueError:
            found = one_line(json_text(run["runtime"]))[:80]
            raise FpmError("collect", f"{RUN_FILE} is damaged: runtime must be a runtime pin (framework==version), "
                                      f"found {found}; start a new run folder", str(path)) from None  # fmt: skip
        return run

    def create(self, run: Mapping[str, Any]) -> None:
        self.points_dir.mkdir(parents=True, exist_ok=True)
        _fsync_dir(self.root)
        write_durable(self.root / RUN_FILE, json_bytes(dict(run)))

    def update_run(self, run: Mapping[str, Any]) -> None:
        write_durable(self.root / RUN_FILE, json_bytes(dict(run)))

    def save_point(self, record: Mapping[str, Any]) -> None:
        """Keep one finished visit of a point (its pass in ``record["pass"]``, absent in a one-pass run)."""
        name = record_name(int(record["benchmark_id"]), record.get("pass"))
        write_durable(self.points_dir / name, json_bytes(dict(record)))

    def visits(self, points: Sequence[Mapping[str, Any]], passes: int = 1) -> dict[VisitKey, dict[str, Any]]:
        """The finished visit records by ``(benchmark id, pass)``; each checked against the staged ``points``
        (a record of a point not in the list, of a pass the run does not have, or named after another point
        or pass is refused)."""
        by_id = {int(p["benchmark_id"]): p for p in points}
        found: dict[VisitKey, dict[str, Any]] = {}
        if self.points_dir.is_symlink():
            raise FpmError("collect", f"the run's {POINTS_DIR} folder is a symbolic link; a run keeps its own records",
                           str(self.points_dir))  # fmt: skip
        if not self.points_dir.is_dir():
            return found
        for path in sorted(self.points_dir.iterdir()):
            if path.name.startswith("."):
                continue
            if not stat.S_ISREG(path.lstat().st_mode):  # a link (to outside the run or not), a folder, a device
                raise FpmError("collect", f"a point record is not a regular file of the run: {path.name}", str(path))
            stem, _, tail = path.stem.partition(".p")
            try:
                bid = int(stem)
                visit = int(tail) if tail else None
                rec = loads(path.read_bytes(), str(path))
            except (ValueError, JsonError) as exc:
                raise FpmError("collect", f"a point record of the run is unreadable: {exc}", str(path)) from None
            if (
                not isinstance(rec, dict)
                or rec.get("benchmark_id") != bid
                or rec.get("pass") != visit
                or bid not in by_id
                or path.name != record_name(bid, visit)
                or (visit is None) != (passes == 1)
                or (visit is not None and not 0 <= visit <= passes)
            ):
                raise FpmError("collect", f"a point record is not a point of the staged list: {path.name}", str(path))
            problem = visit_problem(rec)
            if problem is not None:
                raise FpmError("collect", f"a point record is damaged: {path.name}: {problem}; start a new run folder",
                               str(path))  # fmt: skip
            found[(bid, visit)] = rec
        return found


def _finite(value: Any) -> bool:
    """A finite number (an integer beyond a double is not one: :func:`fpmcore.documents.jsonio.is_finite_number`)."""
    return is_finite_number(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: The fields of a visit record that :func:`merge_visits` and :func:`build_artifacts` read, with their test.
_VISIT_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("point", "an object", lambda v: isinstance(v, dict)),
    ("kv_seed_regime", "a string", lambda v: isinstance(v, str)),
    ("raw", "a non-empty list", lambda v: isinstance(v, list) and bool(v)),
    ("repetitions", "a list", lambda v: isinstance(v, list)),
    ("warmups", "a list", lambda v: isinstance(v, list)),
    ("prompts", "a list", lambda v: isinstance(v, list)),
    ("forward_start", "a number", _finite),
    ("forward_end", "a number", _finite),
    ("elapsed_seconds", "a number", _finite),
    ("finished_at", "a string", lambda v: isinstance(v, str)),
)
_SAMPLE_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("wall_time", "a number", _finite),
    ("start", "a number", _finite),
    ("end", "a number", _finite),
    ("forward_index", "an integer", _integer),
    ("scheduled", "an object", lambda v: isinstance(v, dict)),
    ("queued", "an object", lambda v: isinstance(v, dict)),
)


def _shown(value: Any) -> str:
    return one_line(json_text(value))[:80]


def visit_problem(record: Mapping[str, Any]) -> str | None:
    """Why a finished visit's record cannot be merged into the run's artifacts, or ``None``: the fields the
    merge and the artifact builder read, each of its type (a raw sample, a repetition, a warm-up entry too)."""
    for key, what, test in _VISIT_FIELDS:
        if not test(record.get(key)):
            return f"{key} must be {what}, found {'nothing' if key not in record else _shown(record[key])}"
    raw = record["raw"]
    for i, sample in enumerate(raw):
        if not isinstance(sample, dict):
            return f"raw[{i}] must be an object, found {_shown(sample)}"
        for key, what, test in _SAMPLE_FIELDS:
            if not test(sample.get(key)):
                return f"raw[{i}].{key} must be {what}, found {_shown(sample.get(key))}"
    for i, rep in enumerate(record["repetitions"]):
        if not isinstance(rep, dict):
            return f"repetitions[{i}] must be an object, found {_shown(rep)}"
        index: Any = rep.get("raw_sample_index")
        if rep.get("role") == "measured" and not (_integer(index) and 0 <= index < len(raw)):
            return f"repetitions[{i}].raw_sample_index must be the index of a raw sample, found {_shown(index)}"
    for i, entry in enumerate(record["warmups"]):
        if not (isinstance(entry, dict) and _integer(entry.get("forward_index_start"))
                and _integer(entry.get("forward_index_end"))):  # fmt: skip
            return f"warmups[{i}] must be an object with integer forward_index_start and forward_index_end"
    return None


# ---------------------------------------------------------------------------
# the passes of a point (interleaved passes, A-44)
# ---------------------------------------------------------------------------


def pass_values(visits: Sequence[Mapping[str, Any]], reduction: str = UPPER_MEDIAN) -> list[float]:
    """Each visit's value: the upper median of its samples' wall times, or their mean when the run reduces
    a point's samples by their (trimmed) mean."""
    out = []
    for v in visits:
        walls = [s["wall_time"] for s in v["raw"]]
        out.append(math.fsum(walls) / len(walls) if reduction == TRIMMED_MEAN else upper_median(walls))
    return out


def pass_spread(values: Sequence[float]) -> float:
    """How far the passes of a point disagree: (largest − smallest) / their upper median."""
    if len(values) < 2:
        return 0.0
    ordered = sorted(values)
    mid = ordered[len(ordered) // 2]
    return (ordered[-1] - ordered[0]) / mid if mid > 0 else 0.0


def settled_spread(values: Sequence[float]) -> float:
    """The spread of a re-measured point's passes once the one farthest from their upper median is set aside:
    small when the disagreement was one pass's burst, which the re-measuring visit outvoted."""
    if len(values) < 3:
        return pass_spread(values)
    mid = sorted(values)[len(values) // 2]
    odd = max(range(len(values)), key=lambda i: abs(values[i] - mid))
    return pass_spread([v for i, v in enumerate(values) if i != odd])


#: How many standard errors of a pass's mean the passes of a mean-reduced point may spread before they
#: disagree: the range of ten means of one distribution exceeds four standard errors in about one point of
#: ten, of three means in one of a hundred (:func:`disagreement_bound`).
PASS_STANDARD_ERRORS = 4.0


def disagreement_bound(visits: Sequence[Mapping[str, Any]], bound: float, reduction: str) -> float:
    """The spread beyond which a point's passes disagree (A-44): ``bound`` for the upper median; for the mean,
    the larger of ``bound`` and :data:`PASS_STANDARD_ERRORS` standard errors of one pass's mean, from the
    samples' scatter *within* their passes (a burst moves a whole pass, not the samples within one; with one
    sample a pass, the scatter of all samples).  A pass of two samples of an engine whose steps scatter by
    20 % differs from the next by 15 % by chance; what the bound looks for is one pass moved beyond what the
    engine's own scatter explains — a burst of load."""
    if reduction != TRIMMED_MEAN:
        return bound
    passes = [[s["wall_time"] for s in v["raw"]] for v in visits if v["raw"]]
    walls = [w for p in passes for w in p]
    if len(walls) < 3:
        return bound
    mean = math.fsum(walls) / len(walls)
    per_pass = min(len(p) for p in passes)
    if per_pass > 1:
        dev = [w - math.fsum(p) / len(p) for p in passes for w in p]
        dof = len(walls) - len(passes)
    else:
        dev, dof = [w - mean for w in walls], len(walls) - 1
    sd = math.sqrt(math.fsum(d * d for d in dev) / max(1, dof))
    return max(bound, PASS_STANDARD_ERRORS * sd / math.sqrt(per_pass) / mean) if mean > 0 else bound


def passes_disagree(visits: Sequence[Mapping[str, Any]], bound: float, reduction: str = UPPER_MEDIAN) -> bool:
    """Whether a point's passes (all done, not re-measured) disagree beyond :func:`disagreement_bound` (A-44)."""
    return pass_spread(pass_values(visits, reduction)) > disagreement_bound(visits, bound, reduction)


def still_disagree(visits: Sequence[Mapping[str, Any]], bound: float, reduction: str = UPPER_MEDIAN) -> bool:
    """Whether a re-measured point's passes still disagree once the farthest is set aside (flagged, A-44)."""
    return settled_spread(pass_values(visits, reduction)) > disagreement_bound(visits, bound, reduction)


def merge_visits(visits: Sequence[Mapping[str, Any]], reduction: str = UPPER_MEDIAN) -> dict[str, Any]:
    """One point record of a multi-pass run from its visits, in pass order: the samples of every pass
    (``raw``), every repetition renumbered (``index``, ``raw_sample_index``), the warm-up ledger of every
    visit, the prompt evidence of the first sample, the passes' values and their spread (whether the point is
    flagged, A-44, is the collection's to say: :attr:`fpmcore.collect.run.Collection.done`)."""
    ordered = sorted(visits, key=lambda v: v["pass"])
    first = ordered[0]
    raw: list[Any] = []
    reps: list[dict[str, Any]] = []
    ledger: list[Any] = []
    for v in ordered:
        for rep in v["repetitions"]:
            entry = {**rep, "index": len(reps)}
            if rep.get("role") == "measured":
                entry["raw_sample_index"] = len(raw) + rep["raw_sample_index"]
            reps.append(entry)
        raw.extend(v["raw"])
        ledger.extend(v["warmups"])
    values = pass_values(ordered, reduction)
    return {
        "benchmark_id": first["benchmark_id"],
        "point": first["point"],
        "kv_seed_regime": first["kv_seed_regime"],
        "raw": raw,
        "repetitions": reps,
        "warmups": ledger,
        "prompts": next((v["prompts"] for v in ordered if v["prompts"]), []),
        "forward_start": min(v["forward_start"] for v in ordered),
        "forward_end": max(v["forward_end"] for v in ordered),
        "elapsed_seconds": sum(v["elapsed_seconds"] for v in ordered),
        "finished_at": ordered[-1]["finished_at"],
        "passes": [{"pass": v["pass"], "value": x} for v, x in zip(ordered, values, strict=True)],
        "pass_spread": pass_spread(values),
    }


# ---------------------------------------------------------------------------
# building the artifacts (05 §2, §4, §6.1, §7.5)
# ---------------------------------------------------------------------------


def _fpm(counter: int, wall: float, scheduled: Any, queued: Any) -> dict[str, Any]:
    return {"version": 1, "worker_id": WORKER_ID, "dp_rank": 0, "counter_id": counter, "wall_time": wall,
            "scheduled_requests": scheduled, "queued_requests": queued}  # fmt: skip


def retained_sample(method: str, raw: Sequence[Mapping[str, Any]], indices: Sequence[int] | range) -> tuple[float, int]:
    """The retained wall time of a point's raw samples under ``method`` and the raw sample whose workload the
    retained record carries (the upper median's own sample; for the mean the first reduced one)."""
    walls = [s["wall_time"] for s in raw]
    if method == TRIMMED_MEAN:
        return trimmed_mean([walls[i] for i in indices]), indices[0]
    keep = upper_median_index(walls, indices)
    return walls[keep], keep


def upper_median_index(values: Sequence[float], indices: Sequence[int]) -> int:
    """The raw-sample index whose wall time is the upper median of ``values[indices]`` (05 §4.2)."""
    order = sorted(indices, key=lambda i: (values[i], i))
    return order[len(order) // 2]


def sidecar_line(record: Mapping[str, Any]) -> bytes:
    """The record's repetition-evidence line: canonical JSON (04 G-23) and its newline."""
    line = {"benchmark_id": record["benchmark_id"], "dp_rank": 0, "repetitions": record["repetitions"]}
    if "passes" in record:
        line["passes"] = record["passes"]
        line["flagged"] = bool(record.get("flagged", False))
    return canonical_bytes(line) + b"\n"


def build_artifacts(run: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> dict[str, bytes]:
    """The artifact files of a finished run, by name (without the index)."""
    import bisect
    import hashlib

    from fpmcore.collect.measure import ProtocolSettings
    from fpmcore.validate.repetition_evidence import reduced_indices

    recs = sorted(records, key=lambda r: r["benchmark_id"])
    grid = run["grid_digest"]
    protocol = run["measurement_protocol"]
    settings = ProtocolSettings.from_json(run["settings"])  # the protocol's producer.reduction is written from them
    method = settings.reduction
    # the warm-up ledger in forward order (the passes of a multi-pass run interleave the points); a record
    # counts the points whose last forward ended before it began
    finished = sorted(r["forward_end"] for r in recs)
    entries = sorted((w for r in recs for w in r["warmups"]), key=lambda w: w["forward_index_start"])
    ledger = [{**w, "completed_points_before": bisect.bisect_right(finished, w["forward_index_start"])}
              for w in entries]  # fmt: skip
    ends = [w["forward_index_end"] for w in ledger]
    results, groups, lines = [], [], []
    for k, rec in enumerate(recs):
        raw = rec["raw"]
        line = sidecar_line(rec)
        lines.append(line)
        first_raw = raw[0]["forward_index"]
        indices = reduced_indices([s["wall_time"] for s in raw], settings.repetitions, settings.passes, method)
        kept_wall, keep = retained_sample(method, raw, indices)
        bid = rec["benchmark_id"]
        raw_fpms = []
        for i, s in enumerate(raw):
            f = _fpm(bid, s["wall_time"], s["scheduled"], s["queued"])
            f["benchmark_sample"] = {
                "sample_index": i, "forward_index": s["forward_index"],
                "timing": {"basis": "schedule_to_output", "start_monotonic": s["start"], "end_monotonic": s["end"]},
                "cudagraph": {"status": "unavailable", "runtime_mode": None, "num_unpadded_tokens": None,
                              "num_padded_tokens": None, "num_paddings": None},
            }  # fmt: skip
            raw_fpms.append(f)
        prompts = rec["prompts"]
        retained = _fpm(bid, kept_wall, raw[keep]["scheduled"], raw[keep]["queued"])
        retained["benchmark_measurement"] = {
            "schema_version": 1,
            "dp_rank": 0,
            "point_key": _point_key(rec["point"]),
            "prompts": {"status": "recorded", "sha256": digest(prompts), "requests": prompts},
            "preparation": {"grid_digest": grid, "completed_points_before": k, "kv_seed_regime": rec["kv_seed_regime"],
                            "warmup_records_before": sum(1 for e in ends if e <= first_raw)},
            "expected_internal_samples": len(raw),
            "raw_fpms": raw_fpms,
            "estimate": {"method": method, "raw_sample_indices": indices},
        }  # fmt: skip
        results.append({
            "point": rec["point"], "kv_seed_regime": rec["kv_seed_regime"],
            "repetition_evidence_sha256": hashlib.sha256(line[:-1]).hexdigest(), "fpms": [retained],
        })  # fmt: skip
        groups.append({
            "benchmark_id": bid, "point": rec["point"], "expected_dp_ranks": [0], "complete": True,
            "wall_time": retained["wall_time"], "rank_results": [{"dp_rank": 0, "fpms": [retained]}],
        })  # fmt: skip
    sidecar = b"".join(lines)
    n = len(recs)
    measured = 0.0
    for g in groups:
        measured += g["wall_time"]
    elapsed = max(sum(r["elapsed_seconds"] for r in recs), measured)
    artifact = {
        "schema_version": 2, "artifact_type": "rank",
        "status": "complete", "valid": True, "usable": True, "stop_reason": None, "timing_valid": True,
        "error": None, "missing_phases": [], "skipped_points": [],
        "run_id": run["run_id"], "grid_digest": grid,
        "dp": {"rank": 0, "size": 1},
        "coverage": {"expected_points": n, "completed_points": n, "skipped_points": 0},
        "timing": {"started_at": run["started_at"], "completed_at": recs[-1]["finished_at"] if recs else
                   run["started_at"], "benchmark_elapsed_seconds": elapsed, "measured_iteration_seconds": measured},
        "limits": run["limits"],
        "execution_mode": run["execution_mode"],
        "execution_identity": run["execution_identity"],
        "observation_purpose": "fpm",
        "producer": run["producer"],
        "serving_config": run["serving_config"],
        "measurement_protocol": protocol,
        "warmup_evidence": {"status": "recorded", "records": ledger},
        "repetition_evidence": {"path": SIDECAR, "sha256": hashlib.sha256(sidecar).hexdigest(), "records": n},
        "results": results,
        "iteration_groups": groups,
    }  # fmt: skip
    pin = RuntimePin.parse(run["runtime"])
    provenance = {
        "schema_name": "fpmcore_collector_provenance", "schema_version": 1, "cell_id": run["cell_id"],
        "plan_sha256": run["plan_sha256"], "attempt_id": run["attempt_id"],
        "runtime": {"backend": pin.framework, "backend_version": pin.version},
    }  # fmt: skip
    return {
        MANIFEST: canonical_bytes(run["manifest"]),
        PROVENANCE: json_bytes(provenance),
        SIDECAR: sidecar,
        ARTIFACT: json_bytes(artifact),
    }


def _point_key(point: Mapping[str, Any]) -> str:
    from fpmcore.validate.measured_values import point_key

    return point_key(point)


def publish_artifacts(folder: RunFolder, files: Mapping[str, bytes]) -> None:
    """Write the artifact files, then the index that pins them (05 §1): the index last, so a run whose
    index exists is complete."""
    import hashlib

    for name in ARTIFACT_FILES:
        write_durable(folder.root / name, files[name])
    index = {"files": {name: hashlib.sha256(files[name]).hexdigest() for name in ARTIFACT_FILES}}
    write_durable(folder.root / INDEX, json_bytes(index))
