"""fpmcore.sweep: many replays of a grid, in a local process pool or on Ray (``fpm sweep``).

Public API::

    from fpmcore.sweep import expand, run_tasks

    sweep = expand("grid.json")                      # read and check everything; no run yet
    for outcome in run_tasks(sweep, sweep.tasks, engine="local", workers=2):
        ...                                          # {"task", "summary", "error"}, as runs finish

The modules mirror the concepts: :mod:`~fpmcore.sweep.grid` (the grid file,
its inputs and its tasks), :mod:`~fpmcore.sweep.settings` (the settable
``fpm replay`` options, read from its parser), :mod:`~fpmcore.sweep.traces`
(generated Poisson traces), :mod:`~fpmcore.sweep.runner` (one replay),
:mod:`~fpmcore.sweep.engines` (serial, local pool, Ray),
:mod:`~fpmcore.sweep.results` (the JSON Lines results file),
:mod:`~fpmcore.sweep.objective` (objective, constraints, best table),
:mod:`~fpmcore.sweep.objective_plot` and :mod:`~fpmcore.sweep.command` (``fpm sweep``).
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Sweep": "grid", "Task": "grid", "expand": "grid", "read_grid": "grid",
    "run_tasks": "engines", "run_task": "runner",
    "replay_settings": "settings",
    "read_rows": "results",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fpmcore.sweep' has no attribute {name!r}")
    return getattr(import_module(f"fpmcore.sweep.{module}"), name)
