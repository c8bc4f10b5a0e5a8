"""``fpm collect``'s work: the staged points of a plan cell, measured on a runtime plugin's engine, durably.

:func:`prepare` reads the plan and chooses the cell and its staged list (the
full list or the smoke subset, 04 G-24), checks the list against its digest
and the model folder against the cell's model configuration digest, and opens
or resumes the run folder — all before an engine starts.  :func:`collect`
starts the engine through the runtime plugin's :class:`MeasurementDriver`,
checks that it runs the planned deployment, measures every missing point
(:mod:`fpmcore.collect.measure`), keeps each one durably
(:mod:`fpmcore.collect.store`) and builds the artifacts.

The host names no runtime: the plan names the runtime pin
(``plan["engine"]["runtime"]``) and the runtime plugin selected for it
starts its engine.  Why the split: the measurement protocol — which points,
seeds, warm-ups, repetitions, the reduction, the evidence, the artifacts,
durability and resume — is the same for every runtime version and lives here
once; how to start one release's engine, admit requests with real token ids,
read its scheduler's output and time its steps depends on that release's
internal objects and lives in its runtime plugin, like every other
version-specific rule.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import attrs

from fpmcore.collect import store
from fpmcore.collect.content import POOL_TAG, TokenSource
from fpmcore.collect.identity import EXECUTION_MODE as EXECUTION_MODE
from fpmcore.collect.identity import PROTOCOL_NAME as PROTOCOL_NAME
from fpmcore.collect.measure import (
    DEFAULT_MAX_CONTENDED,
    DEFAULT_PREFILL_IDLE,
    DEFAULT_RETAKE_PAUSE,
    Measurer,
    PlannedPoint,
    ProtocolSettings,
)
from fpmcore.documents.errors import FpmError
from fpmcore.host.engine_drivers import EngineFacts, EngineOptions, MeasurementDriver, ProducerRecord
from fpmcore.host.hooktypes import CommandContext
from fpmcore.validate.measured_values import PRODUCER_REDUCTIONS, canonical_digest, manifest_of
from fpmcore.validate.protocol import EXECUTION_EVIDENCE

#: The protocol's fixed fields (its ``execution_mode`` and producer name: :mod:`fpmcore.collect.identity`).
STATE_PROTOCOL = "fpmcore_prefix_cache_real_seed_v1"
UNOBSERVED = ("kv_cache_tensors", "recurrent_state_tensors", "sampled_continuation_token_ids")
#: Per point: warm-ups in each pass's visit, measured samples over all passes, the passes, rejections allowed.
DEFAULT_WARMUPS, DEFAULT_REPETITIONS, DEFAULT_PASSES, DEFAULT_MAX_REJECTED = 1, 6, 3, 10
MODEL_CONFIG = "config.json"


def model_config_sha256(model_dir: str | os.PathLike[str]) -> str:
    """SHA-256 of the model folder's ``config.json`` (the cell's ``model_config_sha256``, 05 §6.2)."""
    path = Path(model_dir) / MODEL_CONFIG
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise FpmError("collect", f"not a model folder: cannot read {MODEL_CONFIG}: {exc.strerror}",
                       str(model_dir)) from None  # fmt: skip


@attrs.frozen
class Staged:
    """The cell a collection measures and its staged points."""

    cell: Mapping[str, Any]
    point_set: str
    points: tuple[PlannedPoint, ...]
    manifest: Mapping[str, Any]
    manifest_sha256: str


def staged(plan: Mapping[str, Any], smoke: bool) -> Staged:
    """The cell and list a collection of ``plan`` measures (``smoke``: the smoke subset, 04 G-24)."""
    cells = plan.get("cells")
    engine = plan.get("engine")
    if not isinstance(cells, list) or not isinstance(engine, Mapping):
        raise FpmError("collect", "the plan names no collection cell and no engine: plan it with fpm plan from a "
                                  "profile whose model no plugin collects (the model-agnostic grid)")  # fmt: skip
    point_set = "smoke" if smoke or plan.get("stage") == "smoke" else "full"
    cell = next((c for c in cells if isinstance(c, Mapping) and c.get("point_set") == point_set), None)
    if cell is None:
        raise FpmError("collect", f"the plan has no {point_set} cell")
    raw = plan.get("smoke" if point_set == "smoke" else "points")
    if not isinstance(raw, list) or not raw:
        raise FpmError("collect", f"the plan's {point_set} list is empty: nothing to collect")
    points = tuple(PlannedPoint.from_plan(p) for p in raw)
    graph = "NONE"
    man = manifest_of(p.dynamo_point(graph) for p in points)
    sha = canonical_digest(man)
    record = (plan.get("options") or {}).get("benchmark_points") or {}
    want = record.get("smoke_manifest_sha256" if point_set == "smoke" else "manifest_sha256")
    if sha != want:
        raise FpmError("A-10", f"the plan's {point_set} points differ from its staged list: expected manifest "
                               f"{want}, found {sha}")  # fmt: skip
    return Staged(cell, point_set, points, man, sha)


def engine_options(plan: Mapping[str, Any], *, dtype: str | None = None, seed: int = 0) -> EngineOptions:
    """What the runtime plugin starts its engine with: the plan's deployment (``plan["engine"]``)."""
    e = plan["engine"]
    return EngineOptions(
        max_model_len=e["max_model_len"], max_num_batched_tokens=e["max_num_batched_tokens"],
        max_num_seqs=e["max_num_seqs"], prefix_caching=bool(e["prefix_caching"]),
        kv_cache_bytes=e.get("kv_cache_bytes"), kv_cache_page_bytes=e.get("pool_page_bytes"),
        dtype=dtype if dtype is not None else e.get("dtype"),
        seed=seed, launch=dict(e.get("launch") or {}),
    )  # fmt: skip


