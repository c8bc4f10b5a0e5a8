"""Stage D — launch agreement and resolved settings (02 §3.4, §7.4: I-27 to I-39)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from fpmcore.documents.rules_catalogue import checks
from fpmcore.host.stage_hooktypes import MODEL_DTYPE_LABELS
from fpmcore.importer.record_values import is_int, is_number, same, show
from fpmcore.importer.state import Finding, ImportState, Record, Refusal, guarded, per_record

# -- §3.4: section -> key -> (type check, null allowed in a record without hybrid evidence) --
# A runtime may leave more settings null than §3.4 allows: its ``ImportRules.nullable_settings``.

_int = is_int
_num = is_number


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _int_or_null(v: Any) -> bool:
    return v is None or is_int(v)


def _obj_or_null(v: Any) -> bool:
    return v is None or isinstance(v, dict)


SETTINGS: dict[str, dict[str, tuple[Callable[[Any], bool], bool]]] = {
    "model": {"max_model_len": (_int, False), "dtype": (_str, False)},
    "cache": {
        "block_size": (_int, False),
        "gpu_memory_utilization": (_num, False),
        "enable_prefix_caching": (_bool, False),
        "mamba_cache_mode": (lambda v: v in ("none", "align", "all"), True),
        "mamba_block_size": (_int_or_null, True),
        "prefix_match_unit": (_int_or_null, True),
        "hash_block_size": (_int, True),
        "kv_cache_dtype": (_str, False),
        "kv_cache_layout": (_str, True),
        "num_gpu_blocks_override": (_int_or_null, False),
        "kv_cache_memory_bytes": (_int_or_null, False),
        "cpu_offload_gb": (_num, False),
        "prefix_cache_retention_interval": (_int_or_null, True),
    },
    "scheduler": {
        "max_num_batched_tokens": (_int, False),
        "max_num_seqs": (_int, False),
        "async_scheduling": (_bool, False),
        "enable_chunked_prefill": (_bool, False),
        "max_in_flight_tokens": (_int, True),
    },
    "parallel": {
        "tensor_parallel_size": (_int, False),
        "pipeline_parallel_size": (_int, False),
        "data_parallel_size": (_int, False),
        "decode_context_parallel_size": (_int, False),
        "prefill_context_parallel_size": (_int, False),
        "enable_expert_parallel": (_bool, False),
        "enable_eplb": (_bool, False),
    },
    "compilation": {
        "mode": (_str, False),
        "cudagraph_mode": (_str, False),
        "cudagraph_capture_sizes": (lambda v: isinstance(v, list) and all(is_int(x) for x in v), False),
        "max_cudagraph_capture_size": (_int, False),
        "enforce_eager": (_bool, False),
    },
}
TOP_SETTINGS: dict[str, tuple[Callable[[Any], bool], bool]] = {
    "model_runner": (lambda v: v in ("v1", "v2"), True),
    "speculative": (_obj_or_null, False),
    "kv_transfer": (_obj_or_null, False),
}

#: the prefix-caching trio that stage J checks (excluded from I-37, I-38, I-106)
TRIO = ("cache.enable_prefix_caching", "cache.mamba_cache_mode", "cache.hash_block_size")

#: I-36's audited worker downgrades of the graph mode
DOWNGRADES = {
    "FULL": {"FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"},
    "FULL_AND_PIECEWISE": {"PIECEWISE", "NONE"},
    "FULL_DECODE_ONLY": {"PIECEWISE", "NONE"},
}


def kv_label(
    labels: Mapping[str, str], kv_dtype: Any, model_dtype: Any, model_labels: Mapping[str, str] = MODEL_DTYPE_LABELS
) -> str | None:
    """The label of a KV cache dtype (02 §7.4 table), ``None`` when it has none.

    ``labels`` is the runtime's table of every dtype but ``auto``
    (``ImportRules.kv_dtype_labels``), ``model_labels`` its table of
    ``auto`` by model dtype (``ImportRules.model_dtype_labels``).
    """
    if kv_dtype == "auto":
        return model_labels.get(model_dtype)
    return labels.get(kv_dtype)


def rule_label(ctx: ImportState, rec: Record, rule: str) -> str | None:
    """The label of ``rec``'s KV cache dtype under its runtime's rules (I-32, I-33, I-47).

    A label that only the runtime's ``model_dtype_labels`` gives (not 02
    §7.4's table) is noted.
    """
    rules = ctx.runtime_rules
    kv, model_dtype = rec.setting("cache", "kv_cache_dtype"), rec.setting("model", "dtype")
    label = kv_label(rules.kv_dtype_labels, kv, model_dtype, rules.model_dtype_labels)
    if kv == "auto" and label is not None and model_dtype not in MODEL_DTYPE_LABELS:
        ctx.note(
            rule,
            f"model dtype {show(model_dtype)} takes the label {show(label)} on vLLM {ctx.version}'s "
            "platform (runtime rule model_dtype_labels)",
        )
    return label


def settings_difference(a: dict[str, Any], b: dict[str, Any], excluded: tuple[str, ...]) -> str | None:
    """The first ``<section>.<key>`` where two settings objects differ, outside ``excluded``."""
    for section in list(SETTINGS) + list(TOP_SETTINGS):
        if section in SETTINGS:
            sa, sb = a.get(section), b.get(section)
            if not isinstance(sa, dict) or not isinstance(sb, dict):
                if not same(sa, sb):
                    return section
                continue
            for key in sorted(set(sa) | set(sb)):
                name = f"{section}.{key}"
                if name in excluded:
                    continue
                if key not in sa or key not in sb or not same(sa[key], sb[key]):
                    return name
        elif section not in excluded and not same(a.get(section), b.get(section)):
            return section
    return None


# -- rules ----------------------------------------------------------------------


@checks("I-27")
def moe_topology_consistent(ctx: ImportState) -> Iterator[Finding]:
    """I-27: MoE topology sizes agree; a dense launch runs DP1, MoE TP1/EP1."""
    topo = ctx.launch["topology"]
    if ctx.launch["identity"]["num_experts"] > 0:
        if topo["moe_tp"] * topo["moe_ep"] != topo["tp"] * topo["dp"]:
            yield None, "I-27", "runtime observation attention and MoE topology sizes disagree"
    elif topo["dp"] != 1 or topo["moe_tp"] != 1 or topo["moe_ep"] != 1:
        yield None, "I-27", "dense runtime observations require DP1 and MoE TP1/EP1"


@checks("I-28")
def settings_keys_and_types(ctx: ImportState, rec: Record) -> None:
    """I-28: every key of §3.4, no other, each of its type.

    ``null`` is accepted for the ⁰ keys of a record without hybrid evidence,
    and for the settings the record's runtime leaves ``null``
    (``ImportRules.nullable_settings``).
    """
    settings = rec.data.get("settings")
    if not isinstance(settings, dict):
        raise Refusal("I-28", "runtime settings are incomplete: settings")
    plain = not rec.hybrid
    runtime_null = ctx.runtime_rules.nullable_settings

    def ok_value(name: str, value: Any, ok: Callable[[Any], bool], nullable: bool) -> bool:
        return ok(value) or (value is None and ((plain and nullable) or name in runtime_null))

    for section, keys in SETTINGS.items():
        obj = settings.get(section)
        if not isinstance(obj, dict):
            raise Refusal("I-28", f"runtime settings are incomplete: {section}")
        for key, (ok, nullable) in keys.items():
            if key not in obj or not ok_value(f"{section}.{key}", obj[key], ok, nullable):
                raise Refusal("I-28", f"runtime settings are incomplete: {section}.{key}")
        for key in sorted(obj):
            if key not in keys:
                raise Refusal("I-28", f"runtime settings hold an unknown key: {section}.{key}")
    for key, (ok, nullable) in TOP_SETTINGS.items():
        if key not in settings or not ok_value(key, settings[key], ok, nullable):
            raise Refusal("I-28", f"runtime settings are incomplete: {key}")
    for key in sorted(settings):
        if key not in SETTINGS and key not in TOP_SETTINGS:
            raise Refusal("I-28", f"runtime settings hold an unknown key: {key}")


@checks("I-29")
def settings_equal_launch(ctx: ImportState, rec: Record) -> None:
    """I-29: the settings that must equal the launch (or a fixed value)."""
    col, topo = ctx.launch["collection"], ctx.launch["topology"]
    expected = [
        ("model", "max_model_len", col["max_model_len"]),
        ("cache", "gpu_memory_utilization", col["gpu_memory_utilization"]),
        ("scheduler", "max_num_batched_tokens", col["max_num_batched_tokens"]),
        ("scheduler", "max_num_seqs", col["max_num_seqs"]),
        ("scheduler", "async_scheduling", False),
        ("parallel", "tensor_parallel_size", topo["tp"]),
        ("parallel", "pipeline_parallel_size", topo["pp"]),
        ("parallel", "data_parallel_size", topo["dp"]),
        ("parallel", "decode_context_parallel_size", 1),
        ("parallel", "prefill_context_parallel_size", 1),
        ("parallel", "enable_expert_parallel", topo["moe_ep"] > 1),
        ("parallel", "enable_eplb", False),
    ]
    for section, key, want in expected:
        got = rec.setting(section, key)
        equal = got == want if key == "gpu_memory_utilization" else same(got, want)
        if not equal:
            raise Refusal("I-29", f"runtime memory launch mismatch: {section}.{key}={show(got)}, expected {show(want)}")


def _layer_specs(rec: Record) -> Iterator[tuple[str, dict[str, Any]]]:
    for g in rec.groups:
        if not isinstance(g, dict):
            continue
        if isinstance(g.get("layer_specs"), dict):
            for name, spec in g["layer_specs"].items():
                fields = spec.get("fields") if isinstance(spec, dict) else None
                if isinstance(fields, dict):
                    yield name, fields
        if isinstance(g.get("spec_fields"), dict):
            yield str(g.get("group_id")), g["spec_fields"]


@checks("I-30")
def no_speculative_or_transferred_cache(ctx: ImportState, rec: Record) -> None:
    """I-30: no speculative or transferred cache (settings, or a draft layer spec)."""
    s = rec.settings
    if s.get("speculative") is not None or s.get("kv_transfer") is not None:
        raise Refusal("I-30", "speculative or transferred cache semantics are unsupported")
    if any(fields.get("is_draft") is True for _n, fields in _layer_specs(rec)):
        raise Refusal("I-30", "speculative or transferred cache semantics are unsupported")


@checks("I-31")
def no_overrides_or_offload(ctx: ImportState, rec: Record) -> None:
    """I-31: no block override, no KV memory override, no CPU offload.

    A setting through which the runtime's platform sizes its KV cache itself
    (``ImportRules.kv_cache_sizing``: the CPU engine's KV space, a pool
    forced to a block count) is accepted with a note.
    """
    sizing = ctx.runtime_rules.kv_cache_sizing
    for key in ("num_gpu_blocks_override", "kv_cache_memory_bytes"):
        value = rec.setting("cache", key)
        if value is None:
            continue
        if f"cache.{key}" in sizing and is_int(value) and value > 0:
            ctx.note(
                "I-31",
                f"cache.{key}={show(value)} sizes the KV cache on vLLM {ctx.version}'s platform "
                "(runtime rule kv_cache_sizing)",
            )
            continue
        raise Refusal(
            "I-31", f"runtime observation does not support KV offload or block overrides: cache.{key}={show(value)}"
        )
    value = rec.setting("cache", "cpu_offload_gb")
    if not (is_number(value) and value == 0):
        raise Refusal(
            "I-31",
            f"runtime observation does not support KV offload or block overrides: cache.cpu_offload_gb={show(value)}",
        )


@checks("I-32")
def kv_dtype_matches_launch(ctx: ImportState, rec: Record) -> None:
    """I-32: the KV cache dtype has a label, equal to the launch's ``kvcache_quant_mode``."""
    kv = rec.setting("cache", "kv_cache_dtype")
    label = rule_label(ctx, rec, "I-32")
    if label is None:
        raise Refusal("I-32", f"observed KV cache dtype '{kv}' has no label")
    want = ctx.launch["precision"]["kvcache_quant_mode"]
    if label != want:
        raise Refusal("I-32", f"observed KV cache dtype '{kv}' maps to '{label}', expected '{want}'")


