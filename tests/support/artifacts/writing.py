"""Writing an attempt: the files' bytes (JSON, the sidecars' lines, ``points.json`` canonical), the artifact
index that pins them (05 §1), and the example runs of ``examples/artifacts``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.artifacts.attempts import dsv41_cell, glm_cell
from tests.support.artifacts.example_campaign import (
    DSV41_MANIFEST,
    PRODUCER_DIR,
    SMOKE_MANIFEST,
    canonical,
    producer_digests,
)
from tests.support.artifacts.plans import dsv41_plan, glm_plan


def serialize(files: Mapping[str, Any], *, indent: int | None = None, index: bool = True) -> dict[str, bytes]:
    """File bytes of an attempt: JSON files (``points.json`` canonical), line files joined, plus ``index.json``."""
    out: dict[str, bytes] = {}
    for name, value in files.items():
        if name.startswith("@"):
            continue
        if name.endswith(".jsonl"):
            out[name] = b"".join(value)
        elif name == "points.json":
            out[name] = canonical(value)
        elif indent is None:
            out[name] = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        else:
            out[name] = (json.dumps(value, indent=indent, ensure_ascii=False) + "\n").encode()
    return with_index(out) if index else out


def with_index(out: Mapping[str, bytes]) -> dict[str, bytes]:
    """The files of an attempt plus the artifact index that pins their bytes (05 §1)."""
    files = {n: b for n, b in out.items() if n != "index.json"}
    index = {"schema_version": 1, "files": {n: hashlib.sha256(b).hexdigest() for n, b in sorted(files.items())}}
    return {**files, "index.json": (json.dumps(index, indent=2) + "\n").encode()}


def write_attempt(directory: str | Path, files: Mapping[str, Any], *, indent: int | None = None) -> Path:
    """Write one attempt directory (with its artifact index); returns the directory."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, data in serialize(files, indent=indent).items():
        (d / name).write_bytes(data)
    return d


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def example(out: Path, producer_dir: str | Path = PRODUCER_DIR) -> None:
    """examples/artifacts: the GLM smoke run (05 §9) and a DeepSeek V4.1 eager run, each with its plan.

    The GLM run is written against the producer files of ``producer_dir``
    (they are read, never written).
    """
    producer_digests(producer_dir)  # refuse before writing anything
    gp = glm_plan()
    write_json(out / "glm53flash" / "plan.json", gp)
    smoke = next(c for c in gp["cells"] if c["point_set"] == "smoke")
    files = glm_cell(gp, smoke, SMOKE_MANIFEST, producer_dir=producer_dir)
    write_attempt(out / "glm53flash" / "run" / smoke["cell_id"], files, indent=1)
    dp = dsv41_plan()
    write_json(out / "dsv41" / "plan.json", dp)
    cell = dp["cells"][0]
    write_attempt(out / "dsv41" / "run" / cell["cell_id"], dsv41_cell(dp, cell, DSV41_MANIFEST), indent=1)