def deployment_differences(facts: EngineFacts, plan: Mapping[str, Any]) -> list[str]:
    """Where a started engine does not run the deployment the plan was made for.

    The blocks are compared as what they are (:class:`~fpmcore.host.engine_drivers.EngineFacts`):
    each cache group's block with the plan's ``engine.cache_block_sizes``, the
    scheduler block with ``engine.scheduler_block_size`` (02 I-96) and the
    hash block with ``limits.hash_block_size``.  The plan's
    ``limits.block_size`` is the block a request grows by
    (:func:`fpmcore.plan.planning.growth_block`), which is the scheduler block only
    when every group has the same block; a plan without
    ``engine.scheduler_block_size`` (written before it was recorded) is read
    as one whose groups share ``limits.block_size``.
    """
    e, lim = plan["engine"], plan["limits"]
    scheduler = e.get("scheduler_block_size") or lim["block_size"]
    checks: list[tuple[str, Any, Any]] = [
        ("max_model_len", facts.max_model_len, e["max_model_len"]),
        ("max_num_batched_tokens", facts.max_num_batched_tokens, e["max_num_batched_tokens"]),
        ("max_num_seqs", facts.max_num_seqs, e["max_num_seqs"]),
        ("prefix_caching", facts.prefix_caching, bool(e["prefix_caching"])),
        ("scheduler block_size", facts.block_size, scheduler),
        ("hash_block_size", facts.hash_block_size, lim["hash_block_size"]),
    ]
    groups = e.get("cache_block_sizes")
    if groups and facts.cache_block_sizes:
        checks.append(("cache group block sizes", list(facts.cache_block_sizes), list(groups)))
    if e.get("kv_cache_bytes") is not None:
        checks.append(("kv_cache_bytes", facts.kv_cache_bytes, e["kv_cache_bytes"]))
    return [f"{name} {got}, plan {want}" for name, got, want in checks if got != want]


