"""``fpm replay --plot OUT.png``: what the replay did, step by step, in one figure (matplotlib).

The figure has a title (the profile's model, the trace, the settings) and
these panels, all from data collected while the records stream
(:class:`PlotData`; memory bounded by :data:`MAX_BUCKETS`, never by the steps):

1. pool use as a fraction of the capacity, per cache group (stacked: the
   blocks the running requests hold at the end of each step, in block mode),
   with the peak of the step (``used_*_scheduled``) as a line;
2. running requests (left axis) and waiting requests (right axis), with
   preemptions marked;
3. with a latency table only: TTFT and TPOT percentiles (p50, p90, p99) of the
   requests finished in each interval of replayed time (its length in the
   panel's title; p99 drawn as markers, which stay visible where it equals
   p90), on a log axis labelled at 1, 2 and 5 of each decade.

All panels share one x axis: replayed time when the latency panel is drawn
(it is per time), else steps; request counts have integer ticks.

Steps are downsampled while streaming: consecutive steps share a bucket of
``width`` steps (doubled whenever the buckets exceed :data:`MAX_BUCKETS`), and
a bucket keeps the maximum of each series and the count of preemptions, so a
peak or a preemption is never lost.  The image format follows the file's
extension (any format matplotlib writes); :func:`check_plot_path` refuses
anything else before the replay starts.
"""

from __future__ import annotations

import io
import math
from array import array
from pathlib import Path
from typing import Any

from fpmcore.documents.errors import FpmError

#: Buckets kept at most: a figure of 10⁶ steps draws at most this many points per series.
MAX_BUCKETS = 4000
#: Intervals of replayed time of the latency panel.
LATENCY_BINS = 60


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, imported only for ``--plot``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FpmError(
            "R-35", "--plot needs matplotlib, which is not installed; install the package: pip install matplotlib"
        ) from None
    return plt


def image_formats() -> dict[str, str]:
    """The image formats matplotlib writes: extension -> description."""
    pyplot()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return dict(FigureCanvasAgg.get_supported_filetypes())


def check_plot_path(path: str) -> str:
    """The image format of ``--plot path`` (its extension), or a one-line refusal (rule ``R-35``)."""
    ext = Path(path).suffix.lower().lstrip(".")
    formats = image_formats()
    if ext not in formats:
        what = f"'.{ext}' is not an image format matplotlib writes" if ext else "the file name has no image extension"
        raise FpmError("R-35", f"--plot: {what}; use one of {', '.join('.' + e for e in sorted(formats))}", path)
    return ext


def _percent() -> Any:
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0)


