"""``fpm onboard MODEL_DIR -o CAMPAIGN``: live probe → import → plan → collect → validate → publish.

Each stage is the work of its own command (``fpm probe --live``, ``fpm
import``, ``fpm plan``, ``fpm collect``, ``fpm validate``, ``fpm publish``),
called in order, and writes its output into the campaign folder::

    CAMPAIGN/                 (the layout: fpmcore.campaign.layout)
      onboard.json      the manifest: options, and per stage its inputs and outputs with their SHA-256
      probe/            the live probe's evidence folder (02 §2)
      profile.json      the imported profile
      plan.json         the plan (the model's own list, or the model-agnostic grid)
      run/              the collected run (fpm collect's run folder)
      validation.json   the verdict of every cell (fpm validate --json)
      table.json        the published FPM latency table (fpm replay --fpm-table)

**Durability and resume.**  A stage writes its output (each file atomically;
the probe into a folder that is removed when the stage did not finish), then
the manifest records the stage as done with the digests of its inputs and
outputs, atomically.  ``--resume`` continues at the first stage not recorded
done; before that it recomputes the digests of every finished stage's inputs
(then of their outputs) and refuses, naming the stage and both digests, when
one changed since (a re-probed folder, an edited profile or plan, a touched
run): stages are never silently mixed.  A finalized campaign (``final.json``)
is resumed only when every file ``final.json`` names is unchanged
(:func:`fpmcore.campaign.finalize.check_finalized`).  An unfinished collection
resumes with ``fpm collect --resume`` (its finished points are kept).

**The probe stage** is a function (:data:`PROBE_STAGES`): the live probe
(:func:`fpmcore.probe.live.probe_live`, what ``fpm probe --live`` runs, called as
a function); the tests plug in a recorded probe.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from fpmcore.campaign.layout import (
    ASSESSMENT,
    COLLECTION_STAGES,
    FULL_STAGES,
    MANIFEST,
    MANIFEST_SCHEMA,
    PLAN,
    PROBE_DIR,
    PROFILE,
    READINESS,
    RUN_DIR,
    SMOKE_DIR,
    TABLE,
    VALIDATION,
    VERIFICATION,
    digest,
)
from fpmcore.collect import store
from fpmcore.documents.errors import FpmError

if TYPE_CHECKING:
    from fpmcore.host.hooktypes import CommandContext

#: The stages of a smoke campaign and of a full one, in order (:mod:`fpmcore.campaign.layout`).
STAGES, FULL = COLLECTION_STAGES, FULL_STAGES


class Blocked(FpmError):
    """A stage's verdict stops the campaign (not ready for the full collection, not repeatable): exit 1."""


@attrs.frozen
class ProbeOptions:
    """The live probe's options (``fpm probe --live``)."""

    dtype: str | None = None
    kv_cache_space: float | None = None
    max_model_len: int | None = None
    caching: bool = True
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


#: ``probe(ctx, model_dir, out_dir, options)``: writes the evidence folder ``out_dir`` (which does not exist yet).
ProbeStage = Callable[[Any, str, Path, ProbeOptions], None]


def live_probe(ctx: CommandContext, model_dir: str, out_dir: Path, options: ProbeOptions) -> None:
    """The live probe (:func:`fpmcore.probe.live.probe_live`, what ``fpm probe --live`` runs) with the options."""
    from fpmcore.probe.live import live_options, probe_live, refusal_line

    probe_options = live_options(caching=options.caching, max_model_len=options.max_model_len,
                                 dtype=options.dtype, kv_cache_space=options.kv_cache_space,
                                 max_num_seqs=options.max_num_seqs,
                                 max_num_batched_tokens=options.max_num_batched_tokens)  # fmt: skip
    if isinstance(probe_options, str):
        raise FpmError("onboard", f"the live probe refuses its options: {probe_options}")
    try:
        probe_live(ctx, model_dir, str(out_dir), probe_options)
    except FpmError as exc:  # said as fpm probe says it, and the stage refused
        raise FpmError("onboard", f"the live probe refused: {refusal_line(exc)}") from None