def protocol_record(settings: ProtocolSettings, producer: ProducerRecord) -> dict[str, Any]:
    """``measurement_protocol`` of the run (05 §4.1 with the producer block of this contract)."""
    return {
        "schema_version": 1, "content_identity": "coordinate_rank_slot_v1", "content_seed": str(settings.seed),
        "synthetic_content": "seeded_tokens", "synthetic_pool_tag": POOL_TAG, "prompt_hash_encoding": "uint32_le",
        "independent_repetitions": 1, "timing_metric": "scheduler_wall_time",
        "input_evidence_scope": "injected_prompt_token_ids", "unobserved": list(UNOBSERVED),
        "preparation": {"warmup_iterations": 0, "giant_kv_threshold": 0, "giant_kv_repeats": 0,
                        "prefill_real_seed": True, "decode_real_kv_warmup": True},
        "execution_evidence": dict(EXECUTION_EVIDENCE),
        "producer": {"name": PROTOCOL_NAME, "reduction": PRODUCER_REDUCTIONS[settings.reduction], "warmup_repetitions": settings.warmups,
                     "measured_repetitions": settings.repetitions, "max_rejected_repetitions": settings.max_rejected,
                     "repetition_spacing_seconds": settings.spacing,
                     "state_protocol": STATE_PROTOCOL, "timing_boundary": producer.timing_boundary,
                     "passes": settings.passes, "contention_bound": settings.bound.as_json(),
                     "max_contended_samples": settings.max_contended,
                     "retake_pause_seconds": settings.retake_pause,
                     "pass_disagreement_bound": settings.disagreement,
                     "prefill_idle_seconds": settings.prefill_idle,
                     "decode_lead_in_steps": settings.decode_lead_in},
    }  # fmt: skip


def producer_json(producer: ProducerRecord, model_sha: str, model_dir: str) -> dict[str, Any]:
    """The artifact's ``producer`` record: the runtime plugin's producer and the model it measured."""
    return {"name": producer.name, "runtime": producer.runtime, "plugin": producer.plugin,
            "timing_boundary": producer.timing_boundary, "files": producer.files_json(),
            "model_config_sha256": model_sha, "checkpoint_dir": str(model_dir)}  # fmt: skip


@attrs.define
class Collection:
    """An opened collection: the staged cell, its run folder and what is already done."""

    plan: Mapping[str, Any]
    stage: Staged
    folder: store.RunFolder
    run: dict[str, Any] | None
    visits: dict[store.VisitKey, dict[str, Any]]
    settings: ProtocolSettings
    model_dir: str
    model_sha: str
    resumed: bool

    def key(self, point: PlannedPoint, visit: int) -> store.VisitKey:
        return (point.benchmark_id, visit if self.settings.passes > 1 else None)

    def needs_remeasure(self, point: PlannedPoint) -> bool:
        """Whether the point's passes, all done, disagree beyond the bound and it has not been re-measured."""
        s = self.settings
        if s.passes == 1 or self.key(point, s.passes) in self.visits:
            return False
        got = [self.visits.get(self.key(point, v)) for v in range(s.passes)]
        if any(v is None for v in got):
            return False
        return store.passes_disagree(got, s.disagreement, s.reduction)  # type: ignore[arg-type]

    def schedule(self) -> list[tuple[int, PlannedPoint]]:
        """The visits still to measure, in order: pass after pass over the whole list, then the re-measuring
        visit of every point whose passes disagree (known only once its passes are done)."""
        return [(v, p) for v in range(self.settings.passes) for p in self.stage.points
                if self.key(p, v) not in self.visits]  # fmt: skip

    @property
    def total_visits(self) -> int:
        return len(self.stage.points) * self.settings.passes

    @property
    def done(self) -> dict[int, dict[str, Any]]:
        """The finished points' records, by benchmark id (a multi-pass run's visits merged)."""
        s = self.settings
        if s.passes == 1:
            return {bid: rec for (bid, _), rec in self.visits.items()}
        out = {}
        for p in self.stage.points:
            got = [self.visits.get(self.key(p, v)) for v in range(s.passes + 1)]
            if all(v is not None for v in got[: s.passes]) and not self.needs_remeasure(p):
                have = [v for v in got if v is not None]
                rec = store.merge_visits(have, s.reduction)
                rec["flagged"] = len(have) > s.passes and store.still_disagree(have, s.disagreement, s.reduction)
                out[p.benchmark_id] = rec
        return out

    @property
    def missing(self) -> list[PlannedPoint]:
        done = self.done
        return [p for p in self.stage.points if p.benchmark_id not in done]

    @property
    def complete(self) -> bool:
        return not self.missing


