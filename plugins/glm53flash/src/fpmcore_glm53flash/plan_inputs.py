"""What the GLM-5.3-Flash planner reads from a profile, and its refusals (04 G-9 … G-12).

:func:`deployment_facts` reduces one profile deployment to the values of G-9;
:func:`check_deployments` runs the refusals of G-12 in the spec's order,
(n) first, then (a) … (m), and raises the first as
:class:`fpmcore.documents.errors.FpmError` with rule ``G-12`` (values rendered as G-27).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs

from fpmcore.plugin_api import FpmError, JsonError, PlanLimits, load_json

_REVISION = re.compile(r"[0-9a-f]{40}")
_PREFIX = "glm-5.3-flash collection"


def render(value: Any) -> str:
    """G-27: integers in decimal, booleans ``true``/``false``, absent values ``absent``."""
    if value is None:
        return "absent"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@attrs.frozen
class GroupFacts:
    """One cache group, as the planner reads it (G-9)."""

    name: str
    kind: str
    block_size_tokens: int
    page_size_bytes: int
    sliding_window: int | None = None
    blocks_per_request: int | None = None
    prefill_checkpoint_blocks: int | None = None
    prefill_checkpoint_alignment: int | None = None

    @property
    def is_mamba(self) -> bool:
        """G-9: a Mamba group is a ``state`` group that carries ``prefill_checkpoint_blocks``."""
        return self.kind == "state" and self.prefill_checkpoint_blocks is not None


@attrs.frozen
class DeploymentFacts:
    """The G-9 inputs of one accepted deployment.

    ``label`` is the ``configuration`` of the runtime provenance (02 §9.3), or
    ``deployments[<i>]`` when the provenance does not name one.
    """

    index: int
    label: str
    groups: tuple[GroupFacts, ...]
    kv_cache_bytes: int | None
    max_model_len: int | None
    enable_prefix_caching: bool | None
    mamba_cache_mode: str | None
    hash_block_size_tokens: int | None
    max_num_tokens: int | None
    max_batch_size: int | None
    kv_cache_dtype: str
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1

    @property
    def where(self) -> str:
        return f"deployments[{self.index}]"

    @property
    def mamba_groups(self) -> tuple[GroupFacts, ...]:
        return tuple(g for g in self.groups if g.is_mamba)

    @property
    def attention_groups(self) -> tuple[GroupFacts, ...]:
        return tuple(g for g in self.groups if g.kind == "attention")

    @property
    def state_groups(self) -> tuple[GroupFacts, ...]:
        return tuple(g for g in self.groups if g.kind == "state")

    @property
    def has_checkpoint(self) -> bool:
        """G-11: every Mamba group (at least one) holds a prefill checkpoint block."""
        mamba = self.mamba_groups
        return bool(mamba) and all(g.prefill_checkpoint_blocks == 1 for g in mamba)

    @property
    def checkpoint_alignment(self) -> int | None:
        """G-11: ``A``, the alignment of the first Mamba group, when the rule holds."""
        return self.mamba_groups[0].prefill_checkpoint_alignment if self.has_checkpoint else None

    @property
    def checkpoint_setting(self) -> str:
        """G-12 (a) ``<setting>``."""
        if self.has_checkpoint:
            return f"checkpoint(blocks=1, alignment={render(self.checkpoint_alignment)})"
        return "none"

    @property
    def pool_page(self) -> int:
        """G-12: the ``page_size_bytes`` of the first cache group."""
        return self.groups[0].page_size_bytes

    @property
    def free_blocks(self) -> int:
        """G-10 / 03 C-16: ``kv_cache_bytes // page`` (the null block is already excluded)."""
        return (self.kv_cache_bytes or 0) // self.pool_page


def _label(runtime_memory: Any, index: int) -> str:
    try:
        provenance = load_json(runtime_memory.provenance)  # the host's one strict reader
        label = provenance.get("configuration")
    except (AttributeError, TypeError, JsonError):
        label = None
    return label if isinstance(label, str) and label else f"deployments[{index}]"