@checks("I-33")
def fmha_label_matches_kv_dtype(ctx: ImportState, rec: Record) -> None:
    """I-33: the FMHA label is the label of the observed KV cache dtype."""
    native = rule_label(ctx, rec, "I-33")
    fmha = ctx.launch["precision"]["fmha_quant_mode"]
    if fmha != native:
        raise Refusal(
            "I-33",
            f"FMHA precision '{fmha}' differs from the checkpoint-native '{native}' for KV-cache dtype '{native}'",
        )


def _is_commit(v: Any) -> bool:
    return isinstance(v, str) and len(v) == 40 and all(c in "0123456789abcdef" for c in v)


@checks("I-34")
def loaded_model_is_staged(ctx: ImportState, rec: Record) -> None:
    """I-34: the loaded model is the staged, selected one."""
    model, identity = rec.data["model"], ctx.launch["identity"]
    if not same(model.get("config_sha256"), ctx.launch["model_config"]["sha256"]):
        raise Refusal("I-34", "loaded model configuration hash differs from the staged model-config.json")
    if not same(model.get("path"), identity["model"]):
        raise Refusal("I-34", "observed model path differs from the selected deployment")
    if not same(model.get("revision"), identity["model_revision"]):
        raise Refusal("I-34", "observed model revision differs from the selected model")
    rev = identity["model_revision"]
    if _is_commit(rev) and model.get("loaded_config_commit") not in (None, rev):
        raise Refusal("I-34", "observed model revision differs from the selected model")


