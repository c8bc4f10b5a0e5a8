"""The example plans: excerpts of a collection plan (its cells with their execution identity, the plan record
of 04 G-25 for GLM), each sealed by its ``sha256``, the digest of every other field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore.validate.measured_values import canonical_digest
from tests.support.artifacts.example_campaign import (
    CHECKPOINT,
    DSV41_CONFIG_SHA256,
    DSV41_MODEL,
    FULL_DIGEST,
    GLM_CONFIG_SHA256,
    GLM_MODEL,
    GLM_REVISION,
    SMOKE_MANIFEST,
)


def plan_sha256(plan: Mapping[str, Any]) -> str:
    """The plan hash the example plans carry: the digest of the plan without its ``sha256``."""
    return canonical_digest({k: v for k, v in plan.items() if k != "sha256"})


def _identity(model_config_sha256: str, engram_residency: str) -> dict[str, Any]:
    """A cell's ``execution_identity``."""
    return {
        "model_config_sha256": model_config_sha256,
        "execution_profile": "full",
        "engram_residency": engram_residency,
        "input_modality": "text",
    }


def _revision(revision: str | None) -> dict[str, Any]:
    """``model_revision`` where the plan names one."""
    return {} if revision is None else {"model_revision": revision}


def _cell(
    cell_id: str, point_set: str, topology: dict[str, int], model: str, revision: str | None, identity: dict[str, Any]
) -> dict[str, Any]:
    return {
        "cell_id": cell_id,
        "point_set": point_set,
        "workload_kind": "prefill_decode",
        "topology": topology,
        "model": model,
        **_revision(revision),
        "execution_identity": identity,
    }


def _sealed_plan(
    model: str, revision: str | None, cells: list[dict[str, Any]], options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A plan excerpt of ``cells`` with its ``sha256``."""
    plan: dict[str, Any] = {
        "schema_name": "fpmcore_collection_plan_excerpt",
        "schema_version": 1,
        "backend": "vllm",
        "model": model,
        **_revision(revision),
        "cells": cells,
        **({} if options is None else {"options": options}),
    }
    plan["sha256"] = plan_sha256(plan)
    return plan


def glm_plan(
    manifest_sha256: str = FULL_DIGEST, smoke: Mapping[str, Any] = SMOKE_MANIFEST, planned: int = 577
) -> dict[str, Any]:
    """A GLM collection plan excerpt: two TP 4 cells (smoke, full) and the plan record of 04 G-25."""
    ident = _identity(GLM_CONFIG_SHA256, "none")
    topology = {"tp": 4, "dp": 1, "pp": 1, "cp": 1, "moe_tp": 4, "moe_ep": 1}
    cells = [
        _cell(f"fpm-glm53flash-tp4-{name}", name, dict(topology), GLM_MODEL, GLM_REVISION, dict(ident))
        for name in ("smoke", "full")
    ]
    options = {
        "benchmark_points": {
            "origin": "glm53flash_grid_v1",
            "checkpoint": dict(CHECKPOINT),
            "candidates": {"prefill": 496, "decode": 97},
            "dropped": {"align_split": 0, "token_budget": 16, "capacity": 0},
            "manifest_sha256": manifest_sha256,
            "smoke_manifest_sha256": canonical_digest(smoke),
            "planned_point_count": planned,
        }
    }
    return _sealed_plan(GLM_MODEL, GLM_REVISION, cells, options)


def dsv41_plan() -> dict[str, Any]:
    """A DeepSeek V4.1 plan excerpt with one eager cell (Engram tables in HBM, TP-sharded)."""
    topology = {"tp": 8, "dp": 1, "pp": 1, "cp": 1, "moe_tp": 1, "moe_ep": 8}
    cell = _cell(
        "fpm-dsv41-tp8-eager", "staged", topology, DSV41_MODEL, None, _identity(DSV41_CONFIG_SHA256, "hbm_tp_sharded")
    )
    return _sealed_plan(DSV41_MODEL, None, [cell])