def prepare(
    plan: Mapping[str, Any],
    model_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    smoke: bool = False,
    warmups: int | None = None,
    repetitions: int | None = None,
    resume: bool = False,
    seed: int = 0,
    spacing: float | None = None,
    passes: int | None = None,
    max_contended: int | None = None,
    retake_pause: float | None = None,
    prefill_idle: float | None = None,
) -> Collection:
    """Everything ``fpm collect`` checks before an engine starts (module docstring)."""
    stage = staged(plan, smoke)
    model_sha = model_config_sha256(model_dir)
    want_sha = stage.cell.get("execution_identity", {}).get("model_config_sha256", "")
    if want_sha and model_sha != want_sha:
        raise FpmError(
            "collect",
            f"the model folder is not the model the plan was made for: {MODEL_CONFIG} sha256 "
            f"{model_sha}, the cell's model_config_sha256 {want_sha}",
            str(model_dir),
        )
    folder = store.RunFolder(out)
    root = folder.root
    run: dict[str, Any] | None = None
    if resume and (root / store.RUN_FILE).is_file():
        store.remove_stray_temporaries(root)
        run = folder.read_run()
        for key, want in (("plan_sha256", plan.get("plan_sha256")), ("cell_id", stage.cell.get("cell_id")),
                          ("manifest_sha256", stage.manifest_sha256)):  # fmt: skip
            if run.get(key) != want:
                raise FpmError("collect", f"--resume: the run folder was collected for another {key}: "
                                          f"{run.get(key)}, this plan {want}", str(root))  # fmt: skip
        try:
            settings = ProtocolSettings.from_json(run["settings"])  # an object (read_run)
        except FpmError as exc:
            raise FpmError(exc.rule, f"--resume: {exc.message}", str(root / store.RUN_FILE)) from None
        for name, given, have in (("--warmup", warmups, settings.warmups), ("--repetitions", repetitions,
                                  settings.repetitions), ("--spacing", spacing, settings.spacing),
                                  ("--passes", passes, settings.passes),
                                  ("--max-contended", max_contended, settings.max_contended),
                                  ("--retake-pause", retake_pause, settings.retake_pause),
                                  ("--prefill-idle", prefill_idle, settings.prefill_idle)):  # fmt: skip
            if given is not None and given != have:
                raise FpmError("collect", f"--resume: {name} {given} differs from the run's {have}", str(root))
    else:
        from fpmcore.documents.output_files import refuse_non_folder

        refuse_non_folder(root)  # a file, a device or a symbolic link is no run folder, whatever it points at
        if root.exists() and any(p.name != store.POINTS_DIR or any(p.iterdir()) for p in root.iterdir()):
            hint = " (add --resume to continue it)" if (root / store.RUN_FILE).is_file() else ""
            raise FpmError("O-2", f"the output folder exists and is not empty; give a new or an empty folder{hint}",
                           str(root))  # fmt: skip
        if not root.parent.is_dir():
            raise FpmError("O-1", f"the folder {root.parent} does not exist; fpm never creates missing folders "
                                  "(create it first)", str(root))  # fmt: skip
        reps = DEFAULT_REPETITIONS if repetitions is None else repetitions
        settings = ProtocolSettings(
            DEFAULT_WARMUPS if warmups is None else warmups, reps, DEFAULT_MAX_REJECTED, seed,
            0.0 if spacing is None else spacing, min(DEFAULT_PASSES, reps) if passes is None else passes,
            max_contended=DEFAULT_MAX_CONTENDED if max_contended is None else max_contended,
            retake_pause=DEFAULT_RETAKE_PAUSE if retake_pause is None else retake_pause,
            prefill_idle=DEFAULT_PREFILL_IDLE if prefill_idle is None else prefill_idle,
        )  # fmt: skip
    ids = [{"benchmark_id": p.benchmark_id} for p in stage.points]
    visits = folder.visits(ids, settings.passes) if run is not None else {}
    return Collection(plan, stage, folder, run, visits, settings, str(model_dir), model_sha, resumed=run is not None)