def deployment_facts(deployment: Any, index: int) -> DeploymentFacts:
    """Read the G-9 inputs of ``profile.deployments[index]`` (an ``FpmDeploymentProfile``)."""
    res = deployment.resources
    rm = res.runtime_memory
    groups = tuple(
        GroupFacts(
            name=g.name,
            kind=g.kind,
            block_size_tokens=g.block_size_tokens,
            page_size_bytes=g.page_size_bytes,
            sliding_window=g.sliding_window,
            blocks_per_request=g.blocks_per_request,
            prefill_checkpoint_blocks=g.prefill_checkpoint_blocks,
            prefill_checkpoint_alignment=g.prefill_checkpoint_alignment,
        )
        for g in (res.cache_groups or ())
    )
    return DeploymentFacts(
        index=index,
        label=_label(rm, index),
        groups=groups,
        kv_cache_bytes=rm.kv_cache_bytes if rm is not None else None,
        max_model_len=rm.max_model_len if rm is not None else None,
        enable_prefix_caching=rm.enable_prefix_caching if rm is not None else None,
        mamba_cache_mode=rm.mamba_cache_mode if rm is not None else None,
        hash_block_size_tokens=rm.hash_block_size_tokens if rm is not None else None,
        max_num_tokens=res.max_num_tokens,
        max_batch_size=res.max_batch_size,
        kv_cache_dtype=deployment.kv_cache_dtype,
        tp=deployment.tp,
        pp=deployment.pp,
        dp=deployment.dp,
        cp=deployment.cp,
        moe_tp=deployment.moe_tp,
        moe_ep=deployment.moe_ep,
    )


def _refuse(message: str, where: str = "") -> FpmError:
    return FpmError("G-12", message, where)


def _first_block(groups: Sequence[GroupFacts]) -> int | None:
    return groups[0].block_size_tokens if groups else None


