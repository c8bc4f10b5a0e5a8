"""Stage B — record envelope and binding (02 §3.1-§3.3, §3.13, §7.2: I-12 to I-20, I-113).

**Layout-level evidence** [beyond reference].  A worker record is *dry* when
its ``lifecycle.measurement`` is ``"cache_planned"``: the runtime planned the
cache (groups, specs, pages, block pool, scheduler) but allocated no tensor,
as ``fpm probe --dry-run`` does.  The attempt's evidence level is that of its
first worker in record order; a worker of the other level is refused (I-113),
so one attempt never mixes dry and live records.  For a dry attempt:

* I-20 wants every dry worker's ``cache_initialized``, ``warmup_completed``
  and ``capture_completed`` ``false`` (and a scheduler still
  ``scheduler_initialized``);
* I-19 accepts in a worker's ``unresolved_fields`` exactly the tensor-level
  paths of :data:`TENSOR_LEVEL_PATHS` (storages, allocated bytes, each
  allocation's storage id and view-derived block stride, layer views,
  attention groups, model runner, hardware); any other path, or an
  ``error``, is still I-19.

Live (tensor-level) evidence is judged exactly as 02 §7.2 says.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fpmcore.documents.record import KEY_SETS
from fpmcore.documents.rules_catalogue import checks
from fpmcore.importer.record_values import first_difference, is_int, show
from fpmcore.importer.state import (
    CACHE_PLANNED,
    LAYOUT,
    RECORD_SCHEMA,
    Finding,
    ImportState,
    Record,
    Refusal,
    guarded,
    per_record,
)

# -- §3.13 key sets, from :data:`fpmcore.documents.record.KEY_SETS` (the one table of them) --------------


def _keyset(name: str) -> tuple[set[str], set[str]]:
    ks = KEY_SETS[name]
    return set(ks.required), set(ks.optional)


_RECORD_W = _keyset("worker record")
_RECORD_S = _keyset("scheduler record")
_KEYS: dict[str, tuple[set[str], set[str]]] = {
    "binding": _keyset("binding"),
    "binding.rank": _keyset("binding.rank"),
    "runtime": _keyset("runtime"),
    "observer": _keyset("observer"),
    "model": _keyset("model"),
    "lifecycle.worker": _keyset("lifecycle (worker)"),
    "lifecycle.scheduler": _keyset("lifecycle (scheduler)"),
    "hardware": _keyset("hardware"),
    "cache.worker": _keyset("cache (worker)"),
    "storage": _keyset("cache.storages[i]"),
    "allocation": _keyset("cache.allocations[i]"),
    "group.worker": _keyset("cache.groups[i] (worker)"),
    "state": _keyset("cache.groups[i].state"),
    "layer_spec": _keyset("cache.groups[i].layer_specs.<layer>"),
    "view": _keyset("cache.layer_views.<layer>[j]"),
    "attention_group": _keyset("cache.attention_groups[j]"),
    "model_runner": _keyset("cache.model_runner"),
    "cache.scheduler": _keyset("cache (scheduler)"),
    "group.scheduler": _keyset("cache.groups[i] (scheduler)"),
    "startup": _keyset("cache.startup"),
}


def _check(obj: Any, keyset: tuple[set[str], set[str]], path: str, missing: list[str], unknown: list[str]) -> bool:
    """Compare one object's keys; return True when it is an object to descend into."""
    if obj is None or not isinstance(obj, dict):
        return False
    required, optional = keyset
    pre = f"{path}." if path else ""
    missing.extend(pre + k for k in required if k not in obj)
    unknown.extend(pre + k for k in obj if k not in required and k not in optional)
    return True