def _new_run(c: Collection, facts: EngineFacts, producer: ProducerRecord) -> dict[str, Any]:
    import datetime

    cell = c.stage.cell
    attempt = f"collect-{secrets.token_hex(4)}"
    return {
        "schema": store.RUN_SCHEMA,
        "plan_sha256": c.plan.get("plan_sha256"),
        "cell_id": cell["cell_id"],
        "point_set": c.stage.point_set,
        "manifest_sha256": c.stage.manifest_sha256,
        "manifest": c.stage.manifest,
        "runtime": facts.runtime,
        "attempt_id": attempt,
        "run_id": f"{cell['cell_id']}-{attempt}",
        "grid_digest": f"{cell['cell_id']}-{c.stage.manifest_sha256[:16]}",
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "settings": c.settings.as_json(),
        "execution_mode": EXECUTION_MODE,
        "execution_identity": dict(cell.get("execution_identity") or {}),
        "producer": producer_json(producer, c.model_sha, c.model_dir),
        "serving_config": dict(facts.serving_config),
        "limits": {"max_num_scheduled_tokens": facts.max_num_batched_tokens, "max_num_running_reqs": facts.max_num_seqs,
                   "max_model_len": facts.max_model_len, "block_size": facts.block_size,
                   "hash_block_size": facts.hash_block_size, "kv_cache_bytes": facts.kv_cache_bytes},
        "measurement_protocol": protocol_record(c.settings, producer),
    }  # fmt: skip


def _same_engine(run: Mapping[str, Any], fresh: Mapping[str, Any]) -> None:
    """--resume: the engine started now must be the one the run was collected with."""
    for key in ("runtime", "serving_config", "limits", "measurement_protocol"):
        if run.get(key) != fresh.get(key):
            raise FpmError("collect", f"--resume: the engine differs from the run's in {key}: run "
                                      f"{run.get(key)}, now {fresh.get(key)}")  # fmt: skip
    a = {k: v for k, v in run["producer"].items() if k != "checkpoint_dir"}
    b = {k: v for k, v in fresh["producer"].items() if k != "checkpoint_dir"}
    if a != b:
        raise FpmError("collect", "--resume: the producer differs from the run's (another runtime plugin or changed "
                                  "runtime files)")  # fmt: skip


#: ``progress(done, total, point)`` after each finished point.
Progress = Callable[[int, int, PlannedPoint | None], None]


def collect(
    c: Collection, driver: MeasurementDriver, *, progress: Progress | None = None, dtype: str | None = None
) -> dict[str, bytes]:
    """Measure every missing point of ``c`` on ``driver``'s engine, keep each, build and publish the artifacts."""
    total = c.total_visits
    if progress:
        progress(len(c.visits), total, None)
    if not c.complete:
        engine = driver.start(c.model_dir, engine_options(c.plan, dtype=dtype, seed=c.settings.seed))
        try:
            facts = engine.facts
            diffs = deployment_differences(facts, c.plan)
            if diffs:
                raise FpmError("collect", "the engine does not run the deployment the plan was made for: "
                                          + "; ".join(diffs))  # fmt: skip
            fresh = _new_run(c, facts, driver.producer)
            if c.run is None:
                c.folder.create(fresh)
                c.run = fresh
            else:
                _same_engine(c.run, fresh)
            forward = max((r["forward_end"] for r in c.visits.values()), default=0)
            measurer = Measurer(engine, TokenSource(c.settings.seed, facts.vocab_size, facts.excluded_token_ids),
                                c.settings, facts.hash_block_size, facts.prefix_caching,
                                forward_index=forward, budget=facts.max_num_batched_tokens)  # fmt: skip
            s = c.settings

            def visit(point: PlannedPoint, v: int) -> None:
                record = measurer.measure(point, v, s.share(v))
                c.folder.save_point(record)
                c.visits[c.key(point, v)] = record
                if progress:
                    progress(len(c.visits), max(total, len(c.visits)), point)

            for v, point in c.schedule():
                visit(point, v)
            for point in [p for p in c.stage.points if c.needs_remeasure(p)]:
                visit(point, s.passes)
        finally:
            engine.close()
    assert c.run is not None
    files = store.build_artifacts(c.run, c.done.values())
    store.publish_artifacts(c.folder, files)
    return files