@checks("I-35")
def worker_hardware_as_launched(ctx: ImportState, rec: Record) -> None:
    """I-35: worker hardware as launched, complete, and the cache allowance within device memory.

    Not for layout-level evidence (a dry run names no device; stage B, I-113).
    A key the runtime's platform does not have (``ImportRules.absent_hardware``,
    ``sm`` on a CPU) may be ``null``: accepted, noted.
    """
    if not rec.is_worker or ctx.layout:
        return
    hw, identity = rec.data["hardware"], ctx.launch["identity"]
    absent = {k for k in ctx.runtime_rules.absent_hardware if hw.get(k) is None}
    if not same(hw.get("gpu"), identity["gpu"]):
        raise Refusal(
            "I-35",
            f"observed hardware differs from the launch: gpu {show(hw.get('gpu'))}, launch {show(identity['gpu'])}",
        )
    if "sm" in identity and not same(hw.get("sm"), identity["sm"]):
        raise Refusal(
            "I-35", f"observed hardware differs from the launch: sm {show(hw.get('sm'))}, launch {show(identity['sm'])}"
        )
    if "device_name" not in absent and (not isinstance(hw.get("device_name"), str) or not hw["device_name"].strip()):
        raise Refusal("I-35", "observed hardware evidence is incomplete: hardware.device_name")
    for key in ("sm", "total_memory_bytes"):
        if key not in absent and not (is_int(hw.get(key)) and hw[key] > 0):
            raise Refusal("I-35", f"observed hardware evidence is incomplete: hardware.{key}")
    for key in sorted(absent):
        ctx.note(
            "I-35", f"hardware.{key} is null: vLLM {ctx.version}'s platform has none (runtime rule absent_hardware)"
        )
    available = rec.cache.get("available_cache_bytes")
    if is_int(available) and available > hw["total_memory_bytes"]:
        raise Refusal("I-35", "profiled cache allowance exceeds physical device memory")