def key_problems(data: Any, kind: str) -> tuple[list[str], list[str]]:
    """The missing and unknown key paths of a record (I-13), each in code-point order."""
    missing: list[str] = []
    unknown: list[str] = []
    worker = kind == "worker"
    if not _check(data, _RECORD_W if worker else _RECORD_S, "", missing, unknown):
        return ["<record>"], []
    for key in ("binding", "runtime", "observer", "model"):
        if _check(data.get(key), _KEYS[key], key, missing, unknown) and key == "binding":
            _check(data["binding"].get("rank"), _KEYS["binding.rank"], "binding.rank", missing, unknown)
    _check(
        data.get("lifecycle"),
        _KEYS["lifecycle.worker" if worker else "lifecycle.scheduler"],
        "lifecycle",
        missing,
        unknown,
    )
    if worker:
        _check(data.get("hardware"), _KEYS["hardware"], "hardware", missing, unknown)
    cache = data.get("cache")
    if _check(cache, _KEYS["cache.worker" if worker else "cache.scheduler"], "cache", missing, unknown):
        groups = cache.get("groups")
        for i, g in enumerate(groups if isinstance(groups, list) else []):
            gp = f"cache.groups[{i}]"
            if not _check(g, _KEYS["group.worker" if worker else "group.scheduler"], gp, missing, unknown):
                continue
            if worker:
                _check(g.get("state"), _KEYS["state"], f"{gp}.state", missing, unknown)
                specs = g.get("layer_specs")
                if isinstance(specs, dict):
                    for layer, spec in specs.items():
                        _check(spec, _KEYS["layer_spec"], f"{gp}.layer_specs.{layer}", missing, unknown)
        if worker:
            for key, name in (
                ("storages", "storage"),
                ("allocations", "allocation"),
                ("attention_groups", "attention_group"),
            ):
                items = cache.get(key)
                for j, item in enumerate(items if isinstance(items, list) else []):
                    _check(item, _KEYS[name], f"cache.{key}[{j}]", missing, unknown)
            views = cache.get("layer_views")
            if isinstance(views, dict):
                for layer, vs in views.items():
                    for j, v in enumerate(vs if isinstance(vs, list) else []):
                        _check(v, _KEYS["view"], f"cache.layer_views.{layer}[{j}]", missing, unknown)
            _check(cache.get("model_runner"), _KEYS["model_runner"], "cache.model_runner", missing, unknown)
        else:
            _check(cache.get("startup"), _KEYS["startup"], "cache.startup", missing, unknown)
    return sorted(missing), sorted(unknown)


# -- the rules ------------------------------------------------------------------


@checks("I-12")
def record_schema_valid(ctx: ImportState, rec: Record) -> None:
    """I-12: the record schema."""
    if not isinstance(rec.data, dict) or rec.data.get("schema_version") != RECORD_SCHEMA:
        value = rec.data.get("schema_version") if isinstance(rec.data, dict) else None
        raise Refusal("I-12", f"unsupported runtime observation schema: {show(value)}")


@checks("I-13")
def record_keys_closed(ctx: ImportState, rec: Record) -> None:
    """I-13: the closed key sets of §3.13, for the record's kind."""
    kind = rec.kind or "worker"
    missing, unknown = key_problems(rec.data, kind)
    if missing or unknown:
        raise Refusal(
            "I-13",
            f"runtime observation has missing or unknown keys: missing [{', '.join(missing)}], "
            f"unknown [{', '.join(unknown)}]",
        )


@checks("I-14")
def binding_matches_index(ctx: ImportState, rec: Record) -> None:
    """I-14: the binding matches the artifact's place in the index; the launch equals the index's."""
    binding = rec.data["binding"]
    expected = {"configuration": ctx.label, "phase": rec.phase, "attempt_id": ctx.attempt_id}
    for key in ("configuration", "phase", "attempt_id"):
        if binding.get(key) != expected[key]:
            actual = binding.get(key)
            raise Refusal("I-14", f"runtime observation binding mismatch: {key}='{actual}', expected '{expected[key]}'")
    diff = first_difference(rec.data["launch"], ctx.launch)
    if diff is not None:
        raise Refusal("I-14", f"runtime observation launch differs from its configuration: {diff}")


def _p(v: Any) -> str:
    return "null" if v is None else str(v) if is_int(v) else show(v)


