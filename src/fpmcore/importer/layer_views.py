"""Stage I — layer views, kernel blocks and attention groups (02 §3.9, §3.10, §7.9: I-77 to I-89).

``B`` is the group block size and ``n`` the pool's block count; ``K`` is a
view's kernel block and ``r = B // K``; ``start_l`` and ``page_l`` are the
layer's block-0 page start and page size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import attrs

from fpmcore.documents.rules_catalogue import checks
from fpmcore.importer.cache_groups import fields_of, is_indexer, is_mamba, kinds_of
from fpmcore.importer.record_values import is_int, is_nonneg_int, is_pos_int, show
from fpmcore.importer.state import ImportState, Record, Refusal, per_record

DTYPE_BYTES = {
    "torch.bool": 1,
    "torch.uint8": 1,
    "torch.int8": 1,
    "torch.float8_e4m3fn": 1,
    "torch.float8_e5m2": 1,
    "torch.float8_e4m3fnuz": 1,
    "torch.float8_e5m2fnuz": 1,
    "torch.int16": 2,
    "torch.float16": 2,
    "torch.bfloat16": 2,
    "torch.int32": 4,
    "torch.float32": 4,
    "torch.int64": 8,
    "torch.float64": 8,
}


@attrs.frozen
class Layer:
    """A layer of a worker record with everything its views are checked against."""

    name: str
    group: int
    block: int  #: B
    spec: dict[str, Any]  #: the layer spec (hybrid) or {} (plain)
    alloc: dict[str, Any]
    start: int
    page: int
    packed: bool  #: plain records: a packed allocation (block_stride = slot)


def layers(rec: Record) -> Iterator[Layer]:
    allocs = rec.cache["allocations"]
    where: dict[str, tuple[dict[str, Any], int]] = {}
    for a in allocs:
        for pos, l in enumerate(a["layers"]):
            where[l] = (a, pos)
    for i, g in enumerate(rec.groups):
        specs = g.get("layer_specs") if rec.hybrid else None
        for name in g["layer_names"]:
            a, pos = where[name]
            spec = specs[name] if isinstance(specs, dict) else {}
            if rec.hybrid:
                start, page, packed = a["offset"] + pos * a["layer_stride"], spec.get("page_size_bytes"), True
            else:
                start, page, packed = a["offset"], g.get("page_size_bytes"), a["block_stride"] != 0
            yield Layer(name, i, g["block_size_tokens"], spec, a, start, cast(int, page), packed)


def views(rec: Record, layer: Layer) -> list[dict[str, Any]]:
    v = rec.cache.get("layer_views", {}).get(layer.name)
    return v if isinstance(v, list) else []


def packed_views(rec: Record) -> Iterator[tuple[Layer, dict[str, Any]]]:
    """``(layer, view)`` of every view of a worker's packed allocations (I-83 … I-85)."""
    if not rec.is_worker:
        return
    for layer in layers(rec):
        if layer.packed:
            for v in views(rec, layer):
                yield layer, v


def _stride(view: dict[str, Any], rec: Record) -> int:
    return cast(int, view.get("kernel_block_stride", 0)) if rec.hybrid else 0


