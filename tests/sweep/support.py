"""Grids shared by the sweep tests (absolute paths into examples/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
GLM = EX / "profiles" / "glm53flash-tp4.fpm-profile.json"
PLAIN = EX / "profiles" / "plain-llama8b-like.fpm-profile.json"
GLM_TRACE = EX / "traces" / "glm-mixed-120.jsonl"
PLAIN_TRACE = EX / "traces" / "plain-poisson-300.jsonl"
ONE_TRACE = EX / "traces" / "glm-one-request.jsonl"
GLM_TABLE = EX / "fpm_tables" / "glm53flash-tp4.json"

#: The issue's grid, exactly as written (paths relative to the repository root).
ISSUE_GRID = EX / "sweeps" / "glm-seqs-budget.json"

#: The acceptance sweep: 2 profiles x 3 max_num_seqs x 2 token budgets x 2 traces = 24 runs.
ACCEPTANCE: dict[str, Any] = {
    "profiles": [str(GLM), str(PLAIN)],
    "traces": [str(GLM_TRACE), str(PLAIN_TRACE)],
    "tables": [str(GLM_TABLE)],
    "settings": {"max_num_seqs": [8, 16, 32], "max_num_batched_tokens": [4096, 8192]},
}


def write_grid(path: Path, grid: dict[str, Any]) -> Path:
    path.write_text(json.dumps(grid), encoding="utf-8")
    return path


def rows_of(result: Any) -> list[dict[str, Any]]:
    doc = result.json()
    assert list(doc) == ["schema", "rows"] and doc["schema"] == 1, doc.keys()
    return doc["rows"]
