"""The plan pipeline: profile + limits → a model plugin's point list → a plan file (04).

The host knows no model.  It resolves the :class:`~fpmcore.host.stage_hooktypes.PlanLimits`
from a profile deployment and the command-line overrides
(:func:`resolve_limits`), asks the model plugin through ``fpm_generate_points``
(:func:`generate`), writes the plan file atomically (:func:`plan_document`,
:func:`write_plan`) and prints a summary.  Every model rule — candidates, drop
rules, refusals, digests — lives in the model plugin.

The plan file (``schema`` 1) holds the model, the profile's identity and
digest, the deployment, the limits, the plugin's ``origin``, points, counts,
drop counters, digest and smoke subset, and, when the plugin returns one in
``report["plan_record"]``, that record under ``options.benchmark_points``
(04 G-25).  ``plan_sha256`` is the canonical digest (01 §9.2) of every field
except itself and ``stage``: ``stage`` (``"full"``, or ``"smoke"`` with
``--smoke``) says which list a collection stages, and a smoke collection
stages its subset under the same plan hash as the full list (04 G-24).

``report`` keys the summary shows when a plugin provides them: ``origin``,
``candidates`` and ``evaluated`` (per phase / per rule), ``smoke_digest``,
``capacity_estimate_blocks``, ``exact_holding_blocks``, ``free_blocks``,
``over_free_points`` and ``log`` (lines, 04 G-20).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, cast

from fpmcore.cli.context import print_table
from fpmcore.documents.errors import FpmError
from fpmcore.documents.runtime_pin import RuntimePin
from fpmcore.documents.schema import MAX_U32
from fpmcore.host.stage_hooktypes import PlanLimits, PointPlan

#: Version of the plan file.
PLAN_SCHEMA = 1


def _positive(name: str, value: int | None) -> None:
    """G-9: an override is a positive count of the profile's range (u32, 01 §1.1)."""
    if value is not None and value <= 0:
        raise FpmError("G-9", f"{name} must be positive; got {value}")
    if value is not None and value > MAX_U32:
        raise FpmError("G-9", f"{name} must be at most {MAX_U32} (a count of the profile, 01 §1.1); got {value}")


def growth_block(deployment: Any) -> int:
    """The block a request's cache grows by: the smallest block of the deployment's attention and
    convolution groups (the groups whose blocks grow with the request), else of its first group.

    It is the plan's ``limits.block_size``, the unit of the point grid's chunk
    sizes.  In a deployment whose groups share one block it is also the
    scheduler block; in one whose groups differ (a Mamba hybrid without prefix
    caching: Mamba 2,048, attention 128) the scheduler block is the lcm of
    them (:func:`scheduler_block_size`).  Linear-layout profiles have no block
    and are refused.
    """
    groups = deployment.resources.cache_groups or ()
    growing = [g.block_size_tokens for g in groups if g.kind != "state"]
    if growing:
        return cast(int, min(growing))
    if groups:
        return cast(int, groups[0].block_size_tokens)
    raise FpmError(
        "G-9", "planning needs a grouped cache layout: the deployment has no cache groups", "resources.cache_groups"
    )


def cache_block_sizes(deployment: Any) -> list[int]:
    """Each cache group's block size in tokens, in the profile's group order (the engine's group order)."""
    return [int(g.block_size_tokens) for g in deployment.resources.cache_groups or ()]


def scheduler_block_size(deployment: Any) -> int:
    """The scheduler block of a deployment (02 I-96): the one group's block, else the lcm of the group blocks.

    This is what a runtime's scheduler rounds computed tokens to (vLLM's
    ``Scheduler.block_size``); with prefix caching off it is also the hash
    block a runtime resolves (I-97).  A deployment without groups has the
    block of :func:`growth_block` (which refuses it).
    """
    import math

    sizes = cache_block_sizes(deployment)
    return math.lcm(*sizes) if sizes else growth_block(deployment)