def replan(fix: str) -> str:
    """The way out of an engine limit for a plan: its profile was probed with the setting the engine cannot run."""
    return f"the plan's deployment needs {fix}: probe the model with {fix}, then import and plan it again"


def run_collect(
    ctx: CommandContext,
    *,
    plan: Any,
    model_dir: str,
    output: str,
    smoke: bool = False,
    warmups: int | None = None,
    repetitions: int | None = None,
    resume: bool = False,
    dtype: str | None = None,
    spacing: float | None = None,
    passes: int | None = None,
    max_contended: int | None = None,
    retake_pause: float | None = None,
    prefill_idle: float | None = None,
) -> dict[str, Any]:
    """Collect (or resume) a run of ``plan`` with a progress bar on ``ctx``: the measurement run of ``fpm collect``
    and of ``fpm onboard``'s smoke and collect stages.  The engine limits of the plan's runtime are asked before
    its engine starts; a run already complete only has its artifacts built again.  The summary of the finished run."""
    from fpmcore.host import engine_limits

    c = prepare(plan, model_dir, output, smoke=smoke, warmups=warmups, repetitions=repetitions,
                resume=resume, spacing=spacing, passes=passes, max_contended=max_contended,
                retake_pause=retake_pause, prefill_idle=prefill_idle)  # fmt: skip
    driver = ctx.host.hooks.measurement_driver(plan["engine"]["runtime"]) if not c.complete else None
    if driver is not None:  # what the runtime's engine cannot run is refused before it starts
        engine_limits.refuse(ctx.host.hooks.runtime(plan["engine"]["runtime"]), model_dir,
                             prefix_caching=bool(plan["engine"]["prefix_caching"]),
                             dtype=dtype if dtype is not None else plan["engine"].get("dtype"),
                             max_model_len=plan["engine"]["max_model_len"], way_out=replan)  # fmt: skip
    label = f"collect {c.stage.cell['cell_id']}"
    bar = ctx.progress("points", transient=False) if not ctx.json else None
    with bar if bar is not None else nullcontext():
        task = bar.add_task(label, total=c.total_visits) if bar is not None else None

        def progress(done: int, total: int, point: Any) -> None:
            if bar is not None:
                bar.update(task, completed=done, total=total)

        if driver is None:
            files = store.build_artifacts(c.run or c.folder.read_run(), c.done.values())
            store.publish_artifacts(c.folder, files)
        else:
            collect(c, driver, progress=progress, dtype=dtype)
    return {
        "run": output,
        "cell": c.stage.cell["cell_id"],
        "points": len(c.stage.points),
        "resumed": c.resumed,
        "repetitions": c.settings.repetitions,
        "warmups": c.settings.warmups,
        "passes": c.settings.passes,
        **contention_counts(c.done.values(), c.settings.passes),
    }


def contention_counts(records: Any, passes: int) -> dict[str, Any]:
    """What the run's records say about contention and disagreeing passes: the samples retaken because they
    were contended, the points re-measured because their passes disagreed, and those still disagreeing."""
    recs = list(records)
    return {
        "contended_samples": sum(1 for r in recs for rep in r["repetitions"] if rep.get("role") == "contended"),
        "remeasured_points": sorted(r["benchmark_id"] for r in recs if len(r.get("passes", ())) > passes),
        "flagged_points": sorted(r["benchmark_id"] for r in recs if r.get("flagged")),
    }
