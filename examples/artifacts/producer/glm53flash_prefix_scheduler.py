"""Stand-in for the GLM-5.3-Flash producer overlay of the example campaign (examples/artifacts).

This file is NOT the producer overlay.  The real producer overlay is the Dynamo
scheduler file ``glm53flash_prefix_scheduler.py`` of ``ai-dynamo 1.7.0.dev20261109``
(Dynamo commit 9abd2ef0d908c4bb323e1b8956ea76a5772a1d41, chapter 05 §7.1), which
this repository does not hold.  The example campaign was written against this
stand-in: its SHA-256 is the ``producer.overlay_sha256`` the example rank
artifacts record, and ``runtime_source_manifest.json`` beside it is the
stand-in runtime-source manifest whose SHA-256 they record as
``producer.runtime_source_manifest_sha256``.

Point ``FPM_GLM53FLASH_PRODUCER_DIR`` at this directory to read the example
campaign; an installation with the real producer files refuses it at A-21.

The stand-in schedules nothing; it only states the producer protocol the
example artifacts record (05 §7.2).
"""

PRODUCER_NAME = "glm53flash_prefix_scheduler"
STAND_IN = True
VLLM_PACKAGE_VERSION = "0.33.0"
SCHEDULER_REVISION = "9abd2ef0d908c4bb323e1b8956ea76a5772a1d41"
WARMUP_REPETITIONS = 5
MEASURED_REPETITIONS = 10
MAX_REJECTED_REPETITIONS = 10
REDUCTION = "upper_median_after_first_repetition"
STATE_PROTOCOL = "glm53flash_prefix_cache_real_seed_v1"
