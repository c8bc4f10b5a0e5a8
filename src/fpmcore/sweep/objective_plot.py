"""``fpm sweep --plot``: the objective against each swept axis (matplotlib, optional).

One panel per axis that takes more than one value (a setting, or the
profile, trace or table when several are given).  Each run is a point: a dot
when it is feasible, a grey cross when it failed a constraint; the line joins
the best feasible value at each position of the axis.  Numeric axes are drawn
to scale; other axes are categories in grid order, labelled by file name.
When several traces are swept, each trace is its own series in every panel
(its colour and its own best line, named in the legend below the panels):
traces of different arrival rates load the engine differently, and one line
through all of them would compare loads, not settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fpmcore.documents.blocks import cdiv
from fpmcore.documents.errors import FpmError
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
    from fpmcore.documents.output_files import check_output_path

    check_output_path(path, inputs=inputs)  # the one output-path rule (O-1 … O-4)


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _shown(value: Any) -> str:
    """A category as a tick or legend label: a file by its name (the folders are in the results file)."""
    text = str(value)
    return Path(text).name if "/" in text or os.sep in text else text


#: The axis whose values draw separate series (own colour, own best line) in every panel: runs of different
#: traces differ in load (a rate of 0.5/s against one of 2/s), so comparing a setting across them mixes loads.
SERIES_AXIS = "trace"


def plot(
    path: str, rows: Sequence[Mapping[str, Any]], axes: Sequence[str], objective: Objective,
    constraints: Sequence[Constraint],
) -> None:  # fmt: skip
    plt = pyplot()
    panels = list(axes) or ["task"]
    feasible = {id(r) for r in best(rows, objective, constraints)}
    ncols = min(len(panels), 3)
    nrows = cdiv(len(panels), ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(4.8 * ncols, 3.8 * nrows + 0.6), squeeze=False, sharey=True)
    cells = [ax for line in grid for ax in line]
    for ax in cells[len(panels) :]:
        ax.set_visible(False)
    series_of = (lambda r: axis_value(r, SERIES_AXIS)) if SERIES_AXIS in panels else (lambda r: None)
    series = list(dict.fromkeys(series_of(r) for r in rows))
    colors = {v: f"C{i % 10}" for i, v in enumerate(series)}
    for ax, axis in zip(cells, panels, strict=False):

        def value(row: Mapping[str, Any], axis: str = axis) -> Any:
            return row["task"] if axis == "task" else axis_value(row, axis)

        positions = list(dict.fromkeys(value(r) for r in rows))
        numeric = _numeric(positions)
        if numeric:
            positions.sort()
        where = {v: (v if numeric else i) for i, v in enumerate(positions)}
        for sv in series:
            good_x, good_y, bad_x, bad_y = [], [], [], []
            best_at: dict[Any, float] = {}
            for row in rows:
                if series_of(row) != sv:
                    continue
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
            ax.scatter(good_x, good_y, s=18, color=colors[sv])
            if bad_x:
                ax.scatter(bad_x, bad_y, s=18, marker="x", color="grey")
            if best_at:
                xs = sorted(best_at)
                style = {"linewidth": 1} if numeric else {"linestyle": "none", "marker": "_", "markersize": 20}
                ax.plot(xs, [best_at[x] for x in xs], color=colors[sv], **style)
        if not numeric:
            ax.set_xticks(range(len(positions)))
            ax.set_xticklabels([_shown(v) for v in positions], rotation=20, ha="right", fontsize=8)
        ax.set_xlabel(axis)
        ax.grid(alpha=0.3)
    for line in grid:
        line[0].set_ylabel(objective.metric)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[v], marker="o", linewidth=1,
                      label=f"{SERIES_AXIS} {_shown(v)}" if v is not None else "feasible; line: best")
               for v in series]  # fmt: skip
    handles.append(Line2D([], [], color="grey", marker="x", linestyle="none", label="fails a constraint"))
    title = f"{objective.label} over {len(rows)} runs"
    if constraints:
        title += " (" + ", ".join(c.label for c in constraints) + ")"
    if series != [None]:
        title += f"; one colour per {SERIES_AXIS}, the line its best run at each position"
    fig.suptitle(title)
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 3), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 + 0.03 * cdiv(len(handles), 3), 1, 1))
    import io

    from fpmcore.documents.output_files import write_file

    image = io.BytesIO()
    fig.savefig(image, format=Path(path).suffix.lower().lstrip("."))
    plt.close(fig)
    write_file(path, image.getvalue())  # whole or not at all


__all__ = ["check_path", "plot", "pyplot"]
