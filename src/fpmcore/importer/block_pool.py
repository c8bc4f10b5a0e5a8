"""Stages G and H — block pool, storages, allocations, layout and block ownership.

02 §3.8, §7.7 (I-62 to I-66) and §7.8 (I-67 to I-76).  The pool page is
``P = allocated_cache_bytes / num_blocks`` (I-65, 03 C-8); for layout-level
evidence (a dry run, stage B) the planned bytes :func:`cache_bytes` take the
place of the allocated bytes, I-64 does not run and I-66 checks the plan, and
stage H does not run (it needs the allocated storages).  Block ownership is
decided without enumerating blocks: for two layers with block-0 page starts
``a``, ``a′``, pages ``p``, ``p′`` and a common block stride ``S``, the block
offsets ``d`` whose pages overlap form one integer interval (02 §7.8).
"""

from __future__ import annotations

from typing import Any, cast

import attrs

from fpmcore.documents.rules_catalogue import checks
from fpmcore.importer.record_values import canonical, is_int, is_nonneg_int, is_pos_int, show
from fpmcore.importer.state import LAYOUT, ImportState, Record, Refusal, per_record

BLOCK_OUTER = ("BLHNC", "BLNHC")
LAYER_OUTER = ("LBHNC", "LBNHC")
NOT_COMPACT = ("LHBNC", "BHLNC")


def workers(ctx: ImportState) -> list[Record]:
    return ctx.workers()


# ==========================================================================
# stage G
# ==========================================================================


@checks("I-62")
def worker_blocks_match_scheduler(ctx: ImportState, rec: Record) -> None:
    """I-62: a worker's pool has as many blocks as its scheduler's."""
    s = ctx.scheduler_for(rec)
    if s is None:
        return
    n, m = rec.cache.get("num_blocks"), s.cache.get("num_blocks")
    if not (is_pos_int(n) and is_pos_int(m)) or n != m:
        raise Refusal("I-62", f"worker and scheduler block counts disagree: worker {show(n)}, scheduler {show(m)}")


@checks("I-63")
def one_device_pool_with_reservations(ctx: ImportState, rec: Record) -> None:
    """I-63: one device pool, no watermark, the null block and the other permanent reservations."""
    if rec.is_worker:
        return
    c = rec.cache
    n, free, null, reserved = (
        c.get("num_blocks"),
        c.get("free_blocks"),
        c.get("null_block_id"),
        c.get("reserved_block_ids"),
    )
    msg = "scheduler block pool capacity or reservations are inconsistent: "
    if not same_int(c.get("pool_count"), 1):
        raise Refusal("I-63", msg + f"pool_count {show(c.get('pool_count'))}")
    if not same_int(c.get("watermark_blocks"), 0):
        raise Refusal("I-63", msg + f"watermark_blocks {show(c.get('watermark_blocks'))}")
    if not (is_int(n) and is_int(free) and 0 < free < n):
        raise Refusal("I-63", msg + f"free_blocks {show(free)} of num_blocks {show(n)}")
    if not isinstance(reserved, list) or not all(is_int(b) for b in reserved):
        raise Refusal("I-63", msg + f"reserved_block_ids {show(reserved)}")
    if len(set(reserved)) != len(reserved):
        raise Refusal("I-63", msg + f"reserved_block_ids {show(reserved)} are not unique")
    if any(not 0 <= b < n for b in reserved):
        raise Refusal("I-63", msg + f"reserved_block_ids {show(reserved)} out of range")
    if not is_int(null) or null not in reserved:
        raise Refusal("I-63", msg + f"reserved_block_ids {show(reserved)} lack null_block_id {show(null)}")
    if len(reserved) != n - free:
        raise Refusal("I-63", msg + f"{len(reserved)} reserved blocks, num_blocks - free_blocks = {n - free}")


def same_int(v: Any, want: int) -> bool:
    return is_int(v) and v == want


def planned_cache_bytes(rec: Record) -> int | None:
    """The bytes a worker's cache plan allocates, read from its allocations (layout level).

    With hybrid evidence every allocation places its layers in one backing
    allocation of ``size`` bytes (vLLM 0.33.0 ``KVCacheTensor.size``;
    ``vllm/v1/worker/utils.py`` allocates it once): the largest size (I-66
    wants them all equal).  Without hybrid evidence each allocation is its
    own tensor (02 §3.14): the sum of the sizes.
    """
    allocs = rec.cache.get("allocations")
    if not isinstance(allocs, list) or not allocs:
        return None
    sizes = [a.get("size") if isinstance(a, dict) else None for a in allocs]
    ints = [x for x in sizes if is_pos_int(x)]
    if len(ints) != len(sizes):
        return None
    return max(ints) if rec.hybrid else sum(ints)


