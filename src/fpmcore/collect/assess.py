"""``fpm assess RUN --plan PLAN -o REPORT [--points N] [--seed S] [--json]``: is a collected run repeatable?

A table is only as good as its knots, and a knot is only as good as the engine's
ability to measure it again.  ``fpm assess`` starts a **fresh engine** (the
runtime plugin's measurement driver, the plan's deployment), re-measures a
seeded sample of the run's points with the run's own protocol — the same
warm-ups, samples, passes and contention bound (:mod:`fpmcore.collect.measure`),
new prompt content (the run's content seed plus ``1 + S``, so no prefix of the
run is reused) — and compares point by point: the **deviation** of a point is
``(assessed − run) / run`` of the retained wall times (each reduced as the run
reduces a point's samples: the trimmed mean of all samples but the first, or the
upper median of a run collected before the mean).

**The sample.**  ``--points N`` points drawn with ``random.Random(S)`` from the
run's list; without ``--points`` every point when the run has at most
:data:`SMALL_RUN` of them, else a sample of :data:`SMALL_RUN` (enough for a
median and a P90 whose rank error is a few points, in a few minutes of a tiny
model's time).

**The verdict (A-45).**  A run is **not repeatable** when the median absolute
deviation exceeds 5 %, its P90 (nearest rank) exceeds 15 %, or one point
deviates by more than 35 %: the engine's own step-to-step noise on an idle
machine of this project's kind is a few per cent per knot, so a median above
5 % means the run (or the assessment) measured a different machine state than
the engine's; a P90 above 15 % means at least one knot in ten is off by more
than a contended burst's typical distortion; and a single knot off by more
than a third is a corrupted knot — every replayed step that interpolates it
moves with it (one such decode knot once moved a replayed makespan by 45 %),
which a median or a P90 over a hundred knots never shows.  The report lists
the points beyond 15 %.

**Shift and scatter.**  Beside the verdict the summary says *how* the run and
the assessment differ: ``shift``, the median signed deviation (every point
moved together: the machine ran at another speed, e.g. +5.7 % for every knot
of a tiny hybrid between an evening run and its assessment), and ``scatter``,
the median absolute distance of the deviations from that shift (what moves
point by point: noise, or a knot of its own).  A run with a median of 6 % made
of a 6 % shift and a 2 % scatter measured a machine that changed speed; one
with a 1 % shift and a 6 % scatter, an engine that did not repeat itself.
The verdict stays on the absolute deviations: a table measured at another
speed than the one it is used at predicts that much slower or faster, however
evenly.  ``fpm publish --assessment REPORT``
refuses a run whose report says not repeatable (exit 1, the report named)
unless ``--accept-unrepeatable``, which the table then records.

**A smoke run is no source (A-45).**  Its handful of points says nothing about
the full table's knots; assess the full collection.

The report (``schema`` 1, ``kind`` :data:`KIND`) holds the run (its path, the
SHA-256 of its artifact index, its id), the plan digest, the seed, per point
the run's and the assessment's value and the deviation, the summary
(``median``, ``p90``, ``worst``, ``points``, ``over_bound``, ``shift``, ``scatter``), the bounds, the
verdict ``repeatable``, the contention the assessment met (samples retaken),
the machine's speed in both (:func:`machine_speed`: whether a systematic
deviation is the machine's or the engine's) and the load average.  It is written atomically (a kill leaves the old report
or the new one).  Exit 0 repeatable, 1 not repeatable, 2 bad usage or input.
"""

from __future__ import annotations

import hashlib
import os
import random
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from fpmcore.campaign.layout import ASSESSMENT_KIND as KIND
from fpmcore.documents.errors import FpmError

#: The repeatability bounds of A-45: the median and the P90 of the absolute deviations, and the worst one.
MEDIAN_BOUND, P90_BOUND, WORST_BOUND = 0.05, 0.15, 0.35
#: Runs with at most this many points are assessed whole when ``--points`` is not given.
SMALL_RUN = 32


def retained_values(run_dir: Path) -> dict[int, float]:
    """The retained wall time of every point of a finished run (its rank artifact), by benchmark id."""
    from fpmcore.collect import store
    from fpmcore.documents.jsonio import load_path

    art = load_path(run_dir / store.ARTIFACT)
    try:
        return {int(r["point"]["benchmark_id"]): float(r["fpms"][0]["wall_time"]) for r in art["results"]}
    except (KeyError, TypeError, ValueError, IndexError):
        raise FpmError("A-45", f"the run's artifact has no readable results: {store.ARTIFACT}", str(run_dir)) from None


def choose_points(ids: Sequence[int], count: int | None, seed: int) -> list[int]:
    """The benchmark ids an assessment re-measures (module docstring: the sample)."""
    ordered = sorted(ids)
    n = len(ordered) if count is None and len(ordered) <= SMALL_RUN else min(count or SMALL_RUN, len(ordered))
    return sorted(random.Random(seed).sample(ordered, n))


