"""The command line of the artifact writer, run as ``python tests/support/make_artifacts.py``: ``example [OUT]``
writes examples/artifacts, ``negatives OUT`` one attempt per negative case, ``cell --plan PLAN --cell ID --out DIR
[--ranks N] [--merged]`` one attempt of a plan's cell (:mod:`tests.support.artifacts` says more)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.support.artifacts.attempts import dsv41_cell, glm_cell
from tests.support.artifacts.example_campaign import PRODUCER_DIR, ROOT, SMOKE_MANIFEST
from tests.support.artifacts.negatives import write_negatives
from tests.support.artifacts.writing import example, write_attempt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write measurement artifacts in the producer's shape for a plan (05 §1-§7), with synthetic timings."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("example", help="write the example runs")
    ex.add_argument("out", nargs="?", default=str(ROOT / "examples" / "artifacts"))
    neg = sub.add_parser("negatives", help="write every negative case (05 §9.3 and fpmcore's own)")
    neg.add_argument("out")
    c = sub.add_parser("cell", help="write one attempt for a cell of a plan")
    c.add_argument("--plan", required=True)
    c.add_argument("--cell", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--ranks", type=int, default=1)
    c.add_argument("--merged", action="store_true")
    for p in (ex, neg, c):
        p.add_argument(
            "--producer-dir",
            default=str(PRODUCER_DIR),
            help="the producer files the GLM producer record is written against (default: %(default)s)",
        )
    args = parser.parse_args(argv)
    if args.cmd == "example":
        example(Path(args.out), args.producer_dir)
        return 0
    if args.cmd == "negatives":
        write_negatives(Path(args.out), args.producer_dir)
        return 0
    plan = json.loads(Path(args.plan).read_text())
    cell = next((x for x in plan.get("cells", []) if x.get("cell_id") == args.cell), None)
    if cell is None:
        print(f"no cell {args.cell} in {args.plan}", file=sys.stderr)
        return 2
    bp = plan.get("options", {}).get("benchmark_points", {})
    manifest = SMOKE_MANIFEST if cell.get("point_set") == "smoke" else bp.get("manifest")
    if manifest is None:
        print("the plan stores no manifest for this cell", file=sys.stderr)
        return 2
    residency = cell.get("execution_identity", {}).get("engram_residency")
    maker = dsv41_cell if residency == "hbm_tp_sharded" else glm_cell
    kwargs = {"merged": args.merged, "producer_dir": args.producer_dir} if maker is glm_cell else {}
    write_attempt(args.out, maker(plan, cell, manifest, ranks=args.ranks, **kwargs), indent=1)
    return 0
