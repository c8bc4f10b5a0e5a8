"""``fpm verify --plot OUT.png``: predicted against served, in one figure (matplotlib, imported only here).

Three panels, from the report (:func:`fpmcore.verify.run.verify_campaign`),
the requests and steps of every run pooled:

1. the CDF of TTFT, served and predicted;
2. the CDF of TPOT, served and predicted;
3. every served step's predicted time against its served time, by step kind
   (log-log when they span a decade; the diagonal is a perfect prediction), contended
   steps hollow.

The house style is :mod:`fpmcore.replay.plot`'s (Agg backend, titles on the
left, legends outside the axes).
"""

from __future__ import annotations

import io
from typing import Any

KIND_COLORS = {"prefill": "tab:blue", "decode": "tab:green", "mixed": "tab:purple"}


def _cdf(ax: Any, values: list[float], **kw: Any) -> None:
    v = sorted(values)
    n = len(v)
    if n:
        ax.step(v, [(i + 1) / n for i in range(n)], where="post", **kw)


def render(doc: dict[str, Any], fmt: str) -> bytes:
    """The figure of the report ``doc`` as bytes of image format ``fmt``."""
    from fpmcore.replay.plot import _percent, pyplot

    plt = pyplot()
    fig = plt.figure(figsize=(11, 3.2 * 3 + 0.8))
    axes = fig.subplots(3, 1, gridspec_kw={"hspace": 0.5})
    runs = doc["runs"]
    for ax, metric, label in ((axes[0], "ttft_s", "TTFT"), (axes[1], "tpot_s", "TPOT")):
        served = [t["served"][metric] for r in runs for t in r["request_timings"] if t["served"][metric] is not None]
        pred = [t["predicted"][metric] for r in runs for t in r["request_timings"]
                if t["predicted"][metric] is not None]  # fmt: skip
        _cdf(ax, served, color="black", label="served")
        _cdf(ax, pred, color="tab:orange", linestyle="--", label="predicted")
        ax.set_xlabel(f"{label} (s)")
        ax.set_ylabel("fraction of requests")
        ax.yaxis.set_major_formatter(_percent())
        ax.set_title(f"{label}: served and predicted, {len(served):,} requests of {len(runs)} run(s)", fontsize=9,
                     loc="left")  # fmt: skip
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax = axes[2]
    lo, hi = float("inf"), 0.0
    for kind, color in KIND_COLORS.items():
        for contended in (False, True):
            pts = [(s["wall_s"], s["predicted_s"]) for r in runs for s in r["served_steps"]
                   if s["kind"] == kind and s["contended"] == contended and s["predicted_s"] and s["wall_s"] > 0]  # fmt: skip
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
            ax.scatter(xs, ys, s=8, label=f"{kind}{' (contended)' if contended else ''}",
                       facecolors="none" if contended else color, edgecolors=color, linewidths=0.6)  # fmt: skip
    if hi > 0:
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=0.8, linestyle=":", label="predicted = served")
        if hi > 10 * lo:  # log-log only where the steps span a decade or more
            ax.set_xscale("log")
            ax.set_yscale("log")
    ax.set_xlabel("served step time (s)")
    ax.set_ylabel("predicted step time (s)")
    ax.set_title("every served step against the latency model at its coordinates", fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.suptitle(f"fpm verify {doc['campaign']} · {doc['runtime']} · verdict {doc['verdict']}", fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