@checks("I-15")
def kind_and_rank_valid(ctx: ImportState, rec: Record) -> None:
    """I-15: a valid kind and a rank inside the launch topology."""
    binding = rec.data["binding"]
    kind = binding.get("kind")
    rank = binding.get("rank") if isinstance(binding.get("rank"), dict) else {}
    d, t, p = rank.get("dp"), rank.get("tp"), rank.get("pp")
    topo = ctx.launch["topology"]
    msg = f"invalid observed {kind} rank: dp={_p(d)}, tp={_p(t)}, pp={_p(p)}"
    if kind == "worker":
        if not (is_int(d) and 0 <= d < topo["dp"] and is_int(t) and 0 <= t < topo["tp"] and is_int(p) and p == 0):
            raise Refusal("I-15", msg)
    elif kind == "scheduler":
        if not (is_int(d) and 0 <= d < topo["dp"] and t is None and p is None):
            raise Refusal("I-15", msg)
    else:
        raise Refusal("I-15", f"invalid observed {kind} rank: dp={_p(d)}, tp={_p(t)}, pp={_p(p)}")


def expected_name(rec: Record) -> str:
    d, t, p = rec.rank
    if rec.kind == "scheduler":
        return f"runtime-observation-scheduler-dp{d}.json"
    return f"runtime-observation-worker-dp{d}-tp{t}-pp{p}.json"


@checks("I-16")
def file_name_matches_binding(ctx: ImportState, rec: Record) -> None:
    """I-16: the file name names the binding's kind and rank (§2.3)."""
    if rec.file != expected_name(rec):
        raise Refusal("I-16", f"runtime artifact name does not match its binding: {rec.file} holds {rec.subject}")


@checks("I-17")
def no_rank_bound_twice(ctx: ImportState) -> Iterator[Finding]:
    """I-17: two records of one phase bind the same rank (reported on the later)."""
    seen: set[tuple[Any, ...]] = set()
    for rec in ctx.ordered():
        if id(rec) in ctx.failed:
            continue
        key = (rec.phase, rec.kind, rec.rank)
        if key in seen:
            yield rec, "I-17", f"duplicate {rec.kind} rank evidence: {rec.subject}"
        seen.add(key)


@checks("I-18")
def phases_cover_topology(ctx: ImportState) -> Iterator[Finding]:
    """I-18: each phase covers the workers and schedulers the topology implies."""
    topo = ctx.launch["topology"]
    for phase in ("prefill", "decode"):
        have_w = {r.rank for r in ctx.workers(phase) if id(r) not in ctx.failed}
        have_s = {r.dp for r in ctx.schedulers(phase) if id(r) not in ctx.failed}
        missing_w = [
            f"dp{d}-tp{t}-pp0" for d in range(topo["dp"]) for t in range(topo["tp"]) if (d, t, 0) not in have_w
        ]
        if missing_w:
            yield None, "I-18", f"{phase} worker rank evidence is incomplete: missing {', '.join(missing_w)}"
            return
        missing_s = [f"dp{d}" for d in range(topo["dp"]) if d not in have_s]
        if missing_s:
            yield None, "I-18", f"{phase} scheduler rank evidence is incomplete: missing {', '.join(missing_s)}"
            return


#: The worker paths that only allocated tensors (or the device) can resolve; a dry
#: (layout-level) worker may list exactly these in ``unresolved_fields`` (I-19).
TENSOR_LEVEL_PATHS = (
    "cache.storages",
    "cache.allocated_cache_bytes",
    "cache.allocations[<k>].storage_id",
    "cache.allocations[<k>].block_stride",
    "cache.layer_views",
    "cache.layer_views.<layer>",
    "cache.attention_groups",
    "cache.model_runner",
    "cache.model_runner.kernel_block_sizes",
    "hardware.gpu",
    "hardware.sm",
    "hardware.device_name",
    "hardware.total_memory_bytes",
)
_TENSOR_LEVEL = re.compile(
    r"^(?:cache\.storages|cache\.allocated_cache_bytes|cache\.allocations\[\d+\]\.(?:storage_id|block_stride)"
    r"|cache\.layer_views(?:\..+)?|cache\.attention_groups|cache\.model_runner(?:\.kernel_block_sizes)?"
    r"|hardware\.(?:gpu|sm|device_name|total_memory_bytes))$"
)


def tensor_level(path: Any) -> bool:
    """True for a path of :data:`TENSOR_LEVEL_PATHS`."""
    return isinstance(path, str) and bool(_TENSOR_LEVEL.match(path))


