"""Stages E and F — cache groups, class tables, state and checkpoint evidence.

02 §3.7, §3.11, §5, §7.5 (I-40 to I-52) and §7.6 (I-53 to I-61).

With hybrid evidence, classes are classified by the record's runtime plugin
(``fpm_classify_spec``, 02 §5.2).  Without hybrid evidence, 02 §5.1 applies
"whatever its version": the plugin of the record's version gives that table
(``ImportRules.classify_plain``), or its ``fpm_classify_spec`` answers when
it gives none.  State families, the ``prefix_cacheable`` class rule and the
startup reservation (03 C-1) are the plugin's too (:class:`~fpmcore.host.stage_hooktypes.ImportRules`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

from fpmcore.documents.rules_catalogue import checks
from fpmcore.host.stage_hooktypes import SpecClassification, StartupLimits
from fpmcore.importer import capacity
from fpmcore.importer.launch_settings import rule_label
from fpmcore.importer.record_values import first_difference, is_int, layers_label, same, show
from fpmcore.importer.state import Finding, ImportState, Record, Refusal, guarded, per_record

_EMPTY: dict[str, Any] = {}

#: I-47: storage dtypes of each KV label
STORAGE_DTYPES = {
    "bfloat16": ("torch.bfloat16",),
    "half": ("torch.float16",),
    "float32": ("torch.float32",),
    "fp8": ("torch.uint8", "torch.float8_e4m3fn", "torch.float8_e5m2"),
}

WORKER_GROUP_ORDER = (
    "group_id",
    "spec_class",
    "kind",
    "layer_names",
    "block_size_tokens",
    "page_size_bytes",
    "sliding_window",
    "prefix_cacheable",
    "host_resident",
    "role",
    "startup_blocks_per_request",
    "state",
    "layer_specs",
)
STATE_ORDER = (
    "blocks_per_request",
    "num_speculative_blocks",
    "num_prefill_checkpoint_blocks",
    "prefill_checkpoint_alignment",
    "mamba_cache_mode",
)


def classify(ctx: ImportState, spec_class: Any, fields: Any) -> SpecClassification:
    """The class table of the record's runtime (02 §5; without hybrid evidence the plugin's §5.1 table)."""
    if not isinstance(spec_class, str):
        return SpecClassification(kind="unsupported", reason="class is not a string")
    plain = ctx.runtime_rules.classify_plain
    if not ctx.hybrid and plain is not None:
        return plain(spec_class)
    spec = fields if isinstance(fields, dict) and fields else _EMPTY
    memo = ctx.extra.setdefault("classify", {})
    key = (spec_class, id(spec))
    if key not in memo:  # one plugin call per recorded spec object (kept alive, so its id stays unique)
        answer = ctx.services.classify(ctx.runtime_pin or "", spec_class, spec)
        if answer is None:
            answer = SpecClassification(kind="unsupported", reason=f"no class table for vLLM {ctx.version}")
        memo[key] = (spec, answer)
    return cast(SpecClassification, memo[key][1])


def layer_entries(group: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(layer, layer spec)`` in ``layer_names`` order (hybrid worker groups)."""
    specs = group.get("layer_specs")
    names = group.get("layer_names")
    if not isinstance(specs, dict) or not isinstance(names, list):
        return []
    out = []
    for name in names:
        spec = specs.get(name) if isinstance(name, str) else None
        out.append((name, spec if isinstance(spec, dict) else {}))
    return out


def fields_of(spec: dict[str, Any]) -> dict[str, Any]:
    f = spec.get("fields")
    return f if isinstance(f, dict) else {}


def spec_window(ctx: ImportState, cls: Any, fields: dict[str, Any]) -> Any:
    """``get_kv_cache_spec_sliding_window`` of one (non-uniform) spec."""
    c = classify(ctx, cls, fields)
    return fields.get("sliding_window") if c.windowed else None


