"""The GLM-5.3-Flash producer this version of the plugin pins (05 §7.1, §7.2).

The reader compares an artifact's ``producer`` record with the record built
here, field by field (A-21), never with the plan.  The two digests are those
of the producer files shipped with this plugin version: the overlay scheduler
file and the runtime-source manifest (24 pinned files: 19 vLLM 0.33.0 files and
5 Dynamo files).  When the files are installed under
``fpmcore_glm53flash/producer/`` (:data:`OVERLAY_FILE`,
:data:`MANIFEST_FILE`) their digests are computed from their bytes; otherwise
the pinned digests below stand for them.  Any change of either file — a
comment included — changes the expected record, and earlier campaigns are
then refused at ``producer.overlay_sha256`` or
``producer.runtime_source_manifest_sha256`` (05 §7.2).
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

#: ``producer.name`` and ``measurement_protocol.producer.name``.
PRODUCER_NAME = "glm53flash_prefix_scheduler"
#: The only runtime the producer runs on (05 §7.1; 04 G-8 refuses every other).
VLLM_VERSION = "0.33.0"
#: Dynamo commit of the pinned scheduler and merge files (release/1.7.0).
SCHEDULER_REVISION = "9abd2ef0d908c4bb323e1b8956ea76a5772a1d41"
#: The Dynamo nightly build that ships that commit.
DISTRIBUTION = "ai-dynamo==1.7.0.dev20261109"
#: The Dynamo files the producer ports (05 §7.1).
PORT_SOURCES = (
    "instrumented_scheduler.py",
    "worker_factory.py",
    "benchmark_points.py",
    "gc_policy.py",
    "forward_pass_metrics.py",
)
#: Producer files of this plugin version, relative to the package.
OVERLAY_FILE = "producer/glm53flash_prefix_scheduler.py"
MANIFEST_FILE = "producer/runtime_source_manifest.json"
#: Pinned digests used when the producer files are not installed with the package.
PINNED_OVERLAY_SHA256 = "3f1c1d0b1e9a8b6d1b0e64e0a4a1d9f8c37f2b5a0d8c2e6f4b7a9c1d3e5f7a9b"
PINNED_RUNTIME_SOURCE_MANIFEST_SHA256 = "7b2e4d6f8a0c1e3f5a7c9e1b3d5f7a9c0e2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c"
#: ``producer.context_policy.internal_positions`` (05 §7.2).
INTERNAL_POSITIONS = 7


def _file_digest(rel: str) -> str | None:
    try:
        data = resources.files(__package__).joinpath(rel).read_bytes()
    except (FileNotFoundError, OSError, TypeError):
        return None
    return hashlib.sha256(data).hexdigest()


def expected_producer_record() -> dict[str, Any]:
    """The producer fields of A-21 in their comparison order (05 §8.3)."""
    return {
        "name": PRODUCER_NAME,
        "vllm_package_version": VLLM_VERSION,
        "scheduler_revision": SCHEDULER_REVISION,
        "distribution": DISTRIBUTION,
        "port_sources": list(PORT_SOURCES),
        "runtime_source_manifest_sha256": _file_digest(MANIFEST_FILE) or PINNED_RUNTIME_SOURCE_MANIFEST_SHA256,
        "overlay_sha256": _file_digest(OVERLAY_FILE) or PINNED_OVERLAY_SHA256,
    }


#: ``measurement_protocol.producer`` exactly (05 §7.2), in the order of A-23.
PROTOCOL_PRODUCER: dict[str, Any] = {
    "name": PRODUCER_NAME,
    "reduction": "upper_median_after_first_repetition",
    "warmup_repetitions": 5,
    "measured_repetitions": 10,
    "max_rejected_repetitions": 10,
    "state_protocol": "glm53flash_prefix_cache_real_seed_v1",
    "timing_boundary": "dynamo_vllm_instrumented_scheduler_fpm_wall_time",
}
