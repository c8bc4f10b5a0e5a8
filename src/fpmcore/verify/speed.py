"""The machine's speed during the collection and during a serving, and the prediction at the serving's speed.

A virtual CPU does not run at one speed.  On the machines of this project the
host moves a vCPU between a fast and a slow state for seconds at a time,
with every counter of the guest quiet: a fixed piece of CPU work (the canary
of :mod:`fpmcore.contention`) ran 14 % over its best in one state and 55–60 %
over it in the other, about half of the time in each, on an otherwise idle
machine.  The engine slows down with it: served decode steps ran 0.78–0.88
times their table time while the canary was fast and 1.15–1.36 times while it
was slow.  ``fpm collect`` retakes the samples the canary calls slow
(:data:`~fpmcore.contention.MAX_SLOWDOWN`), so a table is the engine at the
machine's speed during the collection — mostly its fast state —, and a
serving of minutes runs at the machine's mean speed over those minutes.
Compared as they are, the prediction is short by the ratio of the two, which
is the machine's doing, not the engine's.

So ``fpm verify`` states both speeds as **speed factors**: how much longer the
canary ran than its best (``1 + slowdown``; the best is each process's own
fastest canary, the same fixed work on the same machine, within a few per
cent of each other over thousands of runs):

``collection``
    the median factor of the samples the table was made from (the measured
    repetitions of the campaign's run: each records the canary right after
    its engine run);
``serving``
    the factor of a serving, the mean of its steps' factors weighted by
    their wall time (each served step carries the latest canary of the
    serving: :class:`~fpmcore.contention.Sampler`).

and predicts each run a second time with every table time multiplied by
``serving / collection`` (:func:`scaled_table`): the engine's steps at the
machine's speed of that serving.  The errors of that prediction are the
run's ``errors`` and decide the verdict; the prediction at the collection's
speed is reported beside them (``errors_at_collection_speed``).  A serving
step is then contended only by what others did (waiting for a CPU, others'
CPU time), not by the machine's speed, which the factor accounts for.  A
campaign whose run recorded no canary (collected before canaries) has no
collection factor: its runs are compared at the collection's speed, and a
slow canary still makes a step contended.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from fpmcore.hooktypes import EngineStep
from fpmcore.replay.model import LatencyTable


def collection_speed(run_dir: Path) -> float | None:
    """The median speed factor of the run's measured samples (module docstring), ``None`` without canaries."""
    from fpmcore.collect import store
    from fpmcore.jsonio import load_path

    folder = run_dir / store.POINTS_DIR
    factors: list[float] = []
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            if path.suffix != ".json" or path.name.startswith("."):
                continue
            doc = load_path(path)
            for rep in doc.get("repetitions", ()) if isinstance(doc, dict) else ():
                seen = rep.get("contention") if isinstance(rep, dict) and rep.get("role") == "measured" else None
                slowdown = seen.get("slowdown") if isinstance(seen, dict) else None
                if isinstance(slowdown, (int, float)) and not isinstance(slowdown, bool) and slowdown >= 0:
                    factors.append(1.0 + float(slowdown))
    return statistics.median(factors) if factors else None


def serving_speed(steps: Sequence[EngineStep]) -> float | None:
    """The wall-time-weighted mean speed factor of a serving's steps (module docstring); ``None`` when no step
    carries a canary."""
    total = weighted = 0.0
    for s in steps:
        if s.contention is not None and s.wall_time > 0:
            total += s.wall_time
            weighted += s.wall_time * (1.0 + s.contention.slowdown)
    return weighted / total if total > 0 else None


def scaled_table(table: LatencyTable, factor: float) -> LatencyTable:
    """``table`` with every time multiplied by ``factor`` (its coordinates unchanged)."""
    return attrs.evolve(
        table,
        prefill=tuple((b, t, kv, s * factor) for b, t, kv, s in table.prefill),
        decode=tuple((b, kv, s * factor) for b, kv, s in table.decode),
        shared_step_seconds=table.shared_step_seconds * factor,
    )


def speed_record(collection: float | None, serving: float | None) -> dict[str, Any]:
    """A run's ``machine_speed``: both factors and their ratio (``None`` where one is unknown)."""
    ratio = serving / collection if collection and serving else None
    return {"collection": collection, "serving": serving, "ratio": ratio}