def group_chunk(ctx: ImportState, g: dict[str, Any]) -> int | None:
    """The ``attention_chunk_size`` of a hybrid worker group whose layers are chunked-local, else ``None``.

    I-46 has checked that every such layer holds one positive chunk.
    """
    for _name, spec in layer_entries(g):
        f = fields_of(spec)
        if classify(ctx, spec.get("class"), f).chunked and is_int(f.get("attention_chunk_size")):
            return int(f["attention_chunk_size"])
    return None


def spec_cacheable(ctx: ImportState, cls: Any, fields: dict[str, Any]) -> bool:
    """The runtime's class rule of ``prefix_cacheable`` (I-44); a class that is not a string has none."""
    return ctx.runtime_rules.prefix_cacheable(cls, fields) if isinstance(cls, str) else True


def is_mamba(ctx: ImportState, cls: Any) -> bool:
    """A Mamba state spec class of the runtime (``state_family`` ``"mamba"``)."""
    return isinstance(cls, str) and ctx.runtime_rules.state_family(cls) == "mamba"


def limits(ctx: ImportState, rec: Record) -> StartupLimits:
    """The C-1 inputs of a record's settings; C-2's batches in flight are the runtime's."""
    s = rec
    batches = ctx.runtime_rules.in_flight_batches(
        s.setting("parallel", "pipeline_parallel_size"),
        s.setting("scheduler", "async_scheduling") is True,
        s.settings.get("model_runner"),
    )
    T = capacity.in_flight_tokens(s.setting("scheduler", "max_num_batched_tokens"), batches)
    return StartupLimits(
        max_model_len=s.setting("model", "max_model_len"),
        in_flight_tokens=T,
        dcp=s.setting("parallel", "decode_context_parallel_size"),
        mamba_cache_mode=s.setting("cache", "mamba_cache_mode"),
    )


def group_startup(ctx: ImportState, rec: Record, group: dict[str, Any]) -> tuple[int, str] | None:
    """C-1/C-3 for a worker group (max over its layer specs) or a scheduler copy.

    C-1 is the runtime's (``ImportRules.startup_blocks``); ``None`` when it
    cannot be computed from the record.
    """
    lim = limits(ctx, rec)
    startup = ctx.runtime_rules.startup_blocks

    def blocks(cls: Any, fields: dict[str, Any], block_size: Any) -> tuple[int, str] | None:
        return startup(cls, fields, block_size, lim) if isinstance(cls, str) else None

    if rec.is_worker:
        best: tuple[int, str] | None = None
        for _name, spec in layer_entries(group):
            got = blocks(spec.get("class"), fields_of(spec), spec.get("block_size"))
            if got is None:
                return None
            if best is None or got[0] > best[0]:
                best = got
        return best
    fields = group.get("spec_fields")
    if not isinstance(fields, dict):
        return None
    return blocks(group.get("spec_class"), fields, group.get("block_size_tokens"))


# ==========================================================================
# stage E
# ==========================================================================


@checks("I-40")
def groups_well_formed(ctx: ImportState, rec: Record) -> None:
    """I-40: groups present, numbered by position, each with layers, no layer twice."""
    groups = rec.cache.get("groups")
    if not isinstance(groups, list) or not groups:
        raise Refusal("I-40", "runtime cache groups are malformed: no groups")
    seen: set[str] = set()
    for i, g in enumerate(groups):
        if not isinstance(g, dict):
            raise Refusal("I-40", f"runtime cache groups are malformed: group {i} is not an object")
        if not same(g.get("group_id"), i):
            raise Refusal(
                "I-40", f"runtime cache groups are malformed: group_id {show(g.get('group_id'))} at position {i}"
            )
        names = g.get("layer_names")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise Refusal("I-40", f"runtime cache groups are malformed: group {i} has no layers")
        for name in names:
            if name in seen:
                raise Refusal("I-40", f"layer appears in more than one cache group: {name}")
            seen.add(name)
        if rec.is_worker and rec.hybrid:
            specs = g.get("layer_specs")
            if not isinstance(specs, dict) or set(specs) != set(names):
                raise Refusal(
                    "I-40", f"runtime cache groups are malformed: group {i} layer_specs do not match its layer_names"
                )


