"""``fpm trace stats --plot``: the arrival rate over time and the prompt and output length distributions."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from fpmcore.replay.plot import pyplot
from fpmcore.replay.trace import TraceRequest


def draw_stats(requests: Sequence[TraceRequest], stats: dict[str, Any], title: str, fmt: str) -> bytes:
    """The figure as bytes of ``fmt``: arrival rate (when timed), then the two length histograms."""
    plt = pyplot()
    fig = plt.figure(figsize=(11, 7.5))
    rate_ax, prompt_ax, output_ax = fig.subplots(3, 1, gridspec_kw={"hspace": 0.55})
    over_time = stats.get("rate_over_time")
    if over_time is not None:
        width = over_time["bin_s"]
        rate_ax.bar([i * width for i in range(len(over_time["per_s"]))], over_time["per_s"], width=width,
                    align="edge", alpha=0.75)  # fmt: skip
        rate_ax.set_xlabel("seconds from the first arrival")
        rate_ax.set_ylabel("arrivals per s")
    else:
        rate_ax.text(0.5, 0.5, "no arrival times (a step-exact trace, or a single instant)", ha="center",
                     transform=rate_ax.transAxes)  # fmt: skip
    for ax, key in ((prompt_ax, "prompt_len"), (output_ax, "output_len")):
        ax.hist([getattr(r, key) for r in requests], bins=50, alpha=0.75)
        q = stats[key]
        for label in ("p50", "p90", "p99"):
            ax.axvline(q[label], color="black", linestyle="--", linewidth=0.8)
        ax.set_xlabel(f"{key} (tokens; dashed: p50, p90, p99)")
        ax.set_ylabel("requests")
    reuse = stats.get("prefix_reuse")
    if reuse is not None:
        title += f" · prefix reuse {reuse['fraction']:.1%} at {reuse['block_tokens']} tokens per block"
    fig.suptitle(title, fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