@checks("I-113")
def one_evidence_level_per_attempt(ctx: ImportState) -> Iterator[Finding]:
    """I-113 [beyond reference]: one evidence level per attempt (dry or live workers, not both).

    Fixes ``ctx.evidence`` to the level of the first worker in record order.
    """
    workers = [w for w in ctx.workers() if id(w) not in ctx.failed]
    if not workers:
        return
    first = workers[0]
    ctx.evidence = first.level
    for w in workers[1:]:
        if w.level != first.level:
            yield (
                w,
                "I-113",
                (
                    f"runtime evidence mixes layout-level and tensor-level records in one attempt: "
                    f"{first.subject} is {_level_text(first)}, {w.subject} is {_level_text(w)}"
                ),
            )


def _level_text(rec: Record) -> str:
    m = rec.get("lifecycle", "measurement")
    what = "layout-level" if rec.level == LAYOUT else "tensor-level"
    return f"{what} (measurement {show(m)})"


@checks("I-19")
def nothing_unresolved(ctx: ImportState, rec: Record) -> None:
    """I-19: nothing unresolved, no observer error (a dry worker: tensor-level paths only)."""
    fields = rec.data["unresolved_fields"]
    error = rec.data["error"]
    if ctx.layout and rec.is_worker and isinstance(fields, list) and error is None:
        other = [f for f in fields if not tensor_level(f)]
        if other:
            raise Refusal(
                "I-19",
                f"runtime observation has unresolved fields beyond the tensor-level evidence a dry run lacks: "
                f"{', '.join(str(f) for f in other)}: null",
            )
        return
    if fields != [] or error is not None:
        text = ", ".join(str(f) for f in fields) if isinstance(fields, list) else show(fields)
        err = error if isinstance(error, str) else show(error)
        raise Refusal("I-19", f"runtime observation has unresolved fields: {text}: {err}")


@checks("I-20")
def lifecycle_complete(ctx: ImportState, rec: Record) -> None:
    """I-20: cache initialized; a worker after warm-up and capture; a scheduler initialized.

    A dry worker (layout-level attempt): ``cache_planned`` with every flag false.
    A runtime that captures no graphs (``ImportRules.graph_capture`` false,
    a CPU engine) may record ``capture_completed`` false: accepted, noted.
    """
    life = rec.data["lifecycle"]
    if not isinstance(life, dict):
        raise Refusal("I-20", "cache initialization lifecycle evidence is missing")
    if rec.kind == "worker" and ctx.layout:
        flags = [k for k in ("cache_initialized", "warmup_completed", "capture_completed") if life.get(k) is not False]
        if life.get("measurement") != CACHE_PLANNED or flags:
            raise Refusal(
                "I-20", f"worker cache planning lifecycle evidence is inconsistent: {', '.join(flags)} not false"
            )
        return
    if not isinstance(life, dict) or life.get("cache_initialized") is not True:
        raise Refusal("I-20", "cache initialization lifecycle evidence is missing")
    if rec.kind == "worker":
        captured = life.get("capture_completed") is True
        if life.get("capture_completed") is False and not ctx.rules_of(rec).graph_capture:
            captured = True  # the runtime captures no graphs (ImportRules.graph_capture)
            ctx.note(
                "I-20",
                f"capture_completed false: vLLM {rec.get('runtime', 'version')} captures no graphs "
                "on its platform (runtime rule graph_capture)",
            )
        if not (life.get("measurement") == "after_warmup" and life.get("warmup_completed") is True and captured):
            raise Refusal("I-20", "worker warmup and graph capture completion evidence is missing")
    elif life.get("measurement") != "scheduler_initialized":
        raise Refusal("I-20", "scheduler initialization lifecycle evidence is missing")


RULES = [
    per_record(record_schema_valid),
    per_record(record_keys_closed),
    per_record(binding_matches_index),
    per_record(kind_and_rank_valid),
    per_record(file_name_matches_binding),
    guarded(no_rank_bound_twice),
    guarded(phases_cover_topology),
    guarded(one_evidence_level_per_attempt),
    per_record(nothing_unresolved),
    per_record(lifecycle_complete),
]
