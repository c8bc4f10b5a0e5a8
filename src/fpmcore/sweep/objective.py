"""The objective of a sweep, its constraints, and the table of the best settings.

Metrics are the numbers of the R-35 summary: its scalar fields by name
(``output_tokens_per_s``, ``preemptions_total``, ``finished``, …) and each
latency statistic as ``<stat>_<field>`` (``p99_ttft_s``, ``mean_tpot_s``,
``max_e2e_s``; the statistics are ``mean``, ``p50``, ``p90``, ``p99``,
``max``).  The names are read from a summary, so they follow the replay.

``--objective [max:|min:]METRIC`` (default ``max:output_tokens_per_s``)
    what "best" means.
``--constraint METRIC<OP>NUMBER`` (repeatable; ``OP`` is ``<=``, ``<``,
``>=``, ``>`` or ``==``)
    a run is feasible when it has no error and every constraint holds;
    a metric that is null in a run (no finished request) fails its constraint.

The best table ranks the feasible runs by the objective (ties keep task
order) and shows the swept axes, the objective and the constrained metrics.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from fpmcore.cli.context import print_table
from fpmcore.documents.errors import FpmError

RULE = "sweep"
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "<": operator.lt, ">": operator.gt,
}  # fmt: skip
_CONSTRAINT = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(<=|>=|==|<|>)\s*(\S+)\s*$")


def metrics(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """The metrics of one R-35 summary (see the module docstring)."""
    out: dict[str, float | None] = {}
    for key, value in summary.items():
        if isinstance(value, dict):
            for stat, v in value.items():
                out[f"{stat}_{key}"] = v
        elif key != "schema" and (value is None or isinstance(value, (int, float)) and not isinstance(value, bool)):
            out[key] = value
    return out


@attrs.frozen
class Objective:
    metric: str
    maximize: bool = True

    @property
    def label(self) -> str:
        return f"{'max' if self.maximize else 'min'}:{self.metric}"


@attrs.frozen
class Constraint:
    metric: str
    op: str
    bound: float

    def holds(self, value: float | None) -> bool:
        return value is not None and _OPS[self.op](value, self.bound)

    @property
    def label(self) -> str:
        return f"{self.metric}{self.op}{self.bound:g}"


def parse_objective(text: str) -> Objective:
    direction, sep, metric = text.partition(":")
    if not sep:
        return Objective(text.strip(), True)
    if direction not in ("max", "min") or not metric.strip():
        raise FpmError(RULE, f"--objective must be [max:|min:]METRIC, found {text!r}")
    return Objective(metric.strip(), direction == "max")


def parse_constraint(text: str) -> Constraint:
    m = _CONSTRAINT.match(text)
    if m is None:
        raise FpmError(RULE, f"--constraint must be METRIC<=NUMBER (or <, >=, >, ==), found {text!r}")
    try:
        bound = float(m.group(3))
    except ValueError:
        raise FpmError(RULE, f"--constraint {text!r}: {m.group(3)!r} is not a number") from None
    if not math.isfinite(bound):
        raise FpmError(RULE, f"--constraint {text!r}: the bound must be finite")
    return Constraint(m.group(1), m.group(2), bound)


def check_metrics(names: Iterable[str], known: Iterable[str]) -> None:
    """Refuse a metric the summary does not have, naming the ones it has."""
    known = list(known)
    for name in names:
        if name not in known:
            raise FpmError(RULE, f"unknown metric {name!r}; metrics are: {', '.join(known)}")


def best(
    rows: Sequence[Mapping[str, Any]], objective: Objective, constraints: Sequence[Constraint]
) -> list[Mapping[str, Any]]:
    """The feasible rows with an objective value, best first."""
    ranked = []
    for row in rows:
        if row["error"] is not None or row["summary"] is None:
            continue
        m = metrics(row["summary"])
        value = m.get(objective.metric)
        if value is None or not all(c.holds(m.get(c.metric)) for c in constraints):
            continue
        ranked.append((-value if objective.maximize else value, row["task"], row))
    ranked.sort(key=lambda t: (t[0], t[1]))
    return [row for _, _, row in ranked]


def axis_value(row: Mapping[str, Any], axis: str) -> Any:
    """A row's value on an axis: ``profile``, ``trace``, ``table`` or a setting name."""
    if axis in ("profile", "trace", "table"):
        return row[axis]
    return row["settings"].get(axis)


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def render_best(
    console: Any, rows: Sequence[Mapping[str, Any]], axes: Sequence[str], objective: Objective,
    constraints: Sequence[Constraint], top: int,
) -> None:  # fmt: skip
    """Print the rich table of the ``top`` best runs."""
    from rich.table import Table

    ranked = best(rows, objective, constraints)
    title = f"best of {len(rows)} runs by {objective.label}"
    if constraints:
        title += " with " + ", ".join(c.label for c in constraints)
    if not ranked:
        console.print(f"{title}: no run meets the constraints", highlight=False)
        return
    shown_metrics = [objective.metric] + [c.metric for c in constraints if c.metric != objective.metric]
    table = Table(title=title)
    table.add_column("#", justify="right")
    table.add_column("task", justify="right")
    for axis in axes:
        table.add_column(axis, overflow="fold")
    for name in dict.fromkeys(shown_metrics):
        table.add_column(name, justify="right")
    for i, row in enumerate(ranked[:top], start=1):
        m = metrics(row["summary"])
        cells = [str(i), str(row["task"])] + [_fmt(axis_value(row, a)) for a in axes]
        cells += [_fmt(m.get(name)) for name in dict.fromkeys(shown_metrics)]
        table.add_row(*cells)
    print_table(console, table)


__all__ = ["Constraint", "Objective", "axis_value", "best", "check_metrics", "metrics", "parse_constraint",
           "parse_objective", "render_best"]  # fmt: skip
