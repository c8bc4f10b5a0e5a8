"""Write measurement artifacts in the producer's shape for a plan (05 §1-§7), with synthetic timings.

The artifacts have the exact form the GLM-5.3-Flash producer (contract
``glm53flash_native_graph_policy``) or the DeepSeek V4.1 eager producer writes
into one attempt directory: rank artifacts ``r<k>.json``, the repetition
evidence sidecars, the collector provenance, the staged point manifest and the
artifact index.  Timings are deterministic: every point repeats the raw wall
times of 05 §9.1 scaled by the point's size, so the GLM smoke cell reproduces
the row of §9.1 and the context of §9.2 exactly (benchmark id 2: forwards
23…32, retained 0.0348, ``warmup_records_before`` 12).

Usage (:mod:`~tests.support.artifacts.command_line`)::

    python tests/support/make_artifacts.py example [OUT]           # examples/artifacts (both models)
    python tests/support/make_artifacts.py negatives OUT           # one attempt per negative case
    python tests/support/make_artifacts.py cell --plan PLAN --cell ID --out DIR [--ranks N] [--merged]

Every command takes ``--producer-dir DIR`` (default ``examples/artifacts/producer``,
the stand-in producer of the example campaign): the GLM ``producer`` record
carries the SHA-256 of that directory's ``runtime_source_manifest.json`` and
``glm53flash_prefix_scheduler.py`` (05 §7.2), computed from their bytes; the
tool refuses to write a GLM record when either file is missing.  A reader
accepts such artifacts only when its producer files have the same bytes, e.g.
with ``FPM_GLM53FLASH_PRODUCER_DIR`` pointing at the same directory.

``cell`` reads the points the plan staged for the cell (the smoke subset when
the cell's ``point_set`` is ``smoke``, else the full list) from
``options.benchmark_points``.

The package, by concept: the example campaign's fixed values and protocols
(:mod:`~tests.support.artifacts.example_campaign`), the plans (:mod:`~tests.support.artifacts.plans`), a rank
artifact and its iteration groups (:mod:`~tests.support.artifacts.rank_artifacts`), the files of an attempt
(:mod:`~tests.support.artifacts.attempts`: :func:`glm_cell`, :func:`dsv41_cell`), their bytes and the example
runs (:mod:`~tests.support.artifacts.writing`: :func:`serialize`, :func:`write_attempt`), the edits that make a
negative case (:mod:`~tests.support.artifacts.edits`) and the cases (:mod:`~tests.support.artifacts.negatives`:
05 §9.3 in :mod:`~tests.support.artifacts.spec_negatives`, fpmcore's own in
:mod:`~tests.support.artifacts.own_negatives`).  The names below are what the tests and the benchmark use.
"""

from __future__ import annotations

from tests.support.artifacts.attempts import dsv41_cell, glm_cell, glm_example
from tests.support.artifacts.edits import Case, bm, edit_line, fpm, ranks_of, raw, reseal_sidecar, sync
from tests.support.artifacts.example_campaign import (
    DSV41_MANIFEST,
    GLM_MODEL,
    GLM_REVISION,
    PRODUCER_DIR,
    SMOKE_MANIFEST,
    glm_producer_record,
    glm_protocol,
    producer_digests,
)
from tests.support.artifacts.negatives import CASES, write_negatives
from tests.support.artifacts.plans import dsv41_plan, glm_plan, plan_sha256
from tests.support.artifacts.rank_artifacts import points_of, raw_walls
from tests.support.artifacts.writing import example, serialize, with_index, write_attempt, write_json

__all__ = [
    "CASES",
    "DSV41_MANIFEST",
    "GLM_MODEL",
    "GLM_REVISION",
    "PRODUCER_DIR",
    "SMOKE_MANIFEST",
    "Case",
    "bm",
    "dsv41_cell",
    "dsv41_plan",
    "edit_line",
    "example",
    "fpm",
    "glm_cell",
    "glm_example",
    "glm_plan",
    "glm_producer_record",
    "glm_protocol",
    "plan_sha256",
    "points_of",
    "producer_digests",
    "ranks_of",
    "raw",
    "raw_walls",
    "reseal_sidecar",
    "serialize",
    "sync",
    "with_index",
    "write_attempt",
    "write_json",
    "write_negatives",
]