def graph_ok(observed: Any, launched: Any) -> bool:
    """I-36: the observed graph mode is the launched one or an audited downgrade."""
    return observed == launched or observed in DOWNGRADES.get(launched, set())


@checks("I-36")
def graph_mode_as_launched(ctx: ImportState, rec: Record) -> None:
    """I-36: eager mode as launched; graph mode and capture sizes as launched, beyond audited downgrades."""
    col = ctx.launch["collection"]
    if not same(rec.setting("compilation", "enforce_eager"), col["enforce_eager"]):
        raise Refusal("I-36", "runtime graph settings differ from the reviewed launch: enforce_eager")
    if "cudagraph_mode" in col and not graph_ok(rec.setting("compilation", "cudagraph_mode"), col["cudagraph_mode"]):
        raise Refusal("I-36", "runtime graph settings differ from the reviewed launch: cudagraph_mode")
    if "cudagraph_capture_sizes" in col and not same(
        rec.setting("compilation", "cudagraph_capture_sizes"), col["cudagraph_capture_sizes"]
    ):
        raise Refusal("I-36", "runtime graph settings differ from the reviewed launch: cudagraph_capture_sizes")


@checks("I-37")
def workers_resolve_same_settings(ctx: ImportState) -> Iterator[Finding]:
    """I-37: the workers of one phase resolve the same settings (prefix-caching trio excluded)."""
    for phase in ("prefill", "decode"):
        workers = [w for w in ctx.workers(phase) if id(w) not in ctx.failed]
        for w in workers[1:]:
            key = settings_difference(workers[0].settings, w.settings, TRIO)
            if key is not None:
                yield w, "I-37", f"effective runtime settings differ across ranks of {phase}: {key}"


