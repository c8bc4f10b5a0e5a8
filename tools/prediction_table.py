#!/usr/bin/env python3
"""The error table of ``tools/predict_vs_engine.py`` results, as Markdown (the README's table)::

    python tools/prediction_table.py RESULT.json [RESULT.json ...]

One line per result file (a model at a load): the medians over runs of the
per-request relative errors' median and P90 for TTFT, TPOT and E2E, the signed
errors of makespan and throughput, each with its spread over runs
(min…max), the engine's own noise floor (``--noise-floor``: the same trace
served twice) and the load averages during the runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def pct(s: dict, signed: bool = False) -> str:
    f = "{:+.0%}" if signed else "{:.0%}"
    return f"{f.format(s['median'])} ({f.format(s['min'])}…{f.format(s['max'])})".replace("%", " %")


def line(doc: dict) -> str:
    s = doc["summary"]
    cells = [Path(doc["campaign"]).name, doc["label"], f"{doc['rate']:g}/s × {doc['requests']}"]
    for m in ("ttft_s", "tpot_s", "e2e_s"):
        cells += [pct(s[f"{m}_median"]), pct(s[f"{m}_p90"])]
    cells += [pct(s["makespan_s"], True), pct(s["output_tokens_per_s"], True)]
    if "noise_floor_ttft_s_median" in s:
        cells.append(
            " / ".join(
                f"{s[f'noise_floor_{m}_median']['median']:.0%}".replace("%", " %")
                for m in ("ttft_s", "tpot_s", "e2e_s")
            )
            + f" / {s['noise_floor_makespan_s']['median']:+.0%}".replace("%", " %")
        )
    else:
        cells.append("–")
    loads = [r["uptime"][0] for r in doc["runs"] if "uptime" in r]
    cells.append(f"{min(loads):.1f}…{max(loads):.1f}" if loads else "–")
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| model | load | arrivals | TTFT median | TTFT P90 | TPOT median | TPOT P90 | E2E median | E2E P90 | "
    "makespan | throughput | noise floor (TTFT / TPOT / E2E medians, makespan) | load average (1 min) |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str]) -> int:
    print(HEADER)
    for path in argv:
        print(line(json.loads(Path(path).read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
