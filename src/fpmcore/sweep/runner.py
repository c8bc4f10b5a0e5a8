"""One task of a sweep: build the replay configuration, replay, keep the R-35 summary.

:func:`run_task` is what every engine runs, in this process, in a pool
worker or in a Ray task.  It never raises for a task's own failure: a
refusal (:class:`~fpmcore.documents.errors.FpmError`), a replay that stopped (R-9,
R-26, R-27; its summary is kept) and an unexpected exception all come back as
the outcome's ``error``, so that one failed run loses none of the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.sweep.grid import Task, build_config, rules_key

#: Inputs of this worker process by digest (set once per worker by the engines).
_INPUTS: dict[str, Any] = {}
_SETTINGS: dict[str, Any] = {}


def set_inputs(values: Mapping[str, Any]) -> None:
    """Keep the parsed inputs (profile, trace, table objects by digest) for the tasks of this process."""
    from fpmcore.sweep.settings import replay_settings

    _INPUTS.clear()
    _INPUTS.update(values)
    if not _SETTINGS:
        _SETTINGS.update(replay_settings())


def run_task(task: Task, inputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Replay one task; returns ``{"task", "summary", "error"}`` (``error`` is ``{"rule", "message"}`` or ``None``)."""
    from fpmcore.replay import run_replay

    if inputs is not None and inputs is not _INPUTS:
        set_inputs(inputs)
    elif not _SETTINGS:
        set_inputs(_INPUTS)
    summary: dict[str, Any] | None = None
    error: dict[str, str] | None = None
    try:
        table = None if task.table is None else _INPUTS[task.table]
        cfg = build_config(_INPUTS[task.profile], table, task.settings, _SETTINGS, _INPUTS[rules_key(task.profile)])
        result = run_replay(cfg, _INPUTS[task.trace])
        summary = result.summary
        if result.error is not None:
            error = {"rule": result.error.rule, "message": result.error.message}
    except FpmError as exc:
        error = {"rule": exc.rule, "message": exc.message}
    except Exception as exc:  # a bug must not lose the other runs
        error = {"rule": "internal", "message": f"{type(exc).__name__}: {exc}"}
    return {"task": task.index, "summary": summary, "error": error}


__all__ = ["run_task", "set_inputs"]