def resolve_limits(
    profile: Any,
    deployment: int = 0,
    *,
    token_budget: int | None = None,
    max_model_len: int | None = None,
    block_size: int | None = None,
    hash_block_size: int | None = None,
) -> PlanLimits:
    """The :class:`PlanLimits` of ``profile.deployments[deployment]``, overrides applied (04 G-9).

    Defaults: ``resources.max_num_tokens`` as the token budget,
    ``runtime_memory.max_model_len`` (else the profile's ``context_length``),
    the growth block (:func:`growth_block`) and
    ``runtime_memory.hash_block_size_tokens`` (else the block).

    :raises FpmError: rule ``G-9`` for a missing deployment or a non-positive override.
    """
    if not 0 <= deployment < len(profile.deployments):
        raise FpmError(
            "G-9", f"the profile has no deployment {deployment}; it has {len(profile.deployments)}", "deployments"
        )
    for name, value in (
        ("--token-budget", token_budget),
        ("--max-model-len", max_model_len),
        ("block_size", block_size),
        ("hash_block_size", hash_block_size),
    ):
        _positive(name, value)
    dep = profile.deployments[deployment]
    res = dep.resources
    rm = res.runtime_memory
    block = block_size if block_size is not None else _in(f"deployments[{deployment}]", growth_block, dep)
    return PlanLimits(
        token_budget=token_budget if token_budget is not None else res.max_num_tokens,
        max_model_len=max_model_len
        if max_model_len is not None
        else (rm.max_model_len if rm is not None else profile.context_length),
        block_size=block,
        hash_block_size=hash_block_size
        if hash_block_size is not None
        else (rm.hash_block_size_tokens if rm is not None and rm.hash_block_size_tokens is not None else block),
    )