def _unsupported(c: SpecClassification, cls: Any, where: str) -> Refusal:
    return Refusal("I-41", f"unsupported runtime cache spec: {cls} ({c.reason}): {where}")


@checks("I-41")
def classes_supported(ctx: ImportState, rec: Record) -> None:
    """I-41: every group class and, with hybrid evidence, every layer class is supported."""
    for i, g in enumerate(rec.groups):
        fields = g.get("spec_fields") if not rec.is_worker else {}
        c = classify(ctx, g.get("spec_class"), fields)
        if c.kind == "unsupported":
            raise _unsupported(c, g.get("spec_class"), f"group {i}")
        if rec.is_worker and rec.hybrid:
            for name, spec in layer_entries(g):
                lc = classify(ctx, spec.get("class"), fields_of(spec))
                if lc.kind == "unsupported" or lc.composite:
                    reason = (
                        lc
                        if lc.kind == "unsupported"
                        else SpecClassification("unsupported", reason="nested uniform spec")
                    )
                    raise _unsupported(reason, spec.get("class"), name)


def group_kind(ctx: ImportState, rec: Record, g: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """The class-table kind of a worker group and, for a uniform group, each layer's kind."""
    c = classify(ctx, g.get("spec_class"), {})
    if not (rec.hybrid and rec.is_worker):
        return c.kind, []
    kinds: list[tuple[str, str]] = [
        (name, classify(ctx, spec.get("class"), fields_of(spec)).kind) for name, spec in layer_entries(g)
    ]
    if c.composite:
        return (kinds[0][1] if kinds else c.kind), kinds
    return c.kind, kinds


@checks("I-42")
def uniform_group_of_one_kind(ctx: ImportState, rec: Record) -> None:
    """I-42: a uniform group holds inner specs of one kind."""
    if not (rec.is_worker and rec.hybrid):
        return
    for i, g in enumerate(rec.groups):
        if not classify(ctx, g.get("spec_class"), {}).composite:
            continue
        _k, kinds = group_kind(ctx, rec, g)
        for name, kind in kinds[1:]:
            if kind != kinds[0][1]:
                raise Refusal(
                    "I-42",
                    f"uniform cache group {i} mixes cache kinds: {kinds[0][1]} ({kinds[0][0]}) and {kind} ({name})",
                )


@checks("I-43")
def kind_matches_class_table(ctx: ImportState, rec: Record) -> None:
    """I-43: the recorded kind is the class table's."""
    if not rec.is_worker:
        return
    for i, g in enumerate(rec.groups):
        kind, _ = group_kind(ctx, rec, g)
        if g.get("kind") != kind:
            raise Refusal(
                "I-43",
                f"cache group {i} records kind {show(g.get('kind'))}, but vLLM {ctx.version} classes give '{kind}'",
            )


def derived_geometry(ctx: ImportState, g: dict[str, Any]) -> dict[str, Any]:
    """What a hybrid worker group's layer specs give for its group-level fields (I-44)."""
    entries = layer_entries(g)
    uniform = classify(ctx, g.get("spec_class"), {}).composite
    pages = [spec.get("page_size_bytes") for _n, spec in entries]
    windows = {
        repr(spec_window(ctx, spec.get("class"), fields_of(spec))): spec_window(ctx, spec.get("class"), fields_of(spec))
        for _n, spec in entries
    }
    if uniform:
        page = sum(p for p in pages if is_int(p)) if all(is_int(p) for p in pages) else None
        window = next(iter(windows.values())) if len(windows) == 1 else None
    else:
        page = pages[0] if pages else None
        window = next(iter(windows.values())) if windows else None
    cacheable = all(spec_cacheable(ctx, spec.get("class"), fields_of(spec)) for _n, spec in entries)
    return {"page_size_bytes": page, "sliding_window": window, "prefix_cacheable": cacheable}


@checks("I-44")
def hybrid_group_matches_layer_specs(ctx: ImportState, rec: Record) -> None:
    """I-44: a hybrid group record agrees with its layer specs."""
    if not (rec.is_worker and rec.hybrid):
        return
    for i, g in enumerate(rec.groups):
        msg = f"cache group {i} geometry contradicts its layer specs: "
        for _name, spec in layer_entries(g):
            # the spec's block size and its dataclass field (as JSON values: false is not a block size)
            for given in (spec.get("block_size"), fields_of(spec).get("block_size", g.get("block_size_tokens"))):
                if not same(given, g.get("block_size_tokens")):
                    raise Refusal(
                        "I-44",
                        msg + f"block_size_tokens {show(g.get('block_size_tokens'))}, layer specs give {show(given)}",
                    )
        derived = derived_geometry(ctx, g)
        for key in ("page_size_bytes", "sliding_window", "prefix_cacheable"):
            if not same(g.get(key), derived[key]):
                raise Refusal("I-44", msg + f"{key} {show(g.get(key))}, layer specs give {show(derived[key])}")


def _layer_windows(ctx: ImportState, rec: Record) -> Iterator[tuple[str, SpecClassification, dict[str, Any]]]:
    for g in rec.groups:
        if rec.is_worker and rec.hybrid:
            for name, spec in layer_entries(g):
                f = fields_of(spec)
                yield name, classify(ctx, spec.get("class"), f), f
        elif rec.is_worker:
            names = g.get("layer_names") or ["group"]
            yield names[0], classify(ctx, g.get("spec_class"), {}), {"sliding_window": g.get("sliding_window")}


@checks("I-45")
def windows_match_class(ctx: ImportState, rec: Record) -> None:
    """I-45: full attention declares no window; a window class has a positive window."""
    for name, c, f in _layer_windows(ctx, rec):
        if c.kind != "attention":
            continue
        w = f.get("sliding_window")
        if c.windowed:
            if not (is_int(w) and w > 0):
                raise Refusal("I-45", f"sliding-window cache requires a positive window: {name}")
        elif w is not None:
            raise Refusal("I-45", f"full-attention cache cannot declare sliding retention: {name}")


@checks("I-46")
def retention_and_chunks_valid(ctx: ImportState, rec: Record) -> None:
    """I-46: no extra retained tokens; an attention chunk exactly on chunked-local layers, one positive chunk per group.

    A group's layers are all chunked-local (with one chunk) or none is.
    """
    if not (rec.is_worker and rec.hybrid):
        return
    for g in rec.groups:
        chunks: set[Any] = set()
        for name, spec in layer_entries(g):
            f = fields_of(spec)
            chunk = f.get("attention_chunk_size")
            chunked = classify(ctx, spec.get("class"), f).chunked
            chunks.add(chunk if chunked else None)
            if ("extra_retained_tokens" in f and not same(f["extra_retained_tokens"], 0)) or (
                (chunk is not None) != chunked or (chunked and not (is_int(chunk) and chunk > 0)) or len(chunks) > 1
            ):
                raise Refusal("I-46", f"unsupported or unresolved extra/chunk cache retention: {name}")


def is_indexer(fields: dict[str, Any]) -> bool:
    return fields.get("cache_role") == "INDEXER"


@checks("I-47")
def attention_layers_store_kv_precision(ctx: ImportState, rec: Record) -> None:
    """I-47: attention layers store the requested KV precision (the sparse indexer is exempt)."""
    if not (rec.is_worker and rec.hybrid):
        return
    label = rule_label(ctx, rec, "I-47")
    allowed = STORAGE_DTYPES.get(label or "", ())
    for g in rec.groups:
        if g.get("kind") != "attention":
            continue
        for name, spec in layer_entries(g):
            f = fields_of(spec)
            if is_indexer(f):
                continue
            if f.get("dtype") not in allowed:
                raise Refusal(
                    "I-47",
                    f"cache group dtype contradicts requested KV precision: {name} holds {show(f.get('dtype'))}, expected {', '.join(allowed)}",
                )


def group_difference(a: Any, b: Any) -> str | None:
    """First difference of two worker group records, in the comparison order of 02 §3.7."""
    if same(a, b):
        return None
    if not isinstance(a, dict) or not isinstance(b, dict):
        return ""
    for key in WORKER_GROUP_ORDER + tuple(sorted((set(a) | set(b)) - set(WORKER_GROUP_ORDER))):
        if key not in a and key not in b:
            continue
        if key not in a or key not in b:
            return str(key)
        va, vb = a[key], b[key]
        if key == "layer_names":
            if not same(va, vb):
                return str(key)
        elif key == "state" and isinstance(va, dict) and isinstance(vb, dict):
            d = first_difference(va, vb, "state", key_order=STATE_ORDER)
            if d is not None:
                return d
        elif key == "layer_specs" and isinstance(va, dict) and isinstance(vb, dict):
            names: list[Any] = a["layer_names"] if isinstance(a.get("layer_names"), list) else sorted(va)
            for layer in list(names) + sorted((set(va) | set(vb)) - set(names)):
                base = f"layer_specs.{layer}"
                if layer not in va or layer not in vb:
                    return base
                d = first_difference(
                    va[layer], vb[layer], base, key_order=("class", "block_size", "page_size_bytes", "fields")
                )
                if d is not None:
                    return d
        else:
            d = first_difference(va, vb, key)
            if d is not None:
                return d
    return None


@checks("I-49")
def worker_groups_agree_across_ranks(ctx: ImportState) -> Iterator[Finding]:
    """I-49: the worker groups of one phase agree across TP ranks."""
    for phase in ("prefill", "decode"):
        workers = [w for w in ctx.workers(phase) if id(w) not in ctx.failed]
        for w in workers[1:]:
            first = workers[0]
            for i, (ga, gb) in enumerate(zip(first.groups, w.groups)):
                key = group_difference(ga, gb)
                if key is not None:
                    yield (
                        w,
                        "I-49",
                        f"cache geometry differs across ranks of {phase}: group {i} {key} ({first.subject} vs {w.subject})",
                    )
                    break
            else:
                if len(first.groups) != len(w.groups):
                    yield (
                        w,
                        "I-49",
                        f"cache geometry differs across ranks of {phase}: group {min(len(first.groups), len(w.groups))} group_id ({first.subject} vs {w.subject})",
                    )


def _first_worker(ctx: ImportState, s: Record) -> Record | None:
    for w in ctx.workers(s.phase):
        if w.dp == s.dp:
            return w
    return None


@checks("I-50")
def scheduler_group_count_matches_workers(ctx: ImportState, rec: Record) -> None:
    """I-50: the scheduler holds as many groups as its workers."""
    if rec.is_worker:
        return
    w = _first_worker(ctx, rec)
    if w is not None and len(w.groups) != len(rec.groups):
        raise Refusal(
            "I-50",
            f"worker and scheduler cache group counts disagree: worker {len(w.groups)}, scheduler {len(rec.groups)}",
        )


def expected_copy(ctx: ImportState, worker: Record, g: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The scheduler copy of a worker group (02 §3.11) and the first layer it comes from."""
    copy = {
        "layer_names": g.get("layer_names"),
        "spec_class": g.get("spec_class"),
        "block_size_tokens": g.get("block_size_tokens"),
        "page_size_bytes": g.get("page_size_bytes"),
        "sliding_window": g.get("sliding_window"),
        "prefix_cacheable": g.get("prefix_cacheable"),
        "startup_blocks_per_request": g.get("startup_blocks_per_request"),
    }
    if not worker.hybrid:
        return copy, None
    entries = layer_entries(g)
    if not entries:
        return copy, None
    name, spec = entries[0]
    f = fields_of(spec)
    copy["spec_fields"] = f
    if classify(ctx, g.get("spec_class"), {}).composite:
        copy.update(
            spec_class=spec.get("class"),
            block_size_tokens=spec.get("block_size"),
            page_size_bytes=spec.get("page_size_bytes"),
            sliding_window=spec_window(ctx, spec.get("class"), f),
            prefix_cacheable=spec_cacheable(ctx, spec.get("class"), f),
        )
        return copy, name
    return copy, None


_COPY_ORDER = (
    "layer_names",
    "spec_class",
    "block_size_tokens",
    "page_size_bytes",
    "sliding_window",
    "prefix_cacheable",
    "startup_blocks_per_request",
    "spec_fields",
)


@checks("I-51")
def scheduler_groups_copy_worker_groups(ctx: ImportState, rec: Record) -> None:
    """I-51: each scheduler group is the engine core's copy of the worker group."""
    if rec.is_worker:
        return
    w = _first_worker(ctx, rec)
    if w is None:
        return
    for i, (wg, sg) in enumerate(zip(w.groups, rec.groups)):
        copy, layer = expected_copy(ctx, w, wg)
        for key in _COPY_ORDER:
            if key not in copy:
                continue
            if key == "spec_fields" and isinstance(copy[key], dict) and isinstance(sg.get(key), dict):
                d = first_difference(sg[key], copy[key], key)
            elif key == "layer_names":
                d = None if same(sg.get(key), copy[key]) else key
            else:
                d = first_difference(sg.get(key), copy[key], key) if key in sg else key
            if d is not None:
                sv = value_at(sg, d)
                wv = value_at(copy, d)
                where = f"in the first layer spec {layer}" if layer else "in the worker group"
                raise Refusal(
                    "I-51",
                    f"worker and scheduler cache group geometry disagrees: group {i}: {d} {sv} in the scheduler, {wv} {where}",
                )


def value_at(obj: Any, path: str) -> str:
    """The printed value at a key path (keys may hold dots: layer names), or ``absent``."""
    cur, rest = obj, path
    while rest:
        if rest.startswith("["):
            idx, _, rest = rest[1:].partition("]")
            rest = rest[1:] if rest.startswith(".") else rest
            if not isinstance(cur, list) or not idx.isdigit() or int(idx) >= len(cur):
                return "absent"
            cur = cur[int(idx)]
            continue
        if not isinstance(cur, dict):
            return "absent"
        match = None
        for key in cur:
            if rest == key or rest.startswith(key + ".") or rest.startswith(key + "["):
                if match is None or len(key) > len(match):
                    match = key
        if match is None:
            return "absent"
        cur, rest = cur[match], rest[len(match) :]
        rest = rest[1:] if rest.startswith(".") else rest
    return show(cur)


@checks("I-52")
def shared_pool_placement_only(ctx: ImportState, rec: Record) -> None:
    """I-52: shared-pool placement only (no host-resident group, default roles)."""
    for i, g in enumerate(rec.groups):
        if g.get("host_resident") is not False or g.get("role") != "default":
            raise Refusal(
                "I-52",
                f"HiSparse placement is unsupported: group {i} (role {show(g.get('role'))}, host_resident {show(g.get('host_resident'))})",
            )
    if rec.is_worker and rec.cache.get("placement") != "shared_pool":
        g = rec.groups[0]
        raise Refusal(
            "I-52",
            f"HiSparse placement is unsupported: group 0 (role {show(g.get('role'))}, host_resident {show(g.get('host_resident'))})",
        )


STAGE_E = [
    per_record(groups_well_formed),
    per_record(classes_supported),
    per_record(uniform_group_of_one_kind),
    per_record(kind_matches_class_table),
    per_record(hybrid_group_matches_layer_specs),
    per_record(windows_match_class),
    per_record(retention_and_chunks_valid),
    per_record(attention_layers_store_kv_precision),
    guarded(worker_groups_agree_across_ranks),
    per_record(scheduler_group_count_matches_workers),
    per_record(scheduler_groups_copy_worker_groups),
    per_record(shared_pool_placement_only),
]


def finish_e(ctx: ImportState) -> None:
    """Fix the class-table kind of each group: of the first worker (the draft's), and of every worker."""
    first = ctx.workers()[0]
    ctx.kinds = [group_kind(ctx, first, g)[0] for g in first.groups]
    ctx.extra["kinds"] = {id(w): [group_kind(ctx, w, g)[0] for g in w.groups] for w in ctx.workers()}


def kinds_of(ctx: ImportState, rec: Record) -> list[str]:
    """The class-table kind of each group of a worker record."""
    return cast(list[str], ctx.extra["kinds"][id(rec)])


# ==========================================================================
# stage F
# ==========================================================================


def _label(g: dict[str, Any], i: int) -> str:
    names = g.get("layer_names")
    return layers_label(i, names if isinstance(names, list) else [])


def mamba_group(ctx: ImportState, g: dict[str, Any]) -> bool:
    """A state group whose layers are all Mamba specs (not a ring group)."""
    entries = layer_entries(g)
    return bool(entries) and all(is_mamba(ctx, spec.get("class")) for _n, spec in entries)


@checks("I-53")
def only_state_groups_hold_state(ctx: ImportState, rec: Record) -> None:
    """I-53: exactly the state groups hold a ``state`` object."""
    if not rec.is_worker:
        return
    for i, g in enumerate(rec.groups):
        has = isinstance(g.get("state"), dict)
        if kinds_of(ctx, rec)[i] == "state" and not has:
            raise Refusal("I-53", f"runtime state cache group lacks state evidence: {_label(g, i)}")
        if kinds_of(ctx, rec)[i] != "state" and "state" in g:
            raise Refusal("I-53", f"runtime cache group holds state evidence but is not a state group: group {i}")


def _mamba_groups(ctx: ImportState, rec: Record) -> Iterator[tuple[int, dict[str, Any], dict[str, Any]]]:
    for i, g in enumerate(rec.groups):
        if kinds_of(ctx, rec)[i] == "state" and mamba_group(ctx, g):
            yield i, g, g["state"]


@checks("I-54")
def mamba_state_has_checkpoint_keys(ctx: ImportState, rec: Record) -> None:
    """I-54: a Mamba group's state holds both checkpoint keys."""
    if not rec.is_worker:
        return
    for i, g, st in _mamba_groups(ctx, rec):
        if "num_prefill_checkpoint_blocks" not in st or "prefill_checkpoint_alignment" not in st:
            raise Refusal("I-54", f"runtime state cache group lacks prefill checkpoint evidence: {_label(g, i)}")


@checks("I-55")
def checkpoint_count_zero_or_one(ctx: ImportState, rec: Record) -> None:
    """I-55: the checkpoint count is the integer 0 or 1."""
    if not rec.is_worker:
        return
    for i, g, st in _mamba_groups(ctx, rec):
        c = st["num_prefill_checkpoint_blocks"]
        if not (is_int(c) and c in (0, 1)):
            raise Refusal("I-55", f"mamba prefill checkpoint blocks must be 0 or 1: {_label(g, i)}")


@checks("I-56")
def checkpoint_count_and_alignment_paired(ctx: ImportState, rec: Record) -> None:
    """I-56: (0, null) or (1, a positive alignment)."""
    if not rec.is_worker:
        return
    for i, g, st in _mamba_groups(ctx, rec):
        c, a = st["num_prefill_checkpoint_blocks"], st["prefill_checkpoint_alignment"]
        if not ((c == 0 and a is None) or (c == 1 and is_int(a) and a > 0)):
            raise Refusal("I-56", f"mamba prefill checkpoint evidence is inconsistent: {_label(g, i)}")


@checks("I-57")
def no_speculative_mamba_blocks(ctx: ImportState, rec: Record) -> None:
    """I-57: no speculative Mamba blocks."""
    if not rec.is_worker:
        return
    for i, g, st in _mamba_groups(ctx, rec):
        k = st.get("num_speculative_blocks", 0)
        if not same(k, 0):
            raise Refusal(
                "I-57",
                f"speculative Mamba state blocks are unsupported: {_label(g, i)} (num_speculative_blocks {show(k)})",
            )


@checks("I-58")
def mamba_mode_all_refused(ctx: ImportState, rec: Record) -> None:
    """I-58: Mamba cache mode ``all`` is refused (layer specs, state, settings)."""
    if not rec.is_worker:
        return
    groups = list(_mamba_groups(ctx, rec))
    for i, g, st in groups:
        modes = [st.get("mamba_cache_mode")] + [fields_of(s).get("mamba_cache_mode") for _n, s in layer_entries(g)]
        if "all" in modes:
            raise Refusal("I-58", f"runtime Mamba cache mode 'all' is not supported: {_label(g, i)}")
    if groups and rec.setting("cache", "mamba_cache_mode") == "all":
        i, g, _st = groups[0]
        raise Refusal("I-58", f"runtime Mamba cache mode 'all' is not supported: {_label(g, i)}")


@checks("I-59")
def state_summary_matches_mamba_specs(ctx: ImportState, rec: Record) -> None:
    """I-59: the state summary agrees with every Mamba layer spec and the resolved mode."""
    if not rec.is_worker:
        return
    for i, g, st in _mamba_groups(ctx, rec):
        for key in (
            "num_speculative_blocks",
            "num_prefill_checkpoint_blocks",
            "prefill_checkpoint_alignment",
            "mamba_cache_mode",
        ):
            for name, spec in layer_entries(g):
                value = fields_of(spec).get(key)
                if not same(st.get(key), value):
                    raise Refusal(
                        "I-59",
                        f"state evidence of cache group {i} contradicts its layer specs: {key} {show(st.get(key))}, layer {name} holds {show(value)}",
                    )
        mode = rec.setting("cache", "mamba_cache_mode")
        if not same(st.get("mamba_cache_mode"), mode):
            raise Refusal(
                "I-59",
                f"state evidence of cache group {i} contradicts its layer specs: mamba_cache_mode {show(st.get('mamba_cache_mode'))}, layer settings.cache.mamba_cache_mode holds {show(mode)}",
            )


@checks("I-60")
def steady_block_count_as_resolved(ctx: ImportState, rec: Record) -> None:
    """I-60: the steady count is ``1 + k`` (Mamba) or 1 (ring) (03 C-12)."""
    if not rec.is_worker:
        return
    for i, g in enumerate(rec.groups):
        if kinds_of(ctx, rec)[i] != "state":
            continue
        st = g["state"]
        want = 1 + st.get("num_speculative_blocks", 0) if mamba_group(ctx, g) else 1
        if not same(st.get("blocks_per_request"), want):
            raise Refusal(
                "I-60",
                f"runtime state group {i} records blocks_per_request {show(st.get('blocks_per_request'))}, but its spec holds {want} between block boundaries",
            )


@checks("I-61")
def startup_block_count_as_resolved(ctx: ImportState, rec: Record) -> None:
    """I-61 [beyond reference]: every group's startup count is C-1 for its spec (workers and schedulers)."""
    if not rec.hybrid:
        return
    for i, g in enumerate(rec.groups):
        got = group_startup(ctx, rec, g)
        if got is None:
            continue
        want, formula = got
        if not same(g.get("startup_blocks_per_request"), want):
            raise Refusal(
                "I-61",
                f"cache group {i} records startup_blocks_per_request {show(g.get('startup_blocks_per_request'))}, but vLLM {ctx.runtime_rules.version} reserves {want} ({formula})",
            )


STAGE_F = [
    per_record(only_state_groups_hold_state),
    per_record(mamba_state_has_checkpoint_keys),
    per_record(checkpoint_count_zero_or_one),
    per_record(checkpoint_count_and_alignment_paired),
    per_record(no_speculative_mamba_blocks),
    per_record(mamba_mode_all_refused),
    per_record(state_summary_matches_mamba_specs),
    per_record(steady_block_count_as_resolved),
    per_record(startup_block_count_as_resolved),
]