class PlotData:
    """The series of the figure, collected chunk by chunk (:meth:`add`); bounded memory."""

    def __init__(self, groups: list[str], capacity: int, block_mode: bool, max_buckets: int = MAX_BUCKETS) -> None:
        self.groups = groups
        self.capacity = capacity
        self.block_mode = block_mode
        self.max_buckets = max_buckets
        self.width = 1
        self.steps = 0
        self.running: list[int] = []
        self.waiting: list[int] = []
        self.preempted: list[int] = []
        self.peak_use: list[float] = []
        #: the replayed time at the start of each bucket's first step (inf until a step with a time is seen)
        self.start_time: list[float] = []
        self.group_use: list[list[float]] = [[] for _ in groups]
        #: finish time, TTFT, TPOT (NaN without) of each finished request
        self.finish = array("d")
        self.ttft = array("d")
        self.tpot = array("d")

    def _bucket(self, step: int) -> int:
        b = step // self.width
        while b >= len(self.running):
            self.running.append(0)
            self.waiting.append(0)
            self.preempted.append(0)
            self.peak_use.append(0.0)
            self.start_time.append(math.inf)
            for g in self.group_use:
                g.append(0.0)
        return b

    def _halve(self) -> None:
        def pairs(xs: list[Any], f: Any) -> list[Any]:
            return [f(xs[i : i + 2]) for i in range(0, len(xs), 2)]

        self.width *= 2
        self.running, self.waiting = pairs(self.running, max), pairs(self.waiting, max)
        self.preempted = pairs(self.preempted, sum)
        self.peak_use = pairs(self.peak_use, max)
        self.start_time = pairs(self.start_time, min)
        self.group_use = [pairs(g, max) for g in self.group_use]

    def add(self, steps: list[dict[str, Any]], requests: list[dict[str, Any]]) -> None:
        """Take the records of one chunk."""
        cap = self.capacity
        ngroups = len(self.groups)
        for s in steps:
            b = self._bucket(s["step"])
            t = s.get("t_start")
            if t is not None and t < self.start_time[b]:
                self.start_time[b] = t
            if s["running"] > self.running[b]:
                self.running[b] = s["running"]
            if s["waiting"] > self.waiting[b]:
                self.waiting[b] = s["waiting"]
            if s["preempted"]:
                self.preempted[b] += len(s["preempted"])
            peak = (s["used_blocks_scheduled"] if self.block_mode else s["used_bytes_scheduled"]) / cap
            if peak > self.peak_use[b]:
                self.peak_use[b] = peak
            held = s["held_blocks_end"]
            if held:
                for g, total in zip(range(ngroups), map(sum, zip(*held.values()))):
                    u = total / cap
                    if u > self.group_use[g][b]:
                        self.group_use[g][b] = u
            elif not self.block_mode and ngroups == 1:
                u = s["used_bytes_end"] / cap
                if u > self.group_use[0][b]:
                    self.group_use[0][b] = u
            if len(self.running) > self.max_buckets:
                self._halve()
        if steps:
            self.steps = steps[-1]["step"] + 1
        for r in requests:
            if r["status"] == "finished":
                self.finish.append(r["finish_time"])
                self.ttft.append(r["ttft_s"])
                self.tpot.append(math.nan if r["tpot_s"] is None else r["tpot_s"])

    def render(self, title: str, fmt: str, latency: bool) -> bytes:
        """The figure as bytes of ``fmt`` (``latency``: draw the TTFT/TPOT panel)."""
        plt = pyplot()
        panels = 3 if latency else 2
        fig = plt.figure(figsize=(11, 3.2 * panels + 0.8))
        axes = fig.subplots(panels, 1, gridspec_kw={"hspace": 0.45})
        # one x axis for every panel: replayed time where the latency panel is drawn (it is per time), else steps
        timed = latency and all(math.isfinite(t) for t in self.start_time)
        x: list[Any] = list(self.start_time) if timed else [b * self.width for b in range(len(self.running))]
        self.x_label = self._time_label() if timed else self._step_label()
        self._pool_panel(axes[0], x)
        self._request_panel(axes[1], x)
        if latency:
            self._latency_panel(axes[2])
            if timed:
                axes[2].set_xlim(axes[0].get_xlim())
        if not timed:  # steps are counted whole
            from matplotlib.ticker import MaxNLocator

            for ax in axes:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.suptitle(title, fontsize=10)
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=110, bbox_inches="tight")
        plt.close(fig)
        return buf.getvalue()

    def _step_label(self) -> str:
        return "step" if self.width == 1 else f"step (maximum over {self.width:,} steps per point)"

    def _time_label(self) -> str:
        per = "" if self.width == 1 else f"; maximum over {self.width:,} steps per point"
        return f"replayed time (s) — {self.steps:,} steps{per}"

    def _pool_panel(self, ax: Any, x: list[int]) -> None:
        unit = "blocks" if self.block_mode else "bytes"
        if self.block_mode or len(self.groups) == 1:
            ax.stackplot(x, *self.group_use, labels=[f"{g}, held at step end" for g in self.groups], alpha=0.75,
                         step="post")  # fmt: skip
        ax.plot(x, self.peak_use, color="black", linewidth=0.8, drawstyle="steps-post",
                label="all groups, peak in the step")  # fmt: skip
        peak = max(self.peak_use, default=0.0)
        top = min(1.05, max(peak * 1.25, 0.01))
        if top >= 1.0:
            ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8, label="capacity")
        ax.set_ylim(0, top)
        ax.yaxis.set_major_formatter(_percent())
        ax.set_ylabel("pool use / capacity")
        ax.set_title(f"KV pool use as a fraction of its capacity ({self.capacity:,} {unit}); peak {peak:.1%}",
                     fontsize=9, loc="left")  # fmt: skip
        ax.set_xlabel(self.x_label)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)

    def _request_panel(self, ax: Any, x: list[int]) -> None:
        ax.plot(x, self.running, color="tab:blue", drawstyle="steps-post", label="running")
        from matplotlib.ticker import MaxNLocator

        ax.set_ylabel("running requests", color="tab:blue")
        ax.set_xlabel(self.x_label)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax2 = ax.twinx()
        ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.plot(x, self.waiting, color="tab:orange", drawstyle="steps-post", label="waiting")
        ax2.set_ylabel("waiting requests", color="tab:orange")
        for counts in (ax, ax2):  # a count that never leaves 0 still spans 0 and 1: whole ticks need two integers
            low, high = counts.get_ylim()
            counts.set_ylim(min(low, -0.05), max(high, 1.05))
        pre = [(xi, r) for xi, r, p in zip(x, self.running, self.preempted) if p]
        total = sum(self.preempted)
        if pre:
            ax.scatter([p[0] for p in pre], [p[1] for p in pre], marker="v", color="tab:red", s=14, zorder=3,
                       label=f"preemption ({total:,} in all)")  # fmt: skip
        ax.set_title(f"running and waiting requests; {total:,} preemptions", fontsize=9, loc="left")
        lines = ax.get_legend_handles_labels()
        lines2 = ax2.get_legend_handles_labels()
        ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="upper left", bbox_to_anchor=(1.08, 1.0),
                  borderaxespad=0)  # fmt: skip

    def _latency_panel(self, ax: Any) -> None:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xlabel(self.x_label)
        ax.set_ylabel("seconds")
        n = len(self.finish)
        if not n:
            ax.text(0.5, 0.5, "no request finished", ha="center", transform=ax.transAxes)
            return
        lo, hi = min(self.finish), max(self.finish)
        bins = min(LATENCY_BINS, max(1, n // 5))
        width = (hi - lo) / bins or 1.0
        ax.set_title(f"TTFT and TPOT percentiles of the requests finished in each {width:.3g} s of replayed time "
                     f"({bins} intervals; p99 as markers, on the p90 line where they agree)", fontsize=9, loc="left")  # fmt: skip
        groups: list[list[int]] = [[] for _ in range(bins)]
        for i, t in enumerate(self.finish):
            groups[min(int((t - lo) / width), bins - 1)].append(i)
        centers = [lo + (k + 0.5) * width for k in range(bins)]
        for name, values, color in (("TTFT", self.ttft, "tab:purple"), ("TPOT", self.tpot, "tab:green")):
            for q, style, marker in ((0.5, "-", "." if bins < 20 else None), (0.9, "--", None), (0.99, "none", "v")):
                ys = []
                for idx in groups:
                    v = sorted(x for x in (values[i] for i in idx) if not math.isnan(x))
                    ys.append(v[max(math.ceil(q * len(v)) - 1, 0)] if v else math.nan)
                ax.plot(centers, ys, linestyle=style, color=color, marker=marker, markersize=4 if q > 0.9 else 6,
                        zorder=3 if q > 0.9 else 2, label=f"{name} p{round(q * 100)}")  # fmt: skip
        ax.set_yscale("log")
        # labelled ticks at 1, 2 and 5 of every decade: a log axis read without counting gridlines
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