def check_deployments(
    deployments: Sequence[DeploymentFacts],
    limits: PlanLimits,
    model_revision: str,
    warmup_iterations: int = 0,
) -> None:
    """Run the G-12 refusals over the accepted deployments, in the spec's order.

    (n) first, then (a) … (m); checks that scan several deployments take them
    in campaign order and the groups of a deployment in profile order.  The
    budget and the hash block of (c)/(d)/(e) are those of ``limits`` (the
    profile's values unless overridden); (h) compares the profile values.
    After (e) the scheduler block ``limits.block_size`` must equal the
    attention block (the G-8 ``scheduler_block_size`` launch check).

    :raises FpmError: rule ``G-12`` (or ``G-8``) with the spec's diagnostic.
    """
    # (n) a checkpoint block without its alignment
    for d in deployments:
        for i, g in enumerate(d.groups):
            if g.is_mamba and g.prefill_checkpoint_blocks == 1 and g.prefill_checkpoint_alignment is None:
                raise _refuse(
                    f"{_PREFIX} requires a prefill_checkpoint_alignment on mamba group '{g.name}' "
                    "with prefill_checkpoint_blocks 1: found absent",
                    f"{d.where}.resources.cache_groups[{i}]",
                )
    # (a) one checkpoint setting
    if len({d.has_checkpoint for d in deployments}) > 1:
        listing = ", ".join(f"{d.label}={d.checkpoint_setting}" for d in deployments)
        raise _refuse(
            f"{_PREFIX} requires the same prefill checkpoint setting across the accepted deployments: {listing}",
            "deployments",
        )
    # (b) one alignment over all Mamba groups
    alignments = sorted({g.prefill_checkpoint_alignment for d in deployments for g in d.mamba_groups} - {None})
    if len(alignments) > 1:
        raise _refuse(
            f"{_PREFIX} requires one prefill checkpoint alignment across the accepted deployments: "
            f"found {', '.join(map(str, alignments))}",
            "deployments",
        )
    # (c) (d) multiples of the indexer pool width
    if limits.token_budget % 4 != 0:
        raise _refuse(f"{_PREFIX} requires max_num_batched_tokens to be a multiple of 4: found {limits.token_budget}")
    H = limits.hash_block_size
    if H % 4 != 0:
        raise _refuse(f"{_PREFIX} requires hash_block_size_tokens to be a multiple of 4: found {H}")
    # (e) H = B_m = B_att  [BEYOND]
    for d in deployments:
        b_att = _first_block(d.attention_groups)
        for g in d.mamba_groups:
            if g.block_size_tokens != H or (b_att is not None and g.block_size_tokens != b_att):
                raise _refuse(
                    f"{_PREFIX} requires the hash block to equal the mamba block: hash_block_size_tokens={H}, "
                    f"mamba block_size_tokens={g.block_size_tokens}, attention block_size_tokens={render(b_att)}",
                    d.where,
                )
        if b_att is not None and limits.block_size != b_att:
            raise FpmError(
                "G-8",
                f"{_PREFIX} does not model this launch in its align-mode rule: "
                f"scheduler_block_size={limits.block_size}",
                d.where,
            )
    # (f) pinned revision
    if _REVISION.fullmatch(model_revision or "") is None:
        raise _refuse(
            f"{_PREFIX} requires a 40-character lowercase hexadecimal model revision: found '{model_revision}'",
            "model_revision",
        )
    # (g) prefix caching in align mode
    for d in deployments:
        if d.enable_prefix_caching is not True or d.mamba_cache_mode != "align":
            raise _refuse(
                f"{_PREFIX} requires prefix caching with mamba_cache_mode align: found "
                f"enable_prefix_caching={render(d.enable_prefix_caching)}, "
                f"mamba_cache_mode={render(d.mamba_cache_mode)}",
                f"{d.where}.resources.runtime_memory",
            )
    # (h) equal settings across deployments
    fields = (
        ("max_num_batched_tokens", lambda d: d.max_num_tokens),
        ("max_model_len", lambda d: d.max_model_len),
        ("hash_block_size_tokens", lambda d: d.hash_block_size_tokens),
        ("attention block_size_tokens", lambda d: _first_block(d.attention_groups)),
        ("mamba block_size_tokens", lambda d: _first_block(d.mamba_groups)),
        ("number of state groups", lambda d: len(d.state_groups)),
        ("number of mamba groups", lambda d: len(d.mamba_groups)),
    )
    for name, get in fields:
        values: list[Any] = []
        for d in deployments:
            if get(d) not in values:
                values.append(get(d))
        if len(values) > 1:
            raise _refuse(
                f"{_PREFIX} requires one {name} across the accepted deployments: "
                f"found {', '.join(render(v) for v in values)}",
                "deployments",
            )
    # (i) one page per pool
    for d in deployments:
        for i, g in enumerate(d.groups):
            if g.page_size_bytes != d.pool_page:
                raise _refuse(
                    "glm-5.3-flash capacity estimate requires every cache group page to equal the pool page: "
                    f"group {g.name} page {g.page_size_bytes}, pool page {d.pool_page}",
                    f"{d.where}.resources.cache_groups[{i}]",
                )
    # (j) an attention group and a Mamba group
    for d in deployments:
        if not d.attention_groups or not d.mamba_groups:
            kinds = ", ".join(g.kind for g in d.groups) or "absent"
            raise _refuse(
                f"{_PREFIX} requires an attention group and at least one mamba state group: found {kinds}",
                f"{d.where}.resources.cache_groups",
            )
    # (k) no float16 KV cache
    for d in deployments:
        if d.kv_cache_dtype == "half":
            raise _refuse("glm-5.3-flash collection refuses a half kv cache: kv_cache_dtype=half", d.where)
    # (l) no native warm-up
    if warmup_iterations != 0:
        raise _refuse(f"{_PREFIX} requires collection.warmup_iterations 0: found {warmup_iterations}")
    # (m) pure tensor parallelism  [BEYOND]
    for d in deployments:
        if (d.pp, d.dp, d.cp, d.moe_ep) != (1, 1, 1, 1) or d.moe_tp != d.tp:
            raise _refuse(
                f"{_PREFIX} supports pure tensor parallelism only: found pp={d.pp}, dp={d.dp}, cp={d.cp}, "
                f"moe_tp={d.moe_tp}, moe_ep={d.moe_ep}",
                d.where,
            )
