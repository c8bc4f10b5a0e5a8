"""Changing a valid example into a negative case: the rows, retained FPMs and raw samples of an attempt,
the iteration groups and timing totals a row change moves (:func:`sync`), the sidecar lines and their
digests, and :class:`Case`, one negative case with the rule that must refuse it."""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fpmcore.validate.measured_values import upper_median
from tests.support.artifacts.attempts import glm_example
from tests.support.artifacts.example_campaign import PRODUCER_DIR, canonical
from tests.support.artifacts.rank_artifacts import measured_seconds, sidecar_evidence, slowest_wall

#: The end of a diagnostic about the row of benchmark id 2 on rank 0.
SUFFIX = ": benchmark_id=2 rank=0: r0.json"
#: The start of an A-32 diagnostic.
A32 = (
    "benchmark_measurement does not hold the producer's ten measured repetitions with their adjacent_upper_median "
    "estimate: "
)


def ranks_of(files: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [files[f"r{r}.json"] for r in range(len([n for n in files if n.startswith("r") and n.endswith(".json")]))]


def fpm(files: Mapping[str, Any], bid: int = 2, rank: int = 0) -> dict[str, Any]:
    """The retained FPM of a row (results order = benchmark ids)."""
    return files[f"r{rank}.json"]["results"][bid - 1]["fpms"][0]


def bm(files: Mapping[str, Any], bid: int = 2, rank: int = 0) -> dict[str, Any]:
    return fpm(files, bid, rank)["benchmark_measurement"]


def raw(files: Mapping[str, Any], i: int, bid: int = 2, rank: int = 0) -> dict[str, Any]:
    return bm(files, bid, rank)["raw_fpms"][i]


def sync(files: dict[str, Any], bid: int = 2) -> None:
    """Apply a row change to its iteration group on every rank and move the timing totals (05 §9.3)."""
    docs = ranks_of(files)
    for doc in docs:
        g = doc["iteration_groups"][bid - 1]
        g["point"] = copy.deepcopy(docs[0]["results"][bid - 1]["point"])
        for r, other in enumerate(docs):
            g["rank_results"][r]["fpms"] = [copy.deepcopy(other["results"][bid - 1]["fpms"][0])]
        g["wall_time"] = slowest_wall(g["rank_results"])
    total = measured_seconds(docs[0]["iteration_groups"])
    for doc in docs:
        doc["timing"]["measured_iteration_seconds"] = total
        doc["timing"]["benchmark_elapsed_seconds"] = max(doc["timing"]["benchmark_elapsed_seconds"], total)


def reseal_sidecar(files: dict[str, Any], rank: int = 0) -> None:
    """Update ``repetition_evidence`` (file digest and record count) after a sidecar edit."""
    evidence = files[f"r{rank}.json"]["repetition_evidence"]
    evidence.update(sidecar_evidence(evidence["path"], files[evidence["path"]]))


def edit_line(files: dict[str, Any], k: int, fn: Any, rank: int = 0) -> None:
    """Edit sidecar line ``k`` (parsed), keep it canonical, and rebind its row and the file digest."""
    doc = files[f"r{rank}.json"]
    lines = files[doc["repetition_evidence"]["path"]]
    obj = json.loads(lines[k])
    fn(obj)
    body = canonical(obj)
    lines[k] = body + b"\n"
    doc["results"][k]["repetition_evidence_sha256"] = hashlib.sha256(body).hexdigest()
    reseal_sidecar(files, rank)


def retained_from_raw(files: dict[str, Any], bid: int = 2, indices: Sequence[int] | None = None) -> None:
    m = bm(files, bid)
    idx = m["estimate"]["raw_sample_indices"] if indices is None else list(indices)
    m["estimate"]["raw_sample_indices"] = idx
    fpm(files, bid)["wall_time"] = upper_median([m["raw_fpms"][i]["wall_time"] for i in idx])


class Case:
    """One negative case: ``build()`` returns ``(plan, cell, files, message)``; ``rule`` must refuse it."""

    def __init__(self, case_id: str, rule: str, change: str, fn: Any, ranks: int = 1) -> None:
        self.id, self.rule, self.change, self._fn, self.ranks = case_id, rule, change, fn, ranks

    def build(
        self, producer_dir: str | Path = PRODUCER_DIR
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], str]:
        """The changed example, built against the producer files of ``producer_dir``."""
        plan, cell, files = glm_example(self.ranks, producer_dir)
        wants_dir = "producer_dir" in inspect.signature(self._fn).parameters
        out = self._fn(plan, cell, files, producer_dir=producer_dir) if wants_dir else self._fn(plan, cell, files)
        if isinstance(out, str):
            return plan, cell, files, out
        return out  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return self.id


def other_cell(
    plan: dict[str, Any], cell: dict[str, Any], files: dict[str, Any], residency: str, model_sha: str = ""
) -> dict[str, Any]:
    new = copy.deepcopy(cell)
    new["cell_id"] = f"fpm-other-{residency}"
    new["execution_identity"]["engram_residency"] = residency
    if model_sha is not None:
        new["execution_identity"]["model_config_sha256"] = model_sha or new["execution_identity"]["model_config_sha256"]
    for doc in ranks_of(files):
        doc["execution_identity"] = dict(new["execution_identity"])
    files["provenance.json"]["cell_id"] = new["cell_id"]
    return new
