"""``fpm sweep --plot``: the objective against each swept axis (matplotlib, optional).

One panel per axis that takes more than one value (a setting, or the
profile, trace or table when several are given).  Each run is a point: a dot
when it is feasible, a grey cross when it failed a constraint; the line joins
the best feasible value at each position of the axis.  Numeric axes are drawn
to scale; other axes are categories in grid order.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fpmcore.blocks import cdiv
from fpmcore.errors import FpmError
from fpmcore.sweep.objective import Constraint, Objective, axis_value, best, metrics

RULE = "sweep"


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend; refuses (exit 2) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FpmError(
            RULE, "--plot needs matplotlib, which is not installed; install the extra: pip install 'fpmcore[plot]'"
        ) from None
    return plt


def check_path(path: str, inputs: Iterable[str | os.PathLike[str] | None] = ()) -> None:
    """Refuse, before any run, a plot path that cannot be written or that is one of ``inputs``."""
    plt = pyplot()
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    supported = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    if fmt not in supported:
        raise FpmError(RULE, f"--plot {path}: unknown image format {fmt!r}; use one of {', '.join(sorted(supported))}")
    from fpmcore.outputs import check_output_path

    check_output_path(path, inputs=inputs)  # the one output-path rule (O-1 … O-4)


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def plot(
    path: str, rows: Sequence[Mapping[str, Any]], axes: Sequence[str], objective: Objective,
    constraints: Sequence[Constraint],
) -> None:  # fmt: skip
    plt = pyplot()
    panels = list(axes) or ["task"]
    feasible = {id(r) for r in best(rows, objective, constraints)}
    ncols = min(len(panels), 3)
    nrows = cdiv(len(panels), ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(4.8 * ncols, 3.8 * nrows), squeeze=False, sharey=True)
    cells = [ax for line in grid for ax in line]
    for ax in cells[len(panels) :]:
        ax.set_visible(False)
    for ax, axis in zip(cells, panels, strict=False):

        def value(row: Mapping[str, Any], axis: str = axis) -> Any:
            return row["task"] if axis == "task" else axis_value(row, axis)

        positions = list(dict.fromkeys(value(r) for r in rows))
        numeric = _numeric(positions)
        if numeric:
            positions.sort()
        where = {v: (v if numeric else i) for i, v in enumerate(positions)}
        good_x, good_y, bad_x, bad_y = [], [], [], []
        best_at: dict[Any, float] = {}
        for row in rows:
            y = None if row["summary"] is None else metrics(row["summary"]).get(objective.metric)
            if y is None:
                continue
            x = where[value(row)]
            if id(row) in feasible:
                good_x.append(x)
                good_y.append(y)
                cur = best_at.get(x)
                if cur is None or (y > cur if objective.maximize else y < cur):
                    best_at[x] = y
            else:
                bad_x.append(x)
                bad_y.append(y)
        ax.scatter(good_x, good_y, s=18, label="feasible")
        if bad_x:
            ax.scatter(bad_x, bad_y, s=18, marker="x", color="grey", label="fails a constraint")
        if best_at:
            xs = sorted(best_at)
            style = {"linewidth": 1} if numeric else {"linestyle": "none", "marker": "_", "markersize": 20}
            ax.plot(xs, [best_at[x] for x in xs], label="best", **style)
        if not numeric:
            ax.set_xticks(range(len(positions)))
            ax.set_xticklabels([str(v) for v in positions], rotation=20, ha="right", fontsize=7)
        ax.set_xlabel(axis)
        ax.grid(alpha=0.3)
    for line in grid:
        line[0].set_ylabel(objective.metric)
    cells[0].legend(fontsize=7)
    title = f"{objective.label} over {len(rows)} runs"
    if constraints:
        title += " (" + ", ".join(c.label for c in constraints) + ")"
    fig.suptitle(title)
    fig.tight_layout()
    import io

    from fpmcore.outputs import write_file

    image = io.BytesIO()
    fig.savefig(image, format=Path(path).suffix.lower().lstrip("."))
    plt.close(fig)
    write_file(path, image.getvalue())  # whole or not at all


__all__ = ["check_path", "plot", "pyplot"]
