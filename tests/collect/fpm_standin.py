"""``fpm`` with the stand-in runtime plugin registered: ``python -m tests.collect.fpm_standin ARGS…``.

The kill tests run it as a subprocess (from the repository root) and kill it.  ``--probe recorded`` is the
recorded probe of ``examples/probes/gdn-hybrid-tp4``.  Slowing knobs (seconds): ``FPM_STANDIN_STEP_SLEEP`` per
engine step, ``FPM_STANDIN_PROBE_SLEEP`` in the probe, ``FPM_STANDIN_RECORD_SLEEP`` before each stage is recorded,
``FPM_STANDIN_WRITE_SLEEP`` inside every atomic file write, after the temporary file is written and before it is
renamed into place.  The prefill repetitions start without the engine idle of a CPU engine (the stand-in has no
caches to cool; ``FPM_STANDIN_PREFILL_IDLE`` seconds sets one).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from fpmcore.campaign import onboard
from fpmcore.cli import main
from fpmcore.host.build import build_host
from tests.collect.standin import StandinRuntime, recorded_probe

PROBE = Path(__file__).resolve().parents[2] / "examples" / "probes" / "gdn-hybrid-tp4"


def run(argv: list[str]) -> int:
    runtime = StandinRuntime()
    from fpmcore.collect import run as collect_run

    collect_run.DEFAULT_PREFILL_IDLE = float(os.environ.get("FPM_STANDIN_PREFILL_IDLE", "0"))
    onboard.PROBE_STAGES["recorded"] = recorded_probe(
        PROBE, delay=float(os.environ.get("FPM_STANDIN_PROBE_SLEEP", "0"))
    )
    pause = float(os.environ.get("FPM_STANDIN_RECORD_SLEEP", "0"))
    if pause:  # widen the window between a stage's output and its record in the manifest
        record = onboard.Campaign.record

        def slow_record(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            time.sleep(pause)
            return record(self, *args, **kwargs)

        onboard.Campaign.record = slow_record  # type: ignore[method-assign]
    write_pause = float(os.environ.get("FPM_STANDIN_WRITE_SLEEP", "0"))
    if write_pause:  # widen the window between the whole temporary file and its rename
        from fpmcore.documents import output_files as outputs

        write_new = outputs._write_new

        def slow_write_new(path, data):  # type: ignore[no-untyped-def]
            write_new(path, data)
            time.sleep(write_pause)

        outputs._write_new = slow_write_new  # type: ignore[assignment]
    return main(argv, host=build_host(plugins=[runtime], autoload=False, enable=("vllm_033",), environ={}))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