def cache_bytes(rec: Record) -> Any:
    """The allocated cache bytes of a worker; for a dry (layout-level) worker the planned bytes."""
    if rec.level == LAYOUT:
        return planned_cache_bytes(rec)
    return rec.cache.get("allocated_cache_bytes")


@checks("I-64")
def storages_sum_to_allocation(ctx: ImportState, rec: Record) -> None:
    """I-64: distinct CUDA storages of one device that sum to the allocated bytes (not for layout-level evidence).

    The runtime's platform may keep them on another device (``ImportRules.storage_devices``,
    ``cpu`` for the CPU engine): accepted, noted.
    """
    if not rec.is_worker or ctx.layout:
        return
    c = rec.cache
    storages = c.get("storages")
    msg = "physical runtime cache storage accounting is inconsistent: "
    if not isinstance(storages, list) or not storages:
        raise Refusal("I-64", msg + "no storages")
    seen: set[tuple[Any, Any]] = set()
    devices: set[Any] = set()
    total = 0
    prefixes = tuple(ctx.runtime_rules.storage_devices)
    for s in storages:
        dev, ptr, size = s.get("device"), s.get("pointer"), s.get("size_bytes")
        if not isinstance(dev, str) or not dev.startswith(prefixes):
            if prefixes == ("cuda:",):
                raise Refusal("I-64", msg + f"device {show(dev)} is not a CUDA device")
            raise Refusal(
                "I-64", msg + f"device {show(dev)} is not a device of vLLM {ctx.version} ({', '.join(prefixes)})"
            )
        if not dev.startswith("cuda:"):
            ctx.note(
                "I-64",
                f"the KV cache storages are on device {show(dev)}, not a CUDA device: vLLM {ctx.version}'s "
                "platform keeps them there (runtime rule storage_devices)",
            )
        if not is_pos_int(ptr):
            raise Refusal("I-64", msg + f"pointer {show(ptr)} of storage {show(s.get('storage_id'))}")
        if (dev, ptr) in seen:
            raise Refusal("I-64", msg + f"storage {show(s.get('storage_id'))} repeats device {dev} pointer {ptr}")
        if not is_nonneg_int(size):
            raise Refusal("I-64", msg + f"size_bytes {show(size)} of storage {show(s.get('storage_id'))}")
        seen.add((dev, ptr))
        devices.add(dev)
        total += size
    if len(devices) > 1:
        raise Refusal("I-64", msg + f"storages on {len(devices)} devices")
    allocated = c.get("allocated_cache_bytes")
    if not is_int(allocated) or total != allocated:
        raise Refusal("I-64", msg + f"storages sum to {total}, allocated_cache_bytes {show(allocated)}")


@checks("I-65")
def allocation_fits_budget(ctx: ImportState, rec: Record) -> None:
    """I-65: the allocation (a dry run: the planned bytes) fits the profiled budget and divides into whole pool pages."""
    if not rec.is_worker:
        return
    c = rec.cache
    a, v, n = cache_bytes(rec), c.get("available_cache_bytes"), c.get("num_blocks")
    what = "planned" if ctx.layout else "allocated"
    if not (is_int(a) and is_int(v) and is_pos_int(n)) or a > v or a % n != 0:
        raise Refusal(
            "I-65",
            f"physical cache allocation exceeds its budget or has a non-integral pool page size: {what} {show(a)}, available {show(v)}, num_blocks {show(n)}",
        )


@checks("I-66")
def hybrid_allocations_on_one_storage(ctx: ImportState, rec: Record) -> None:
    """I-66: hybrid records: every allocation on one storage of exactly the allocated bytes (a dry run: one planned size)."""
    if not (rec.is_worker and rec.hybrid):
        return
    c = rec.cache
    allocs: list[Any] = c["allocations"] if isinstance(c.get("allocations"), list) else []
    if ctx.layout:  # the plan: every allocation names the same backing size
        sizes = sorted({a.get("size") for a in allocs}, key=lambda x: (0, x, "") if is_int(x) else (1, 0, repr(x)))
        if len(sizes) != 1:
            raise Refusal(
                "I-66",
                f"layer-strided allocations must share one backing storage: planned sizes {', '.join(show(x) for x in sizes) or 'none'}",
            )
        return
    ids = sorted({str(a.get("storage_id")) for a in allocs})
    storage_bytes = {s.get("storage_id"): s.get("size_bytes") for s in c.get("storages", [])}
    if len(ids) != 1 or storage_bytes.get(ids[0]) != c.get("allocated_cache_bytes"):
        raise Refusal("I-66", f"layer-strided allocations must share one backing storage: {', '.join(ids) or 'none'}")


