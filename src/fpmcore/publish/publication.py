"""``fpm publish RUN_DIR --plan PLAN -o TABLE [--json]``: validated rows → the FPM latency table (06 R-27).

Publication reads the run like ``fpm validate`` (A-1 … A-40) and labels its
rows (A-41, A-42); a run with a refused cell publishes nothing (exit 1, the
refusing diagnostic).  The accepted cells' retained rows become the table
``fpm replay --fpm-table`` reads:

``rows``    one row per point: ``phase``, ``batch_size``,
            ``total_prefill_tokens`` (prefill), ``total_kv_read_tokens`` and
            ``wall_time_seconds`` — the retained wall time, the maximum over
            DP ranks (R-27);
``shared_step_seconds``  the smallest decode row's wall time: the cheapest
            whole step the engine ran, nearly all of it the cost every step
            pays whatever its tokens (scheduling, input preparation, reading
            the weights, sampling, output processing); a replayed step with
            prefill and decode pays it once (RD-16);
``source``  where the rows come from: the run (its path and the SHA-256 of
            its artifact index, which pins every artifact file), the cells,
            the plan (``plan_sha256``, the staged list's digest) and the
            profile (``profile_sha256``), the runtime and the producer.

``--assessment REPORT`` (``fpm assess``'s report of this run): a run the
report finds **not repeatable** is refused (A-45, exit 1, the report named)
unless ``--accept-unrepeatable`` is given; the table's ``source.assessment``
records the report's SHA-256, its summary, its verdict and whether an
unrepeatable run was accepted.  ``fpm onboard`` always assesses a full run
before it publishes it.

The table is checked by the replay's own reader (R-27) before it is written,
atomically; the output path is checked before any work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.replay.table import TABLE_SCHEMA  # the table's format is named by its reader


def _index_sha256(run_dir: Path) -> str | None:
    for path in (run_dir / "index.json", *sorted(run_dir.glob("*/index.json"))):
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
    return None


def _text(value: Any) -> str | None:
    """A plan value the table's source records: a string, else ``None`` (the plan's reader leaves these free)."""
    return value if isinstance(value, str) else None


def table_document(run_dir: Path, plan: Mapping[str, Any], results: list[Any]) -> dict[str, Any]:
    """The table of the accepted ``results`` of ``run_dir`` (all accepted), with its source."""
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    for res in results:
        for x in res.retained:
            phase = x.point_type
            key = (phase, x.batch_size, x.total_prefill_tokens if phase == "prefill" else 0, x.total_kv_read_tokens)
            row = {"phase": phase, "batch_size": x.batch_size}
            if phase == "prefill":
                row["total_prefill_tokens"] = x.total_prefill_tokens
            row["total_kv_read_tokens"] = x.total_kv_read_tokens
            row["wall_time_seconds"] = x.wall_time
            if key not in best or row["wall_time_seconds"] > best[key]["wall_time_seconds"]:
                best[key] = row
    rows = sorted(
        best.values(),
        key=lambda r: (
            r["phase"] != "prefill",
            r["batch_size"],
            r.get("total_prefill_tokens", 0),
            r["total_kv_read_tokens"],
        ),
    )
    from fpmcore.validate.cell import benchmark_points, plan_digest

    bp = benchmark_points(plan)  # the accessors fpm validate reads the plan with
    engine: Mapping[str, Any] = plan["engine"] if isinstance(plan.get("engine"), Mapping) else {}
    profile: Mapping[str, Any] = plan["profile"] if isinstance(plan.get("profile"), Mapping) else {}
    decode = [r["wall_time_seconds"] for r in rows if r["phase"] == "decode"]
    shared = {"shared_step_seconds": min(decode)} if decode else {}
    return {
        "schema": TABLE_SCHEMA,
        **shared,
        "source": {
            "run": str(run_dir),
            "run_index_sha256": _index_sha256(run_dir),
            "cells": [{"cell": r.cell, "contract": r.contract} for r in results],
            "plan_sha256": plan_digest(plan),
            "manifest_sha256": bp.get("manifest_sha256"),
            "smoke_manifest_sha256": bp.get("smoke_manifest_sha256"),
            "profile_sha256": _text(profile.get("profile_sha256")),
            "model": _text(plan.get("model")),
            "runtime": _text(engine.get("runtime")),
        },
        "rows": rows,
    }


def publish_run(host: Any, run_dir: str | Path, plan: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[Any]]:
    """``(table, results)``: the table when every cell of the run is accepted for publication, else ``None``."""
    from fpmcore.replay.table import table_from_rows
    from fpmcore.validate.reader import plan_problem, validate_run

    root = Path(run_dir)
    if not root.is_dir():
        raise FpmError("input", f"not a directory: {root}")
    problem = plan_problem(plan)
    if problem is not None:
        raise FpmError("input", f"not a frozen collection plan: {problem}")
    results = validate_run(host, root, plan, publish=True)
    if not results:
        raise FpmError("input", f"no attempt found in {root}")
    if any(r.diagnostics for r in results):
        return None, results
    doc = table_document(root, plan, results)
    table_from_rows(doc["rows"], str(root), doc.get("shared_step_seconds", 0.0))  # what the replay reads
    return doc, results


def write_table(path: str | Path, doc: Mapping[str, Any]) -> None:
    from fpmcore.collect.store import json_bytes, write_durable

    write_durable(Path(path), json_bytes(dict(doc)))


def assessment_source(report_path: str | Path, run_dir: str | Path, *, accept_unrepeatable: bool) -> dict[str, Any]:
    """``source.assessment`` of the table from ``fpm assess``'s report; A-45 refuses a run it found not repeatable
    unless ``accept_unrepeatable``."""
    from fpmcore.collect.assess import describe, read_assessment

    report = read_assessment(report_path, run_dir)
    if not report["repeatable"] and not accept_unrepeatable:
        raise FpmError("A-45", f"the run is not repeatable: {describe(report)}; nothing was published "
                               "(--accept-unrepeatable publishes it anyway, recorded in the table)",
                       str(report_path))  # fmt: skip
    return {"sha256": hashlib.sha256(Path(report_path).read_bytes()).hexdigest(), "repeatable": report["repeatable"],
            "summary": report["summary"], "accepted_unrepeatable": not report["repeatable"]}  # fmt: skip