#: The probe stage by name; ``fpm onboard --probe NAME`` chooses one (default ``live``).
PROBE_STAGES: dict[str, ProbeStage] = {"live": live_probe}


@attrs.define
class Campaign:
    """The campaign folder and its manifest."""

    root: Path
    manifest: dict[str, Any]

    def path(self, name: str) -> Path:
        return self.root / name

    def digest(self, kind: str, name: str) -> str | None:
        return digest(self.root, kind, name)

    def save(self) -> None:
        store.write_durable(self.root / MANIFEST, store.json_bytes(self.manifest))

    def stage(self, name: str) -> dict[str, Any] | None:
        for s in self.manifest["stages"]:
            if s["name"] == name:
                return dict(s)
        return None

    def record(
        self,
        name: str,
        inputs: Mapping[str, tuple[str, str]],
        outputs: Mapping[str, tuple[str, str]],
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Record stage ``name`` as done: each input/output ``label → (kind, name)`` with its digest now (and
        ``extra`` facts of the stage, e.g. the smoke stage's failed point)."""

        def digests(items: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
            return {label: {"path": n, "kind": k, "sha256": self.digest(k, n)} for label, (k, n) in items.items()}

        entry = {
            "name": name,
            "status": "done",
            "inputs": digests(inputs),
            "outputs": digests(outputs),
            **(extra or {}),
        }
        self.manifest["stages"] = [s for s in self.manifest["stages"] if s["name"] != name] + [entry]
        self.save()

    def check_done(self, name: str, side: str) -> None:
        """A finished stage's inputs (or outputs) must still have the digests it recorded."""
        entry = self.stage(name)
        assert entry is not None
        for label, item in entry[side].items():
            found = self.digest(item["kind"], item["path"])
            if found != item["sha256"]:
                raise FpmError(
                    "onboard",
                    f"stage {name}: its {side[:-1]} {label} ({item['path']}) changed since the stage ran: "
                    f"recorded sha256 {item['sha256']}, found {found}; start a new campaign",
                    str(self.root / MANIFEST),
                )


# ---------------------------------------------------------------------------
# the stages
# ---------------------------------------------------------------------------


@attrs.frozen
class OnboardOptions:
    model_dir: str
    probe: ProbeOptions
    smoke: bool = False
    repetitions: int | None = None
    warmups: int | None = None
    probe_stage: str = "live"
    spacing: float | None = None
    passes: int | None = None
    max_contended: int | None = None
    retake_pause: float | None = None
    accept_unrepeatable: bool = False
    prefill_idle: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "model_dir": self.model_dir,
            "probe": self.probe.as_json(),
            "smoke": self.smoke,
            "repetitions": self.repetitions,
            "warmups": self.warmups,
            "probe_stage": self.probe_stage,
            "spacing": self.spacing,
            "passes": self.passes,
            "max_contended": self.max_contended,
            "retake_pause": self.retake_pause,
            "accept_unrepeatable": self.accept_unrepeatable,
            "prefill_idle": self.prefill_idle,
        }

    @property
    def stages(self) -> tuple[str, ...]:
        return STAGES if self.smoke else FULL


def _stage_probe(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    out = c.path(PROBE_DIR)
    if out.exists():  # an unfinished probe of an earlier attempt: ours, inside the campaign
        shutil.rmtree(out)
    try:
        probe = PROBE_STAGES[o.probe_stage]
    except KeyError:
        raise FpmError(
            "onboard", f"no probe stage '{o.probe_stage}'; known: {', '.join(sorted(PROBE_STAGES))}"
        ) from None
    probe(ctx, o.model_dir, out, o.probe)
    c.record("probe", {"model_config": ("model", o.model_dir)}, {"evidence": ("folder", PROBE_DIR)})


def _stage_import(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    from fpmcore.documents.profile import save_profile
    from fpmcore.importer.pipeline import HostServices, import_evidence

    run = import_evidence(c.path(PROBE_DIR), HostServices(ctx.host))
    done = [r for r in run.results if r.complete and r.profile is not None]
    if len(run.results) != 1 or not done:
        first = next(iter(run.diagnostics), None)
        why = first.render() if first is not None else f"{len(run.results)} configurations in the evidence"
        raise FpmError("onboard", f"stage import: the evidence does not import complete: {why}")
    save_profile(done[0].profile, c.path(PROFILE))
    c.record("import", {"evidence": ("folder", PROBE_DIR)}, {"profile": ("file", PROFILE)})


def _stage_plan(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    from fpmcore.documents.profile import load_profile
    from fpmcore.plan.planning import generate, plan_document, resolve_limits, write_plan

    profile = load_profile(c.path(PROFILE))
    limits = resolve_limits(profile, 0)
    plan = generate(ctx.host, profile.model, profile, 0, limits)
    doc = plan_document(model=profile.model, profile=profile, deployment=0, limits=limits, plan=plan,
                        smoke=o.smoke)  # fmt: skip
    write_plan(c.path(PLAN), doc)
    c.record("plan", {"profile": ("file", PROFILE)}, {"plan": ("file", PLAN)})


def _collect_into(ctx: CommandContext, c: Campaign, o: OnboardOptions, folder: str, smoke: bool) -> None:
    from fpmcore.collect.run import run_collect
    from fpmcore.documents.jsonio import load_path

    run = c.path(folder)
    run_collect(ctx, plan=load_path(c.path(PLAN)), model_dir=o.model_dir, output=str(run), smoke=smoke,
                warmups=o.warmups, repetitions=o.repetitions, resume=run.exists(),
                dtype=o.probe.dtype, spacing=o.spacing, passes=o.passes, max_contended=o.max_contended,
                retake_pause=o.retake_pause, prefill_idle=o.prefill_idle)  # fmt: skip


def _stage_collect(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    if not o.smoke:  # the full collection waits for readiness
        from fpmcore.campaign.readiness import first_blocker, read_readiness

        doc = read_readiness(c.path(READINESS))
        if not doc["ready_for_full_collection"]:
            raise Blocked("onboard", f"not ready for the full collection: {first_blocker(doc)}",
                          str(c.path(READINESS)))  # fmt: skip
    _collect_into(ctx, c, o, RUN_DIR, o.smoke)
    c.record("collect", {"plan": ("file", PLAN), "model_config": ("model", o.model_dir)},
             {"run": ("run", RUN_DIR)})  # fmt: skip


def _stage_smoke(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    """The smoke subset into ``smoke/``; a point that fails is a readiness blocker, recorded with the stage."""
    from fpmcore.collect.measure import PointFailed

    failure = None
    try:
        _collect_into(ctx, c, o, SMOKE_DIR, True)
    except PointFailed as exc:
        failure = {"rule": exc.rule, "message": exc.message}
    c.record("smoke", {"plan": ("file", PLAN), "model_config": ("model", o.model_dir)},
             {"run": ("folder", SMOKE_DIR)}, extra={"failure": failure} if failure else None)  # fmt: skip


def _stage_readiness(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    from fpmcore.campaign.readiness import readiness
    from fpmcore.documents.jsonio import load_path
    from fpmcore.documents.profile import load_profile

    smoke = c.path(RUN_DIR if o.smoke else SMOKE_DIR)
    entry = c.stage("smoke") or {}
    doc = readiness(smoke, load_path(c.path(PLAN)), host=ctx.host, profile=load_profile(c.path(PROFILE)),
                    failure=entry.get("failure"), dtype=o.probe.dtype)  # fmt: skip
    store.write_durable(c.path(READINESS), store.json_bytes(doc))
    c.record("readiness", {"smoke": ("folder", smoke.name), "plan": ("file", PLAN)},
             {"readiness": ("file", READINESS)})  # fmt: skip


def _stage_assess(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    """fpm assess of the full run (its verdict is enforced by the publish stage, A-45)."""
    from fpmcore.collect.assess import assess_run
    from fpmcore.documents.jsonio import load_path

    report = assess_run(ctx.host, c.path(RUN_DIR), load_path(c.path(PLAN)), model_dir=o.model_dir,
                        dtype=o.probe.dtype)  # fmt: skip
    store.write_durable(c.path(ASSESSMENT), store.json_bytes(report))
    c.record("assess", {"run": ("run", RUN_DIR), "plan": ("file", PLAN)}, {"assessment": ("file", ASSESSMENT)})


def _stage_validate(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    from fpmcore.documents.jsonio import load_path
    from fpmcore.validate.reader import validate_run

    results = validate_run(ctx.host, c.path(RUN_DIR), load_path(c.path(PLAN)))
    verdict = {
        "status": "refused" if any(r.diagnostics for r in results) or not results else "accepted",
        "cells": [{"cell": r.cell, "contract": r.contract, "status": r.status,
                   "diagnostics": [{"rule": d.rule, "message": d.message, "where": d.where} for d in r.diagnostics]}
                  for r in results],
    }  # fmt: skip
    store.write_durable(c.path(VALIDATION), store.json_bytes(verdict))
    if verdict["status"] != "accepted":
        first = next((d for r in results for d in r.diagnostics), None)
        raise FpmError("onboard", "stage validate: the run is refused"
                       + (f": {first.message} [{first.rule}]" if first else ": no attempt"))  # fmt: skip
    c.record("validate", {"run": ("run", RUN_DIR), "plan": ("file", PLAN)}, {"verdict": ("file", VALIDATION)})


def _stage_publish(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    from fpmcore.documents.jsonio import load_path
    from fpmcore.publish.publication import publish_run, write_table

    assessment = None
    if not o.smoke:  # a full run is published only when repeatable, or accepted as not
        from fpmcore.publish.publication import assessment_source

        try:
            assessment = assessment_source(c.path(ASSESSMENT), c.path(RUN_DIR),
                                           accept_unrepeatable=o.accept_unrepeatable)  # fmt: skip
        except FpmError as exc:
            raise Blocked(exc.rule, f"stage publish: {exc.message}", exc.where) from None
    doc, results = publish_run(ctx.host, c.path(RUN_DIR), load_path(c.path(PLAN)))
    if doc is None:
        first = next(d for r in results for d in r.diagnostics)
        raise FpmError("onboard", f"stage publish: the run is refused: {first.message} [{first.rule}]")
    if assessment is not None:
        doc["source"]["assessment"] = assessment
    write_table(c.path(TABLE), doc)
    c.record(
        "publish",
        {"run": ("run", RUN_DIR), "plan": ("file", PLAN), "profile": ("file", PROFILE)},
        {"table": ("file", TABLE)},
    )  # fmt: skip  (the assessment's digest is in the table's source)


#: What the verify stage serves: a light Poisson load (1 request/s, 40 requests per trace), two runs, each
#: served twice for the engine's own noise floor (``fpm verify --noise-floor``).
VERIFY_REQUESTS, VERIFY_RATE, VERIFY_RUNS = 40, 1.0, 2


def _stage_verify(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    """fpm verify of the published table against the served engine (its verdict is enforced by finalize, F-7)."""
    from fpmcore.verify.run import VerifyOptions, verify_campaign
    from fpmcore.verify.traces import PoissonSpec

    options = VerifyOptions(poisson=PoissonSpec(VERIFY_RATE, VERIFY_REQUESTS, (64, 512), (8, 64)), runs=VERIFY_RUNS,
                            noise_floor=True)  # fmt: skip
    report = verify_campaign(ctx.host, c.root, options)
    store.write_durable(c.path(VERIFICATION), store.json_bytes(report))
    c.record("verify", {"profile": ("file", PROFILE), "plan": ("file", PLAN), "table": ("file", TABLE)},
             {"verification": ("file", VERIFICATION)})  # fmt: skip


def _stage_finalize(ctx: CommandContext, c: Campaign, o: OnboardOptions) -> None:
    from fpmcore.campaign.finalize import Refused, stage_finalize

    try:
        stage_finalize(ctx, c, o)
    except Refused as exc:
        raise Blocked(exc.rule, exc.message, exc.where) from None


RUNNERS: dict[str, Callable[[Any, Campaign, OnboardOptions], None]] = {
    "probe": _stage_probe, "import": _stage_import, "plan": _stage_plan, "smoke": _stage_smoke,
    "readiness": _stage_readiness, "collect": _stage_collect, "validate": _stage_validate, "assess": _stage_assess,
    "publish": _stage_publish, "verify": _stage_verify, "finalize": _stage_finalize,
}  # fmt: skip


def open_campaign(root: Path, options: OnboardOptions, resume: bool) -> Campaign:
    if resume and (root / MANIFEST).is_file():
        from fpmcore.campaign.layout import manifest_problem
        from fpmcore.documents.jsonio import load_path

        manifest = load_path(root / MANIFEST)
        problem = manifest_problem(manifest)
        if problem is not None:
            raise FpmError("onboard", f"not a campaign folder of fpm onboard: {MANIFEST}: {problem}; start a new "
                                      "campaign", str(root / MANIFEST))  # fmt: skip
        if manifest.get("options") != options.as_json():
            raise FpmError("onboard", f"--resume: the options differ from the campaign's: campaign "
                                      f"{manifest.get('options')}, now {options.as_json()}", str(root))  # fmt: skip
        return Campaign(root, manifest)
    from fpmcore.documents.output_files import refuse_non_folder

    refuse_non_folder(root)  # a file, a device or a symbolic link is no campaign folder, whatever it points at
    if root.exists() and any(root.iterdir()):
        hint = " (add --resume to continue it)" if (root / MANIFEST).is_file() else ""
        raise FpmError("O-2", f"the campaign folder exists and is not empty; give a new or an empty folder{hint}",
                       str(root))  # fmt: skip
    if not root.parent.is_dir():
        raise FpmError("O-1", f"the folder {root.parent} does not exist; fpm never creates missing folders (create "
                              "it first)", str(root))  # fmt: skip
    root.mkdir(exist_ok=True)
    c = Campaign(root, {"schema": MANIFEST_SCHEMA, "options": options.as_json(), "stages": []})
    c.save()
    return c


def onboard(
    ctx: CommandContext,
    root: Path,
    options: OnboardOptions,
    *,
    resume: bool = False,
    report: Callable[[str, str], None] | None = None,
) -> Campaign:
    """Run every stage not yet done, in order (module docstring)."""
    from fpmcore.collect.run import model_config_sha256
    from fpmcore.probe.live import refuse_engine_limits

    model_config_sha256(options.model_dir)  # not a model folder: refused before anything is written
    p = options.probe  # nor a configuration the installed runtime's engine cannot run
    refuse_engine_limits(ctx.host, options.model_dir, prefix_caching=p.caching, dtype=p.dtype,
                         max_model_len=p.max_model_len)  # fmt: skip
    c = open_campaign(root, options, resume)
    if resume:  # a finalized campaign: every file final.json names is unchanged (F-2)
        from fpmcore.campaign.finalize import check_finalized

        check_finalized(root)
    stages = options.stages
    done = [name for name in stages if c.stage(name) is not None]
    for side in ("inputs", "outputs"):  # a changed input names the stage that read it; then any changed output
        for name in done:
            c.check_done(name, side)
    for name in stages:
        if name in done:
            if report:
                report(name, "done before")
            continue
        if report:
            report(name, "running")
        RUNNERS[name](ctx, c, options)
        if report:
            report(name, "done")
    return c