STAGE_G = [
    per_record(worker_blocks_match_scheduler),
    per_record(one_device_pool_with_reservations),
    per_record(storages_sum_to_allocation),
    per_record(allocation_fits_budget),
    per_record(hybrid_allocations_on_one_storage),
]


def pool_page(rec: Record) -> int:
    """``P``: the allocated (a dry run: planned) bytes per pool block (03 C-8)."""
    return cast(int, cache_bytes(rec) // rec.cache["num_blocks"])


# ==========================================================================
# stage H
# ==========================================================================


@attrs.frozen
class Page:
    """One layer's block-0 page in one allocation."""

    alloc: int
    pos: int
    layer: str
    group: int
    start: int
    size: int
    stride: int


def layer_maps(rec: Record, with_specs: bool = False) -> tuple[dict[str, int], dict[str, int], dict[str, Any]]:
    """layer → group, layer → page bytes, layer → spec identity (for I-67's distinct-spec test)."""
    group_of: dict[str, int] = {}
    page_of: dict[str, int] = {}
    spec_of: dict[str, Any] = {}
    for i, g in enumerate(rec.groups):
        specs = g.get("layer_specs") if rec.hybrid else None
        for name in g.get("layer_names", []):
            group_of[name] = i
            if isinstance(specs, dict) and isinstance(specs.get(name), dict):
                page_of[name] = specs[name].get("page_size_bytes")
                spec_of[name] = canonical(specs[name]) if with_specs else None
            else:
                page_of[name] = g.get("page_size_bytes")
                spec_of[name] = i
    return group_of, page_of, spec_of


def _name(a: dict[str, Any]) -> str:
    layers = a.get("layers")
    return layers[0] if isinstance(layers, list) and layers and isinstance(layers[0], str) else "?"


def alloc_page(a: dict[str, Any], page_of: dict[str, int]) -> int:
    """``page(A)``: the largest page among the allocation's layers."""
    return max((page_of.get(l, 0) or 0) for l in a["layers"])


@checks("I-67")
def allocations_name_known_storage_and_layers(ctx: ImportState, rec: Record) -> None:
    """I-67: each allocation names a known storage of its size, known layers of one group and one spec.

    For layout-level evidence (a dry run: no storage exists) the checks of what
    the plan resolves: a positive ``size``, the layers, positive strides and a
    non-negative offset, as integers (``false`` is not ``0``); ``storage_id``
    and an unresolved (``null``) ``block_stride`` are the tensor-level paths
    I-19 lets a dry worker leave unresolved.
    """
    if not rec.is_worker:
        return
    if ctx.layout:
        _planned_allocations(rec)
        return
    c = rec.cache
    storages = {s.get("storage_id"): s for s in c.get("storages", [])}
    group_of, _page_of, spec_of = layer_maps(rec, with_specs=True)
    allocs = c.get("allocations")
    if not isinstance(allocs, list):
        raise Refusal("I-67", "allocation 0 (?) is malformed: allocations is not a list")
    plain = not rec.hybrid
    for k, a in enumerate(allocs):
        msg = f"allocation {k} ({_name(a)}) is malformed: "
        if a.get("storage_id") not in storages:
            raise Refusal("I-67", msg + f"unknown storage {show(a.get('storage_id'))}")
        if not same_int(a.get("size"), storages[a["storage_id"]].get("size_bytes")):
            raise Refusal(
                "I-67",
                msg
                + f"size {show(a.get('size'))}, storage {a['storage_id']} holds {show(storages[a['storage_id']].get('size_bytes'))}",
            )
        layers = a.get("layers")
        if not isinstance(layers, list) or not layers:
            raise Refusal("I-67", msg + "no layers")
        for l in layers:
            if l not in group_of:
                raise Refusal("I-67", msg + f"unknown layer {show(l)}")
        if not plain:
            if len({group_of[l] for l in layers}) > 1:
                raise Refusal("I-67", msg + "its layers belong to two groups")
            if len({spec_of[l] for l in layers}) > 1:
                raise Refusal("I-67", msg + "its layers have two distinct specs")
            if not is_pos_int(a.get("layer_stride")):
                raise Refusal("I-67", msg + f"layer_stride {show(a.get('layer_stride'))}")
            if not is_pos_int(a.get("block_stride")):
                raise Refusal("I-67", msg + f"block_stride {show(a.get('block_stride'))}")
        else:
            if a.get("layer_stride") is not None and not is_pos_int(a.get("layer_stride")):
                raise Refusal("I-67", msg + f"layer_stride {show(a.get('layer_stride'))}")
            if not is_nonneg_int(a.get("block_stride")):
                raise Refusal("I-67", msg + f"block_stride {show(a.get('block_stride'))}")
        if not is_nonneg_int(a.get("offset")):
            raise Refusal("I-67", msg + f"offset {show(a.get('offset'))}")


def _planned_allocations(rec: Record) -> None:
    """I-67 for a dry worker (see :func:`allocations_name_known_storage_and_layers`)."""
    group_of, _page_of, spec_of = layer_maps(rec, with_specs=True)
    allocs = rec.cache.get("allocations")
    if not isinstance(allocs, list):
        raise Refusal("I-67", "allocation 0 (?) is malformed: allocations is not a list")
    for k, a in enumerate(allocs):
        msg = f"allocation {k} ({_name(a)}) is malformed: "
        if not is_pos_int(a.get("size")):
            raise Refusal("I-67", msg + f"size {show(a.get('size'))}")
        layers = a.get("layers")
        if not isinstance(layers, list) or not layers:
            raise Refusal("I-67", msg + "no layers")
        for l in layers:
            if l not in group_of:
                raise Refusal("I-67", msg + f"unknown layer {show(l)}")
        stride = a.get("layer_stride")
        if rec.hybrid:
            if len({group_of[l] for l in layers}) > 1:
                raise Refusal("I-67", msg + "its layers belong to two groups")
            if len({spec_of[l] for l in layers}) > 1:
                raise Refusal("I-67", msg + "its layers have two distinct specs")
            if not is_pos_int(stride):
                raise Refusal("I-67", msg + f"layer_stride {show(stride)}")
        elif stride is not None and not is_pos_int(stride):
            raise Refusal("I-67", msg + f"layer_stride {show(stride)}")
        block_stride = a.get("block_stride")
        if block_stride is not None and not (is_pos_int(block_stride) if rec.hybrid else is_nonneg_int(block_stride)):
            raise Refusal("I-67", msg + f"block_stride {show(block_stride)}")
        if not is_nonneg_int(a.get("offset")):
            raise Refusal("I-67", msg + f"offset {show(a.get('offset'))}")


#: What stage H checks of layout-level evidence: the allocations as planned (I-67).
STAGE_H_PLANNED = [per_record(allocations_name_known_storage_and_layers)]


@checks("I-68")
def layers_and_storages_accounted(ctx: ImportState, rec: Record) -> None:
    """I-68: every layer in exactly one allocation; every storage used."""
    if not rec.is_worker:
        return
    c = rec.cache
    count: dict[str, int] = {}
    for a in c["allocations"]:
        for l in a["layers"]:
            count[l] = count.get(l, 0) + 1
    for g in rec.groups:
        for l in g["layer_names"]:
            if count.get(l, 0) != 1:
                raise Refusal("I-68", f"allocation plan does not account for every layer and backing storage: {l}")
    used = {a["storage_id"] for a in c["allocations"]}
    for s in c["storages"]:
        if s.get("storage_id") not in used:
            raise Refusal(
                "I-68", f"allocation plan does not account for every layer and backing storage: {s.get('storage_id')}"
            )


@checks("I-69")
def bound_layout_is_resolved(ctx: ImportState, rec: Record) -> None:
    """I-69 [beyond reference]: the bound layout is the resolved one, and pages are contiguous."""
    if not (rec.is_worker and rec.hybrid):
        return
    a, b = rec.setting("cache", "kv_cache_layout"), rec.cache.get("kv_cache_layout")
    if a != b:
        raise Refusal(
            "I-69",
            f"kv cache layout differs between the resolved settings ({show(a)}) and the cache record ({show(b)})",
        )
    if b not in BLOCK_OUTER + LAYER_OUTER:
        raise Refusal(
            "I-69",
            f"kv cache layout {show(b)} is not supported: pages must be contiguous (LBHNC, LBNHC, BLHNC or BLNHC)",
        )


@checks("I-70")
def strides_follow_layout(ctx: ImportState, rec: Record) -> None:
    """I-70 [beyond reference]: strides follow the layout (block-outer or layer-outer)."""
    if not (rec.is_worker and rec.hybrid):
        return
    layout = rec.cache["kv_cache_layout"]
    n, P = rec.cache["num_blocks"], pool_page(rec)
    _g, page_of, _s = layer_maps(rec)
    for k, a in enumerate(rec.cache["allocations"]):
        ls, bs, page = a["layer_stride"], a["block_stride"], alloc_page(a, page_of)
        head = f"allocation {k} ({_name(a)}) strides contradict layout {layout}: layer_stride {ls}, block_stride {bs}, expected "
        if layout in BLOCK_OUTER:
            if bs != P or ls != page:
                raise Refusal("I-70", head + f"block_stride {P} (the pool page) and layer_stride {page}")
        elif ls != bs * n or bs < page:
            raise Refusal("I-70", head + f"layer_stride {bs * n} and block_stride >= {page}")
    if layout in LAYER_OUTER and len(rec.groups) > 1:
        pages = {page_of[l] for g in rec.groups for l in g["layer_names"]}
        if len(pages) > 1:
            a = rec.cache["allocations"][0]
            raise Refusal(
                "I-70",
                f"allocation 0 ({_name(a)}) strides contradict layout {layout}: layer_stride {a['layer_stride']}, block_stride {a['block_stride']}, expected layer pages of one size",
            )


@checks("I-71")
def page_fits_block_stride(ctx: ImportState, rec: Record) -> None:
    """I-71: a page fits its block stride."""
    if not (rec.is_worker and rec.hybrid):
        return
    _g, page_of, _s = layer_maps(rec)
    for k, a in enumerate(rec.cache["allocations"]):
        page = alloc_page(a, page_of)
        if page > a["block_stride"]:
            raise Refusal(
                "I-71", f"allocation {k} ({_name(a)}) page {page} exceeds its block stride {a['block_stride']}"
            )


def region_end(a: dict[str, Any], n: int, page: int) -> int:
    """I-72: the end of the last byte of the last page (no trailing block stride)."""
    return cast(int, a["offset"] + (len(a["layers"]) - 1) * a["layer_stride"] + (n - 1) * a["block_stride"] + page)


@checks("I-72")
def pages_within_storage(ctx: ImportState, rec: Record) -> None:
    """I-72: every allocation's pages lie within its storage."""
    if not (rec.is_worker and rec.hybrid):
        return
    n = rec.cache["num_blocks"]
    _g, page_of, _s = layer_maps(rec)
    for k, a in enumerate(rec.cache["allocations"]):
        page = alloc_page(a, page_of)
        end = region_end(a, n, page)
        if end > a["size"]:
            raise Refusal(
                "I-72",
                f"allocation {k} ({_name(a)}) exceeds its storage: offset + ({len(a['layers'])} - 1) x {a['layer_stride']} + ({n} - 1) x {a['block_stride']} + {page} = {end} > {a['size']}",
            )


@checks("I-73")
def aliased_tensors_share_block_stride(ctx: ImportState, rec: Record) -> None:
    """I-73: aliased tensors (intersecting regions on one storage) share one block stride."""
    if not (rec.is_worker and rec.hybrid):
        return
    n = rec.cache["num_blocks"]
    _g, page_of, _s = layer_maps(rec)
    allocs = rec.cache["allocations"]
    regions = [(a["storage_id"], a["offset"], region_end(a, n, alloc_page(a, page_of))) for a in allocs]
    for i in range(len(allocs)):
        for j in range(i + 1, len(allocs)):
            (si, oi, ei), (sj, oj, ej) = regions[i], regions[j]
            if si == sj and oi < ej and oj < ei and allocs[i]["block_stride"] != allocs[j]["block_stride"]:
                raise Refusal(
                    "I-73",
                    f"aliased tensors have incompatible pool block ownership: allocation {i} block_stride {allocs[i]['block_stride']}, allocation {j} block_stride {allocs[j]['block_stride']}",
                )


def pages(rec: Record) -> list[Page]:
    """Every layer's block-0 page, in (allocation, position) order."""
    group_of, page_of, _s = layer_maps(rec)
    out = []
    for k, a in enumerate(rec.cache["allocations"]):
        ls = a["layer_stride"] or 0
        for pos, l in enumerate(a["layers"]):
            out.append(Page(k, pos, l, group_of[l], a["offset"] + pos * ls, page_of[l], a["block_stride"]))
    return out


def overlap_interval(x: Page, y: Page, n: int) -> tuple[int, int] | None:
    """The block offsets ``d`` for which ``y``'s page of block ``b + d`` overlaps ``x``'s of block ``b``."""
    S = x.stride
    delta = y.start - x.start
    if S <= 0:
        return (0, 0) if -y.size < delta < x.size else None
    lo = (-y.size - delta) // S + 1  # smallest d with delta + d*S > -p'
    hi = -((delta - x.size) // S) - 1  # largest d with delta + d*S < p
    lo, hi = max(lo, -(n - 1)), min(hi, n - 1)
    return (lo, hi) if lo <= hi else None


@checks("I-74")
def blocks_owned_consistently(ctx: ImportState, rec: Record) -> None:
    """I-74 (one group, same block) and I-75 (different blocks) without enumerating blocks."""
    if not (rec.is_worker and rec.hybrid):
        return
    n = rec.cache["num_blocks"]
    storage = {k: a["storage_id"] for k, a in enumerate(rec.cache["allocations"])}
    ps = pages(rec)
    for i, x in enumerate(ps):
        for y in ps[i:]:
            if storage[x.alloc] != storage[y.alloc] or x.stride != y.stride:
                continue
            iv = overlap_interval(x, y, n)
            if iv is None:
                continue
            lo, hi = iv
            if x is not y and lo <= 0 <= hi and x.group == y.group:
                raise Refusal(
                    "I-74",
                    f"layers in one cache group cannot alias the same allocation slot: {x.layer} and {y.layer} share bytes of one block",
                )
            nonzero = [
                d for d in (lo, hi, 1 if lo <= 1 <= hi else None, -1 if lo <= -1 <= hi else None) if d not in (None, 0)
            ]
            if nonzero:
                d = min(nonzero, key=abs)
                raise Refusal(
                    "I-75", f"aliased pool block byte intervals overlap: {x.layer} block b and {y.layer} block b{d:+d}"
                )


@checks("I-76")
def strideless_allocations_packed_or_whole(ctx: ImportState, rec: Record) -> None:
    """I-76: records without layer strides (vLLM 0.27.0, 02 §3.14): packed or whole allocations."""
    if not rec.is_worker or rec.hybrid:
        return
    n = rec.cache["num_blocks"]
    group_of, page_of, _s = layer_maps(rec)
    allocs = rec.cache["allocations"]
    packed: list[tuple[int, Any, int, int]] = []
    users: dict[Any, int] = {}
    for a in allocs:
        users[a["storage_id"]] = users.get(a["storage_id"], 0) + 1
    for k, a in enumerate(allocs):
        head = f"allocation {k} ({_name(a)}) has an unsupported packed stride or undeclared storage alias: "
        if a["size"] % n != 0:
            raise Refusal("I-76", head + f"size {a['size']} is not a multiple of num_blocks {n}")
        slot = a["size"] // n
        bs = a["block_stride"]
        if bs not in (0, slot):
            raise Refusal("I-76", head + f"block_stride {bs} is neither 0 nor the slot {slot}")
        groups_seen: dict[int, str] = {}
        for l in a["layers"]:
            if group_of[l] in groups_seen:
                raise Refusal(
                    "I-76",
                    f"layers in one cache group cannot alias the same allocation slot: {groups_seen[group_of[l]]} and {l}",
                )
            groups_seen[group_of[l]] = l
        page = max(page_of.get(l) or 0 for l in a["layers"])
        if bs == 0:
            if a["offset"] != 0 or users[a["storage_id"]] > 1:
                raise Refusal("I-76", head + "a whole allocation must start at byte 0 of a storage of its own")
        else:
            if a["offset"] + page > slot:
                raise Refusal("I-76", head + f"offset {a['offset']} + page {page} exceeds the slot {slot}")
            for j, sid, off, pg in packed:
                if sid == a["storage_id"] and off < a["offset"] + page and a["offset"] < off + pg:
                    raise Refusal("I-76", head + f"its slot bytes intersect allocation {j}")
            packed.append((k, a["storage_id"], a["offset"], page))


STAGE_H = [
    per_record(allocations_name_known_storage_and_layers),
    per_record(layers_and_storages_accounted),
    per_record(bound_layout_is_resolved),
    per_record(strides_follow_layout),
    per_record(page_fits_block_stride),
    per_record(pages_within_storage),
    per_record(aliased_tensors_share_block_stride),
    per_record(blocks_owned_consistently),
    per_record(strideless_allocations_packed_or_whole),
]