@attrs.frozen
class Verdict:
    """The summary of the deviations and the A-45 verdict."""

    median: float
    p90: float
    worst: float
    points: int
    over_bound: tuple[int, ...]
    #: the median signed deviation: how far every point moved together (module docstring, "Shift and scatter")
    shift: float = 0.0
    #: the median absolute distance of the deviations from ``shift``: how far points moved on their own
    scatter: float = 0.0

    @property
    def repeatable(self) -> bool:
        return self.median <= MEDIAN_BOUND and self.p90 <= P90_BOUND and self.worst <= WORST_BOUND

    def as_json(self) -> dict[str, Any]:
        return {"median": self.median, "p90": self.p90, "worst": self.worst, "points": self.points,
                "over_bound": list(self.over_bound), "shift": self.shift, "scatter": self.scatter}  # fmt: skip


def verdict(deviations: Mapping[int, float]) -> Verdict:
    """The summary of signed deviations by benchmark id (absolute values summarised)."""
    absolute = {bid: abs(d) for bid, d in deviations.items()}
    values = list(absolute.values())
    from fpmcore.replay.records import nearest_rank

    shift = statistics.median(deviations.values())
    scatter = statistics.median(abs(d - shift) for d in deviations.values())
    return Verdict(statistics.median(values), nearest_rank(values, 0.9), max(values), len(values),
                   tuple(sorted(b for b, d in absolute.items() if d > P90_BOUND)), shift, scatter)  # fmt: skip


def _remeasure(
    host: Any, run: Mapping[str, Any], plan: Mapping[str, Any], points: Sequence[Any], model_dir: str,
    seed: int, dtype: str | None, progress: Any,
) -> tuple[dict[int, float], dict[str, Any]]:  # fmt: skip
    """Re-measure ``points`` on a fresh engine with the run's protocol; their values and the contention seen."""
    from fpmcore.collect import store
    from fpmcore.collect.content import TokenSource
    from fpmcore.collect.measure import Measurer, ProtocolSettings
    from fpmcore.collect.run import deployment_differences, engine_options

    base = ProtocolSettings.from_json(run["settings"])
    settings = attrs.evolve(base, seed=base.seed + 1 + seed)
    driver = host.hooks.measurement_driver(plan["engine"]["runtime"])
    engine = driver.start(model_dir, engine_options(plan, dtype=dtype, seed=settings.seed))
    visits: dict[int, list[dict[str, Any]]] = {p.benchmark_id: [] for p in points}
    try:
        facts = engine.facts
        diffs = deployment_differences(facts, plan)
        if diffs:
            raise FpmError("collect", "the engine does not run the deployment the plan was made for: "
                                      + "; ".join(diffs))  # fmt: skip
        measurer = Measurer(engine, TokenSource(settings.seed, facts.vocab_size, facts.excluded_token_ids), settings,
                            facts.hash_block_size, facts.prefix_caching,
                            budget=facts.max_num_batched_tokens)  # fmt: skip
        total, done = len(points) * settings.passes, 0
        for v in range(settings.passes):
            for p in points:
                visits[p.benchmark_id].append(measurer.measure(p, v, settings.share(v)))
                done += 1
                if progress is not None:
                    progress(done, total)
    finally:
        engine.close()
    values, contended = {}, 0
    speeds = [v["canary_seconds"] for got in visits.values() for v in got if "canary_seconds" in v]
    for bid, got in visits.items():
        raw = [s for v in got for s in v["raw"]]
        values[bid] = store.retained_sample(settings.reduction, raw, range(1, len(raw)))[0]
        contended += sum(1 for v in got for r in v["repetitions"] if r.get("role") == "contended")
    return values, {"contended_samples": contended, "bound": settings.bound.as_json(),
                    "canary_seconds": min(speeds, default=None)}  # fmt: skip