@checks("I-38")
def scheduler_resolves_worker_settings(ctx: ImportState) -> Iterator[Finding]:
    """I-38: a scheduler resolves its workers' settings (block sizes, trio and graph downgrades excluded)."""
    excluded = TRIO + ("cache.block_size", "cache.mamba_block_size")
    for s in ctx.schedulers():
        if id(s) in ctx.failed:
            continue
        workers = [w for w in ctx.workers(s.phase) if w.dp == s.dp and id(w) not in ctx.failed]
        if not workers:
            continue
        w = workers[0]
        extra: tuple[str, ...] = ()
        if graph_ok(w.setting("compilation", "cudagraph_mode"), s.setting("compilation", "cudagraph_mode")) or graph_ok(
            s.setting("compilation", "cudagraph_mode"), w.setting("compilation", "cudagraph_mode")
        ):
            extra = ("compilation.cudagraph_mode",)
        key = settings_difference(w.settings, s.settings, excluded + extra)
        if key is not None:
            yield s, "I-38", f"runtime launch settings differ between scheduler and worker: {key}"


@checks("I-39")
def launch_leaves_mamba_mode_alone(ctx: ImportState) -> Iterator[Finding]:
    """I-39: a launch never selects the Mamba cache mode."""
    if ctx.launch["collection"]["mamba_cache_mode_override"] is not None:
        yield None, "I-39", "backend policy cannot select the Mamba cache mode for runtime memory observation"


RULES = [
    guarded(moe_topology_consistent),
    per_record(settings_keys_and_types),
    per_record(settings_equal_launch),
    per_record(no_speculative_or_transferred_cache),
    per_record(no_overrides_or_offload),
    per_record(kv_dtype_matches_launch),
    per_record(fmha_label_matches_kv_dtype),
    per_record(loaded_model_is_staged),
    per_record(worker_hardware_as_launched),
    per_record(graph_mode_as_launched),
    guarded(workers_resolve_same_settings),
    guarded(scheduler_resolves_worker_settings),
    guarded(launch_leaves_mamba_mode_alone),
]