def _in(where: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except FpmError as exc:
        exc.where = f"{where}.{exc.where}" if exc.where else where
        raise


def generate(host: Any, model: str, profile: Any, deployment: int, limits: PlanLimits) -> PointPlan:
    """The point list of the model plugin of ``model`` (``fpm_generate_points``), or the model-agnostic grid
    (:mod:`fpmcore.plan.point_grid`) when no model plugin claims ``model`` or its plugin plans no points."""
    models = host.hooks.model(model)
    if models.plugin is None:
        off = [r for r in host.records if r.id == model and r.status != "ok"]
        if off:  # the plugin named is there but not loaded: never a silent fall-back to the grid
            raise FpmError("plugins", f"model plugin '{model}' is {off[0].status}: {off[0].error}")
    if models.plugin is not None and models.plugin in host.hooks.implementers("fpm_generate_points"):
        return cast(PointPlan, models.generate_points(profile=profile, deployment=deployment, limits=limits))
    from fpmcore.plan import point_grid

    return point_grid.generate_points(profile, deployment, limits)


def check_model_named(host: Any, model: str) -> None:
    """``--model`` names an installed model plugin (its id or a target), or it is refused naming the installed
    ones and the closest: a typo never falls back to the model-agnostic grid."""
    import difflib

    if host.hooks.model(model).plugin is not None:
        return
    if any(r.id == model for r in host.records):  # installed but not loaded: :func:`generate` says why
        return
    names = sorted({n for r in host.active("model") for n in (r.id, *r.targets)})
    close = difflib.get_close_matches(model, names, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise FpmError("plugins", f"--model {model}: no installed model plugin claims it; installed model plugins and "
                              f"their models: {', '.join(names) or 'none'}{hint} (without --model the profile's "
                              "own model is planned)")  # fmt: skip


def profile_launch(dep: Any) -> dict[str, Any]:
    """The launch the deployment was probed with (02 §2.2), as the import recorded it in
    ``runtime_memory.provenance``; ``{}`` when the profile does not carry one."""
    from fpmcore.documents.jsonio import JsonError, loads

    rm = dep.resources.runtime_memory
    try:
        launch = loads(rm.provenance).get("launch") if rm is not None else None
    except (JsonError, AttributeError):
        return {}
    return dict(launch) if isinstance(launch, Mapping) else {}


#: Precision labels of a profile that name the dtype a model is loaded in (``plan["engine"]["dtype"]``).
ENGINE_DTYPES = ("float32", "bfloat16", "half")


def engine_settings(profile: Any, deployment: int) -> dict[str, Any]:
    """What a producer starts its engine with (``plan["engine"]``): the runtime pin and the settings of the
    profile deployment the points were planned for (``fpm collect`` reads it).

    ``cache_block_sizes`` (each group's block, in group order) and
    ``scheduler_block_size`` (I-96) are what the started engine must show
    (:func:`fpmcore.collect.run.deployment_differences`); the plan's
    ``limits`` hold the growth block and the hash block the points are built
    on, which differ from the scheduler block when the groups' blocks differ.
    """
    dep = profile.deployments[deployment]
    res, rm = dep.resources, dep.resources.runtime_memory
    launch = profile_launch(dep)
    collection: Mapping[str, Any] = launch["collection"] if isinstance(launch.get("collection"), Mapping) else {}
    return {
        "runtime": str(RuntimePin(dep.backend_version, dep.backend)),
        "max_model_len": rm.max_model_len if rm is not None else profile.context_length,
        **res.runtime_settings(),
        "prefix_caching": bool(rm is not None and rm.enable_prefix_caching),
        "kv_cache_bytes": rm.kv_cache_bytes if rm is not None else None,
        "pool_page_bytes": res.cache_groups[0].page_size_bytes if res.cache_groups else None,
        "dtype": dep.gemm_quant_mode if dep.gemm_quant_mode in ENGINE_DTYPES else None,
        "launch": dict(collection),
        "cache_block_sizes": cache_block_sizes(dep),
        "scheduler_block_size": scheduler_block_size(dep) if res.cache_groups else None,
    }


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "model"


def collection_cells(profile: Any, deployment: int, plan: PointPlan) -> list[dict[str, Any]]:
    """The collection cells of a plan whose point list names its cells' identity (``report["cell_identity"]``):
    one cell for the full list and one for the smoke subset (05 §6.2).  The cell's ``model_config_sha256`` is
    the digest of the model configuration the deployment was probed with (the launch evidence); without one
    the cell has no configuration-bound identity and is read by the general rules only."""
    ident = plan.report.get("cell_identity")
    if not isinstance(ident, Mapping):
        return []
    launch = profile_launch(profile.deployments[deployment])
    mc: Mapping[str, Any] = launch["model_config"] if isinstance(launch.get("model_config"), Mapping) else {}
    sha = mc.get("sha256") if isinstance(mc.get("sha256"), str) else ""
    cells = []
    for point_set in ("full", "smoke"):
        cells.append({
            "cell_id": f"{_slug(profile.model)}-d{deployment}-{point_set}",
            "point_set": point_set,
            "model": profile.model,
            "model_revision": profile.model_revision,
            "execution_identity": {
                "model_config_sha256": sha,
                "execution_profile": ident["execution_profile"],
                "engram_residency": ident["engram_residency"],
                "input_modality": ident["input_modality"],
            },
        })  # fmt: skip
    return cells


def limits_dict(limits: PlanLimits) -> dict[str, int]:
    return {
        "token_budget": limits.token_budget,
        "max_model_len": limits.max_model_len,
        "block_size": limits.block_size,
        "hash_block_size": limits.hash_block_size,
    }


def plan_document(
    *, model: str, profile: Any, deployment: int, limits: PlanLimits, plan: PointPlan, smoke: bool = False
) -> dict[str, Any]:
    """The plan file content (see the module docstring), ``plan_sha256`` included."""
    from fpmcore.documents.jsonio import digest
    from fpmcore.documents.profile import profile_digest

    doc: dict[str, Any] = {
        "schema": PLAN_SCHEMA,
        "model": model,
        "profile": {
            "model": profile.model,
            "model_revision": profile.model_revision,
            "profile_sha256": profile_digest(profile),
        },
        "deployment": deployment,
        "limits": limits_dict(limits),
        "origin": plan.report.get("origin"),
        "counts": dict(plan.counts),
        "dropped": dict(plan.dropped),
        "digest": plan.digest,
        "points": [dict(p) for p in plan.points],
        "smoke": [dict(p) for p in plan.smoke],
    }
    record = plan.report.get("plan_record")
    if isinstance(record, Mapping):
        doc["options"] = {"benchmark_points": dict(record)}
    cells = collection_cells(profile, deployment, plan)
    if cells:
        doc["engine"] = engine_settings(profile, deployment)
        doc["cells"] = cells
    doc["plan_sha256"] = digest(doc)
    doc["stage"] = STAGES[1] if smoke else STAGES[0]
    return doc


def write_plan(path: str | os.PathLike[str], document: Mapping[str, Any]) -> None:
    """Write the plan file atomically (:func:`fpmcore.documents.output_files.write_file`): keys in the
    order built, two-space indentation, non-ASCII as UTF-8, one trailing newline (the
    file form of 01 §9.1; the plan holds no floats, so orjson's bytes are that form)."""
    import orjson

    from fpmcore.documents.output_files import write_file

    write_file(path, orjson.dumps(dict(document), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))


#: The stages of a plan file: the list a collection measures (04 G-24).
STAGES = ("full", "smoke")


def _identity_schema() -> dict[str, Any]:
    """A cell's execution identity column values (05 §6.2, :func:`fpmcore.validate.cell.cell_identity`)."""
    from fpmcore.documents.schema import HEX64_PATTERN
    from fpmcore.validate.cell import IDENTITY_COLUMNS

    columns: dict[str, Any] = {c: {"type": "string", "minLength": 1} for c in IDENTITY_COLUMNS}
    columns["model_config_sha256"] = {"type": "string", "pattern": HEX64_PATTERN.replace("^", "^(").replace("$", ")?$"),
                                      "description": "empty: no configuration-bound identity"}  # fmt: skip
    return columns


def _cell_schema() -> dict[str, Any]:
    """A frozen collection cell: its unique id and its execution identity, as an object of the four columns
    or as the columns on the cell itself (the reader's :func:`~fpmcore.validate.reader.plan_problem`)."""
    from fpmcore.documents.schema import obj
    from fpmcore.validate.cell import IDENTITY_COLUMNS

    columns = _identity_schema()
    props = {
        "cell_id": {"type": "string", "minLength": 1, "description": "unique within the plan"},
        "point_set": {"type": "string", "description": "full or smoke: the list the cell measures"},
        "model": {"type": "string"},
        "model_revision": {"type": "string"},
        "execution_identity": obj(columns, IDENTITY_COLUMNS, closed=True),
        **columns,
    }
    return obj(props, ("cell_id",))


def plan_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a plan: the file :func:`plan_document` writes, or a frozen collection
    plan of a campaign (``cells`` and its ``sha256``, 05 §6.2).

    Built from the declarations that read and write it: :data:`PLAN_SCHEMA`,
    the fields of :class:`~fpmcore.host.stage_hooktypes.PlanLimits`, the point the
    collection reads (:class:`fpmcore.plan.point_grid.PlanPoint`: its
    fields without default are required), the manifest of 04 G-22
    (:func:`fpmcore.validate.schemas.manifest_schema`), the identity columns of
    05 §6.2 and :data:`ENGINE_DTYPES`.  The model plugin's rules (candidates,
    drops, digests) are checked by the plugin (04 G-26).
    """
    import attrs

    from fpmcore.documents.schema import HEX64_PATTERN, array, enum, obj, schema_document
    from fpmcore.host.stage_hooktypes import PlanLimits
    from fpmcore.plan.point_grid import PlanPoint
    from fpmcore.validate.schemas import manifest_schema

    hex64 = {"type": "string", "pattern": HEX64_PATTERN}
    count = {"type": "integer", "minimum": 0}
    positive = {"type": "integer", "minimum": 1}
    point_props: dict[str, Any] = {}
    for a in attrs.fields(PlanPoint):
        point_props[a.name] = enum(("prefill", "decode")) if a.name == "phase" else (
            positive if a.name in ("benchmark_id", "batch_size") else count)  # fmt: skip
    point = obj(point_props, [a.name for a in attrs.fields(PlanPoint) if a.default is attrs.NOTHING])
    record = obj(
        {
            "origin": {"type": "string"},
            "checkpoint": obj({"blocks": {"type": "boolean"}, "alignment": {"type": ["integer", "null"]}}),
            "candidates": {"type": "object", "additionalProperties": count},
            "dropped": {"type": "object", "additionalProperties": count},
            "manifest_sha256": hex64,
            "smoke_manifest_sha256": hex64,
            "planned_point_count": count,
            "manifest": manifest_schema(),
        },
        description="the plan record of the point list (04 G-25)",
    )
    engine = obj(
        {
            "runtime": {"type": "string", "pattern": "^[^=]+==[^=]+$", "description": "the runtime pin, backend==version"},
            "max_model_len": positive,
            "max_num_batched_tokens": positive,
            "max_num_seqs": positive,
            "prefix_caching": {"type": "boolean"},
            "kv_cache_bytes": {"type": ["integer", "null"], "minimum": 1},
            "pool_page_bytes": {"type": ["integer", "null"], "minimum": 1},
            "dtype": {"enum": [*ENGINE_DTYPES, None]},
            "launch": {"type": "object"},
            "cache_block_sizes": array(positive, description="each cache group's block in tokens, in group order"),
            "scheduler_block_size": {"type": ["integer", "null"], "minimum": 1,
                                     "description": "02 I-96: the one group's block, else the lcm of the group blocks"},
        },
        ("runtime", "max_model_len", "max_num_batched_tokens", "max_num_seqs", "prefix_caching", "kv_cache_bytes",
         "pool_page_bytes", "dtype", "launch"),
        closed=True,
        description="what a producer starts its engine with (engine_settings)",
    )  # fmt: skip
    limits = obj({a.name: positive for a in attrs.fields(PlanLimits)}, [a.name for a in attrs.fields(PlanLimits)],
                 closed=True)  # fmt: skip
    plan_file = obj(
        {
            "schema": enum((PLAN_SCHEMA,)),
            "model": {"type": "string", "minLength": 1},
            "profile": obj({"model": {"type": "string"}, "model_revision": {"type": "string"}, "profile_sha256": hex64},
                           ("model", "model_revision", "profile_sha256"), closed=True),
            "deployment": count,
            "limits": limits,
            "origin": {"type": ["string", "null"]},
            "counts": {"type": "object", "additionalProperties": count, "description": "points per phase"},
            "dropped": {"type": "object", "additionalProperties": count, "description": "candidates dropped per rule"},
            "digest": hex64,
            "points": array(point),
            "smoke": array(point),
            "options": obj({"benchmark_points": record}, ("benchmark_points",), closed=True),
            "engine": engine,
            "cells": array(_cell_schema(), minItems=1),
            "plan_sha256": {**hex64, "description": "digest of every field but itself and stage"},
            "stage": enum(STAGES),
        },
        ("schema", "model", "profile", "deployment", "limits", "origin", "counts", "dropped", "digest", "points",
         "smoke", "plan_sha256", "stage"),
        closed=True,
        title="the plan file of fpm plan",
    )  # fmt: skip
    frozen = obj(
        {"cells": array(_cell_schema(), minItems=1), "sha256": {**hex64, "description": "the plan hash"},
         "options": obj({"benchmark_points": record})},
        ("cells", "sha256"),
        title="a frozen collection plan",
    )  # fmt: skip
    return schema_document(
        "plan",
        "fpmcore plan (04, 05 §6.2)",
        "The benchmark points of one profile deployment and, when the point list names its cells, the "
        "collection cells and the engine settings; or a frozen collection plan with its cells and plan hash.",
        {"oneOf": [plan_file, frozen]},
    )


def json_output(plan: PointPlan) -> dict[str, Any]:
    """The ``--json`` document (``schema`` is added by the CLI)."""
    return {
        "points": [dict(p) for p in plan.points],
        "counts": dict(plan.counts),
        "dropped": dict(plan.dropped),
        "digest": plan.digest,
        "smoke": [dict(p) for p in plan.smoke],
    }


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "-"


def _short(sha: str | None) -> str:
    return f"{sha[:16]}…" if sha else "-"


def render_summary(
    console: Any,
    *,
    model: str,
    profile: Any,
    deployment: int,
    limits: PlanLimits,
    plan: PointPlan,
    smoke: bool = False,
    path: str | None = None,
    plan_sha256: str | None = None,
) -> None:
    """The rich summary: counts per phase, drops per rule, digests, capacity.

    Each count is shown once (the model plugin's log, which repeats them in
    04 G-20's words, is printed by ``fpm plan --verbose``); the model is named
    once unless ``--model`` names it otherwise.  Values from the profile are
    never read as markup.
    """
    from rich.markup import escape
    from rich.table import Table

    report = plan.report
    who = escape(profile.model) if model == profile.model else f"{escape(model)}: {escape(profile.model)}"
    console.print(
        f"[bold]plan[/] {who} @ {escape(profile.model_revision[:12])}, deployment {deployment}"
        + (f", origin {escape(str(report['origin']))}" if report.get("origin") else ""),
        highlight=False,
    )
    console.print(
        f"limits: token budget {limits.token_budget:,}, max_model_len {limits.max_model_len:,}, "
        f"block {limits.block_size:,}, hash block {limits.hash_block_size:,}",
        highlight=False,
    )
    candidates = report.get("candidates") or {}
    phases = Table(title="points per phase", title_justify="left")
    for col in ("phase", "candidates", "points"):
        phases.add_column(col, justify="left" if col == "phase" else "right")
    for phase, n in plan.counts.items():
        phases.add_row(phase, str(candidates.get(phase, "-")), f"{n:,}")
    phases.add_row(
        "total", str(sum(candidates.values())) if candidates else "-", f"{sum(plan.counts.values()):,}", style="bold"
    )
    console.print(phases)
    evaluated = report.get("evaluated") or {}
    rules = Table(title="dropped per rule", title_justify="left")
    for col in ("rule", "dropped", "of"):
        rules.add_column(col, justify="left" if col == "rule" else "right")
    for rule, n in plan.dropped.items():
        rules.add_row(rule, f"{n:,}", str(evaluated.get(rule, "-")))
    print_table(console, rules)
    console.print(f"digest {plan.digest}", highlight=False)
    console.print(f"smoke: {len(plan.smoke)} points, digest {_short(report.get('smoke_digest'))}", highlight=False)
    if smoke:
        table = Table(title="smoke subset", title_justify="left")
        keys = list(dict.fromkeys(k for p in plan.smoke for k in p))
        for k in keys:
            table.add_column(k, justify="left" if k == "phase" else "right")
        for p in plan.smoke:
            table.add_row(*(str(p.get(k, "")) for k in keys))
        print_table(console, table)
    if "capacity_estimate_blocks" in report:
        over = report.get("over_free_points")
        console.print(
            f"capacity needed: estimate {_n(report['capacity_estimate_blocks'])} blocks, exact holding "
            f"{_n(report.get('exact_holding_blocks'))} blocks, free {_n(report.get('free_blocks'))} blocks"
            + (f", {over} kept points hold more than the free blocks" if over else ""),
            highlight=False,
        )
    if path is not None:
        console.print(f"wrote {escape(str(path))} (plan_sha256 {plan_sha256})", highlight=False)


def limits_text(limits: PlanLimits) -> str:
    return (
        f"token budget {limits.token_budget:,}, max_model_len {limits.max_model_len:,}, "
        f"block {limits.block_size:,}, hash block {limits.hash_block_size:,}"
    )


def empty_plan_reason(
    host: Any,
    model: str,
    profile: Any,
    deployment: int,
    limits: PlanLimits,
    plan: PointPlan,
    overrides: Mapping[str, int | None],
) -> str:
    """Why a plan holds no point, naming the limit that removed everything (a negative verdict, G-9).

    When candidates were dropped, the drop counters say by which rule.  When
    the limits left no candidate at all, each command-line override
    (``--max-model-len``, ``--token-budget``) is tried without the others'
    change: the one whose profile default gives points is named.
    """
    dropped = [(rule, n) for rule, n in plan.dropped.items() if n]
    if dropped:
        counts = ", ".join(f"{rule} dropped {n:,}" for rule, n in dropped)
        return f"every candidate point was dropped: {counts} (limits {limits_text(limits)})"
    given = {name: value for name, value in overrides.items() if value is not None}
    for name, value in given.items():
        relaxed = {k: v for k, v in given.items() if k != name}
        try:
            default_limits = resolve_limits(profile, deployment, **relaxed)
            again = generate(host, model, profile, deployment, default_limits)
        except FpmError:
            continue
        n = sum(again.counts.values())
        if n:
            flag = "--" + name.replace("_", "-")
            default = getattr(default_limits, name)
            return (
                f"{flag} {value:,} leaves no candidate point; the profile's {name} {default:,} gives {n:,} "
                f"(raise {flag})"
            )
    return f"the limits leave no candidate point: {limits_text(limits)}"