def assess_run(
    host: Any,
    run_dir: str | os.PathLike[str],
    plan: Mapping[str, Any],
    *,
    points: int | None = None,
    seed: int = 0,
    model_dir: str | None = None,
    dtype: str | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """The assessment report of ``run_dir`` (module docstring); raises :class:`FpmError` for a run it
    cannot assess."""
    from fpmcore.campaign.finalize import check_inputs
    from fpmcore.collect import store
    from fpmcore.collect.run import staged

    root = Path(run_dir)
    check_inputs(root / store.INDEX)  # the run of a finalized campaign: its digests (F-2)
    run = store.RunFolder(root).read_run()
    if run.get("point_set") == "smoke":
        raise FpmError("A-45", "a smoke run is no source for an assessment (its few points say nothing about the "
                               "full table's knots): assess the full collection", str(root))  # fmt: skip
    if run.get("plan_sha256") != plan.get("plan_sha256"):
        raise FpmError("A-45", f"the run was collected for another plan: plan_sha256 {run.get('plan_sha256')}, "
                               f"this plan {plan.get('plan_sha256')}", str(root))  # fmt: skip
    index = root / store.INDEX
    if not index.is_file():
        raise FpmError("A-45", "the run is not finished (no artifact index): finish it with fpm collect --resume",
                       str(root))  # fmt: skip
    have = retained_values(root)
    stage = staged(plan, smoke=False)
    chosen = choose_points([p.benchmark_id for p in stage.points if p.benchmark_id in have], points, seed)
    planned = {p.benchmark_id: p for p in stage.points}
    model = model_dir or str(run.get("producer", {}).get("checkpoint_dir") or "")
    if not model:
        raise FpmError("A-45", "the run names no model folder: give --model-dir", str(root))
    load = os.getloadavg()
    values, seen = _remeasure(host, run, plan, [planned[b] for b in chosen], model, seed, dtype, progress)
    deviations = {bid: (values[bid] - have[bid]) / have[bid] for bid in chosen}
    v = verdict(deviations)
    machine = machine_speed(root, seen.pop("canary_seconds"))
    return {
        "schema": 1, "kind": KIND,
        "run": {"path": str(root), "run_id": run.get("run_id"),
                "index_sha256": hashlib.sha256(index.read_bytes()).hexdigest()},
        "plan_sha256": plan.get("plan_sha256"), "seed": seed,
        "points": [{"benchmark_id": bid, "phase": planned[bid].phase, "shape": planned[bid].shape(),
                    "run_seconds": have[bid], "assessed_seconds": values[bid], "deviation": deviations[bid]}
                   for bid in chosen],
        "summary": v.as_json(),
        "bounds": {"median": MEDIAN_BOUND, "p90": P90_BOUND, "worst": WORST_BOUND},
        "repeatable": v.repeatable,
        "contention": seen,
        "machine": machine,
        "load_average": {"start": list(load), "end": list(os.getloadavg())},
    }  # fmt: skip


def machine_speed(run_dir: Path, assessed: float | None) -> dict[str, Any]:
    """The machine's speed during the run and during the assessment: the fastest canary each saw right after a
    visit (:func:`fpmcore.collect.contention.canary`), and the assessment's relative to the run's (``ratio`` 0.85: the
    machine ran the canary 15 % faster during the assessment).  A run collected before canaries were recorded
    gives ``None``."""
    from fpmcore.collect import store
    from fpmcore.documents.jsonio import load_path

    run = None
    folder = run_dir / store.POINTS_DIR
    if folder.is_dir():
        got = []
        for p in folder.iterdir():
            if p.suffix == ".json" and not p.name.startswith("."):
                doc = load_path(p)
                value = doc.get("canary_seconds") if isinstance(doc, dict) else None
                if isinstance(value, (int, float)) and value > 0:
                    got.append(float(value))
        run = min(got, default=None)
    ratio = assessed / run if run and assessed else None
    return {"run_canary_seconds": run, "assessed_canary_seconds": assessed, "ratio": ratio}


def read_assessment(path: str | os.PathLike[str], run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """An assessment report of ``run_dir`` (its artifact index must be the one assessed); A-45 otherwise."""
    from fpmcore.collect import store
    from fpmcore.documents.jsonio import load_path

    doc = load_path(path)
    if not isinstance(doc, dict) or doc.get("kind") != KIND or doc.get("schema") != 1:
        raise FpmError("A-45", f"not an assessment report of fpm assess (kind {KIND}, schema 1)", str(path))
    index = Path(run_dir) / store.INDEX
    want = hashlib.sha256(index.read_bytes()).hexdigest() if index.is_file() else None
    run = doc.get("run")
    got = run.get("index_sha256") if isinstance(run, dict) else None
    if got != want:
        raise FpmError("A-45", f"the assessment is of another run: its artifact index sha256 {got}, this run's "
                               f"{want}", str(path))  # fmt: skip
    if type(doc.get("repeatable")) is not bool:
        raise FpmError("A-45", "the assessment has no verdict (repeatable true or false)", str(path))
    return doc


def describe(report: Mapping[str, Any]) -> str:
    s = report["summary"]
    return (f"median deviation {s['median']:.1%}, P90 {s['p90']:.1%}, worst {s['worst']:.1%} over {s['points']} "
            f"points (bounds {MEDIAN_BOUND:.0%} / {P90_BOUND:.0%} / {WORST_BOUND:.0%}){_shape(s)}")  # fmt: skip


def _shape(summary: Mapping[str, Any]) -> str:
    """``; every point moved a median +5.7 %, the points 2.1 % around that`` (a report from before the shift was
    recorded: nothing)."""
    shift, scatter = summary.get("shift"), summary.get("scatter")
    if not isinstance(shift, (int, float)) or not isinstance(scatter, (int, float)):
        return ""
    return f"; every point moved a median {shift:+.1%}, the points {scatter:.1%} around that"
