"""The GLM-5.3-Flash producer this version of the plugin expects (05 §7.1, §7.2).

The reader compares an artifact's ``producer`` record with the record built
here, field by field (A-21), never with the plan.  The two digests of that
record are computed only from real producer files, the files the launch
staged:

``runtime_source_manifest.json``
    the runtime-source manifest (``producer.runtime_source_manifest_sha256``);
``glm53flash_prefix_scheduler.py``
    the overlay scheduler file (``producer.overlay_sha256``).

They are looked up in one directory, the *producer directory*:

* the directory named by the environment variable
  ``FPM_GLM53FLASH_PRODUCER_DIR`` (:data:`PRODUCER_DIR_ENV`) when it is set and
  not empty;
* otherwise the package data directory ``fpmcore_glm53flash/producer/``
  (:data:`PACKAGE_PRODUCER_DIR`) of the installed plugin.

No digest is ever assumed: when a file is missing from the producer
directory, its field of the expected record is ``None`` and A-21 refuses every
GLM artifact at that field, saying that this installation ships no producer
files (the manifest comes first in A-21's order).  Any change of either file —
a comment included — changes the expected record, and earlier campaigns are
then refused at ``producer.overlay_sha256`` or
``producer.runtime_source_manifest_sha256`` (05 §7.2).

The files are read at every validation (they are small), so an edited file
takes effect at once.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

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
#: Environment variable naming a producer directory; it takes precedence over the package data.
PRODUCER_DIR_ENV = "FPM_GLM53FLASH_PRODUCER_DIR"
#: The package data directory of the producer files, relative to the package.
PACKAGE_PRODUCER_DIR = "producer"
#: File names in a producer directory.
MANIFEST_NAME = "runtime_source_manifest.json"
OVERLAY_NAME = "glm53flash_prefix_scheduler.py"
#: ``producer.context_policy.internal_positions`` (05 §7.2).
INTERNAL_POSITIONS = 7

#: Producer record field → (file name, what the file is), in A-21's order.
DIGEST_FIELDS: dict[str, tuple[str, str]] = {
    "runtime_source_manifest_sha256": (MANIFEST_NAME, "the shipped runtime-source manifest"),
    "overlay_sha256": (OVERLAY_NAME, "the shipped producer scheduler file"),
}


@attrs.frozen
class ProducerFiles:
    """The producer files found in one producer directory.

    ``digests`` maps each field of :data:`DIGEST_FIELDS` to the SHA-256 of its
    file, or ``None`` when the file is missing or unreadable.  ``source`` names
    the directory (``None``: the package ships no producer directory);
    ``from_env`` says it came from :data:`PRODUCER_DIR_ENV`.
    """

    digests: Mapping[str, str | None]
    source: str | None
    from_env: bool

    def missing(self, field: str) -> str:
        """Why the expected value of ``field`` is unknown (the text after ``expected`` in A-21)."""
        name, what = DIGEST_FIELDS[field]
        if self.from_env:
            return f"the digest of {what}, but {PRODUCER_DIR_ENV}={self.source} holds no readable {name}"
        if any(v is not None for v in self.digests.values()):
            return (
                f"the digest of {what}, but the producer files installed under "
                f"fpmcore_glm53flash/{PACKAGE_PRODUCER_DIR}/ lack a readable {name}"
            )
        return (
            f"the digest of {what}, but this installation ships no producer files "
            f"(set {PRODUCER_DIR_ENV} or install them under fpmcore_glm53flash/{PACKAGE_PRODUCER_DIR}/)"
        )


def _package_dir() -> Any:
    """The package data directory (a :mod:`importlib.resources` traversable), or ``None``."""
    try:
        return resources.files(__package__).joinpath(PACKAGE_PRODUCER_DIR)
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - a broken installation
        return None


def _digest(directory: Any, name: str) -> str | None:
    try:
        return hashlib.sha256(directory.joinpath(name).read_bytes()).hexdigest()
    except (OSError, AttributeError):
        return None


def digests_of(directory: str | os.PathLike[str]) -> dict[str, str | None]:
    """The two producer digests of the files in ``directory`` (``None`` for a missing file)."""
    d = Path(directory)
    return {field: _digest(d, name) for field, (name, _) in DIGEST_FIELDS.items()}


def producer_files(environ: Mapping[str, str] | None = None) -> ProducerFiles:
    """The producer files of this installation (``environ`` defaults to :data:`os.environ`)."""
    env = os.environ if environ is None else environ
    named = env.get(PRODUCER_DIR_ENV, "")
    if named:
        return ProducerFiles(digests_of(named), named, True)
    pkg = _package_dir()
    found = {field: _digest(pkg, name) if pkg is not None else None for field, (name, _) in DIGEST_FIELDS.items()}
    return ProducerFiles(found, str(pkg) if pkg is not None else None, False)


def expected_producer_record(files: ProducerFiles | None = None) -> dict[str, Any]:
    """The producer fields of A-21 in their comparison order (05 §8.3).

    A digest field is ``None`` when its producer file is not installed
    (:meth:`ProducerFiles.missing` says why); A-21 then refuses at that field.
    """
    files = producer_files() if files is None else files
    return {
        "name": PRODUCER_NAME,
        "vllm_package_version": VLLM_VERSION,
        "scheduler_revision": SCHEDULER_REVISION,
        "distribution": DISTRIBUTION,
        "port_sources": list(PORT_SOURCES),
        **{field: files.digests[field] for field in DIGEST_FIELDS},
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