def _r(layer: Layer, view: dict[str, Any]) -> int:
    return cast(int, layer.block // view["kernel_block_size_tokens"])


def attention_family(ctx: ImportState, spec: dict[str, Any]) -> bool:
    """Attention-family specs carry ``tokens_per_state`` per kernel block; Mamba specs do not."""
    return bool(spec) and not is_mamba(ctx, spec.get("class"))


@checks("I-77")
def every_layer_binds_a_view(ctx: ImportState, rec: Record) -> None:
    """I-77: every layer binds at least one view."""
    if not rec.is_worker:
        return
    lv = rec.cache.get("layer_views")
    for layer in layers(rec):
        if not isinstance(lv, dict) or not views(rec, layer):
            raise Refusal("I-77", f"layer has no tensor views: {layer.name}")


@checks("I-78")
def view_starts_inside_layer_page(ctx: ImportState, rec: Record) -> None:
    """I-78: a view lies on its allocation's storage, starting inside its layer page."""
    if not rec.is_worker:
        return
    for layer in layers(rec):
        for v in views(rec, layer):
            if v.get("storage_id") != layer.alloc["storage_id"]:
                raise Refusal("I-78", f"layer view lies outside its layer page: {layer.name}")
            if not layer.packed:
                continue
            off = v.get("storage_offset_bytes")
            if not (is_int(off) and layer.start <= off < layer.start + layer.page):
                raise Refusal("I-78", f"layer view lies outside its layer page: {layer.name}")


@checks("I-79")
def view_shape_and_strides_valid(ctx: ImportState, rec: Record) -> None:
    """I-79: shape and strides non-empty, of one rank, positive; element-aligned strides; a valid block axis."""
    if not rec.is_worker:
        return
    for layer in layers(rec):
        for v in views(rec, layer):
            shape, strides, elem, axis = (
                v.get("shape"),
                v.get("stride_bytes"),
                v.get("element_size_bytes"),
                v.get("block_axis"),
            )
            ok = (
                isinstance(shape, list)
                and isinstance(strides, list)
                and shape
                and len(shape) == len(strides)
                and all(is_pos_int(x) for x in shape)
                and all(is_pos_int(x) for x in strides)
                and is_pos_int(elem)
                and all(s % elem == 0 for s in strides)
                and is_nonneg_int(axis)
                and axis < len(shape)
                and is_nonneg_int(v.get("storage_offset_bytes"))
            )
            if not ok:
                raise Refusal("I-79", f"layer view shape or strides are malformed: {layer.name}")


@checks("I-80")
def hybrid_views_carry_kernel_stride(ctx: ImportState, rec: Record) -> None:
    """I-80: hybrid views carry a non-negative integer ``kernel_block_stride``."""
    if not (rec.is_worker and rec.hybrid):
        return
    for layer in layers(rec):
        for v in views(rec, layer):
            if "kernel_block_stride" not in v:
                raise Refusal("I-80", f"layer view lacks kernel_block_stride: {layer.name}")
            if not is_nonneg_int(v["kernel_block_stride"]):
                raise Refusal("I-80", f"layer view shape or strides are malformed: {layer.name}")


@checks("I-81")
def kernel_block_divides_group_block(ctx: ImportState, rec: Record) -> None:
    """I-81: the kernel block divides the group block, and holds whole states of the spec."""
    if not rec.is_worker:
        return
    for layer in layers(rec):
        for v in views(rec, layer):
            K = v.get("kernel_block_size_tokens")
            if not is_pos_int(K) or layer.block % K != 0:
                raise Refusal(
                    "I-81",
                    f"layer view kernel block contradicts its cache spec: {layer.name} (kernel block {show(K)} does not divide block {layer.block})",
                )
            if not rec.hybrid or not attention_family(ctx, layer.spec):
                continue
            t = fields_of(layer.spec).get("tokens_per_state")
            if is_int(t) and t >= 1:
                if K % t != 0:
                    raise Refusal(
                        "I-81",
                        f"layer view kernel block contradicts its cache spec: {layer.name} (a {K}-token kernel block is not a whole number of {t}-token states)",
                    )
                if v["shape"][-2] != K // t:
                    raise Refusal(
                        "I-81",
                        f"layer view kernel block contradicts its cache spec: {layer.name} (a {K}-token kernel block holds {K // t} states of {t} tokens; the view holds {v['shape'][-2]})",
                    )


@checks("I-82")
def block_axis_covers_pool(ctx: ImportState, rec: Record) -> None:
    """I-82: the block axis covers every pool block (direct, or remapped with a kernel stride)."""
    if not rec.is_worker:
        return
    n = rec.cache["num_blocks"]
    for layer in layers(rec):
        for v in views(rec, layer):
            r, s, got = _r(layer, v), _stride(v, rec), v["shape"][v["block_axis"]]
            if s == 0:
                want, formula = n * r, f"{n} x {r}"
            else:
                want, formula = (n - 1) * s + r, f"({n} - 1) x {s} + {r}"
            if got != want:
                raise Refusal(
                    "I-82",
                    f"kernel tensor block coverage contradicts pool block geometry: {layer.name} holds {got} kernel blocks, expected {formula} = {want}",
                )


@checks("I-83")
def view_block_stride_matches_allocation(ctx: ImportState, rec: Record) -> None:
    """I-83: the view's block stride times ``r`` (or the kernel stride) is the allocation's block stride."""
    for layer, v in packed_views(rec):
        s = _stride(v, rec)
        factor = _r(layer, v) if s == 0 else s
        if v["stride_bytes"][v["block_axis"]] * factor != layer.alloc["block_stride"]:
            raise Refusal("I-83", f"layer view block stride contradicts its allocation: {layer.name}")


def _span(v: dict[str, Any]) -> int | None:
    """I-84's running span of the non-block axes, or ``None`` when two axes overlap."""
    axes = sorted(
        (v["stride_bytes"][a], v["shape"][a])
        for a in range(len(v["shape"]))
        if a != v["block_axis"] and v["shape"][a] > 1
    )
    sigma: int = v["element_size_bytes"]
    for stride, length in axes:
        if stride < sigma:
            return None
        sigma += (length - 1) * stride
    return sigma


@checks("I-84")
def view_axes_disjoint(ctx: ImportState, rec: Record) -> None:
    """I-84: the view's axes do not overlap."""
    for layer, v in packed_views(rec):
        sigma = _span(v)
        if sigma is None or v["stride_bytes"][v["block_axis"]] < sigma:
            raise Refusal("I-84", f"physical tensor dimensions overlap: {layer.name}")


@checks("I-85")
def block_slice_inside_layer_page(ctx: ImportState, rec: Record) -> None:
    """I-85: one pool block's slice of the view stays inside the layer page."""
    for layer, v in packed_views(rec):
        ba = v["block_axis"]
        extent = (
            (v["storage_offset_bytes"] - layer.start)
            + (_r(layer, v) - 1) * v["stride_bytes"][ba]
            + sum((v["shape"][a] - 1) * v["stride_bytes"][a] for a in range(len(v["shape"])) if a != ba)
            + v["element_size_bytes"]
        )
        if extent > layer.page:
            raise Refusal("I-85", f"tensor view extent exceeds its cache spec page: {layer.name}")


@checks("I-86")
def view_dtype_matches(ctx: ImportState, rec: Record) -> None:
    """I-86: element size matches the dtype; attention views hold the spec dtype (indexer exempt)."""
    if not rec.is_worker:
        return
    for layer in layers(rec):
        for v in views(rec, layer):
            if DTYPE_BYTES.get(str(v.get("dtype"))) != v["element_size_bytes"]:
                raise Refusal("I-86", f"layer view element size contradicts its dtype: {layer.name}")
            if rec.hybrid and kinds_of(ctx, rec)[layer.group] == "attention":
                f = fields_of(layer.spec)
                if not is_indexer(f) and v.get("dtype") != f.get("dtype"):
                    raise Refusal("I-86", f"layer view element size contradicts its dtype: {layer.name}")


@checks("I-87")
def one_kernel_block_size_per_group(ctx: ImportState, rec: Record) -> None:
    """I-87 [beyond reference]: one kernel block size per group, each dividing its group block."""
    if not (rec.is_worker and rec.hybrid):
        return
    mr = rec.cache.get("model_runner")
    sizes = mr.get("kernel_block_sizes") if isinstance(mr, dict) else None
    msg = "model runner kernel_block_sizes must hold one divisor of each group block size: "
    if not isinstance(sizes, list):
        raise Refusal("I-87", msg + "kernel_block_sizes is not a list")
    if len(sizes) != len(rec.groups):
        raise Refusal("I-87", msg + f"{len(sizes)} entries for {len(rec.groups)} cache groups")
    for i, (k, g) in enumerate(zip(sizes, rec.groups)):
        if not is_pos_int(k) or g["block_size_tokens"] % k != 0:
            raise Refusal("I-87", msg + f"entry {i} is {show(k)} for block size {g['block_size_tokens']}")


@checks("I-88")
def attention_groups_partition_layers(ctx: ImportState, rec: Record) -> None:
    """I-88 [beyond reference]: the attention groups partition the layers of the cache groups."""
    if not (rec.is_worker and rec.hybrid):
        return
    entries = rec.cache.get("attention_groups")
    msg = "attention groups are malformed: "
    if not isinstance(entries, list):
        raise Refusal("I-88", msg + "attention_groups is not a list")
    members = {i: set(g["layer_names"]) for i, g in enumerate(rec.groups)}
    seen: set[str] = set()
    for j, e in enumerate(entries):
        gid = e.get("kv_cache_group_id")
        if not is_int(gid) or gid not in members:
            raise Refusal("I-88", msg + f"attention group {j} names cache group {show(gid)}")
        names = e.get("layer_names")
        if not isinstance(names, list):
            raise Refusal("I-88", msg + f"attention group {j} has no layer list")
        for l in names:
            if l not in members[gid]:
                raise Refusal("I-88", msg + f"attention group {j} holds {l}, which is not in cache group {gid}")
            if l in seen:
                raise Refusal("I-88", msg + f"{l} is in two attention groups")
            seen.add(l)
        kb, ks = e.get("kernel_block_size"), e.get("kernel_block_stride")
        B = rec.groups[gid]["block_size_tokens"]
        if kb is not None and not (is_pos_int(kb) and B % kb == 0):
            raise Refusal("I-88", msg + f"attention group {j} kernel_block_size {show(kb)} does not divide {B}")
        if not is_int(ks):
            raise Refusal("I-88", msg + f"attention group {j} kernel_block_stride {show(ks)}")
        if ks < 0:
            raise Refusal("I-88", f"attention group {j} has a negative kernel_block_stride: {ks}")
        if ks > 0 and kb is None:
            raise Refusal("I-88", msg + f"attention group {j} has kernel_block_stride {ks} without a kernel_block_size")
    for g in rec.groups:
        for l in g["layer_names"]:
            if l not in seen:
                raise Refusal("I-88", msg + f"{l} is in no attention group")


@checks("I-89")
def views_use_attention_group_kernel_block(ctx: ImportState, rec: Record) -> None:
    """I-89 [beyond reference]: each view uses its attention group's kernel block and stride."""
    if not (rec.is_worker and rec.hybrid):
        return
    sizes = rec.cache["model_runner"]["kernel_block_sizes"]
    lv = rec.cache["layer_views"]
    for j, e in enumerate(rec.cache["attention_groups"]):
        K = e["kernel_block_size"] if e["kernel_block_size"] is not None else sizes[e["kv_cache_group_id"]]
        s = e["kernel_block_stride"]
        for l in e["layer_names"]:
            for v in lv.get(l, []):
                if v["kernel_block_size_tokens"] != K or v["kernel_block_stride"] != s:
                    raise Refusal(
                        "I-89",
                        f"attention group {j} contradicts the views of {l}: kernel block {K}, kernel_block_stride {s}; the view holds {v['kernel_block_size_tokens']}, {v['kernel_block_stride']}",
                    )


STAGE_I = [
    per_record(every_layer_binds_a_view),
    per_record(view_starts_inside_layer_page),
    per_record(view_shape_and_strides_valid),
    per_record(hybrid_views_carry_kernel_stride),
    per_record(kernel_block_divides_group_block),
    per_record(block_axis_covers_pool),
    per_record(view_block_stride_matches_allocation),
    per_record(view_axes_disjoint),
    per_record(block_slice_inside_layer_page),
    per_record(view_dtype_matches),
    per_record(one_kernel_block_size_per_group),
    per_record(attention_groups_partition_layers),
    per_record(views_use_attention_group_kernel_block),
]
