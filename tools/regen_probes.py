#!/usr/bin/env python3
"""Regenerate the embedded dry-probe examples of ``examples/probes/`` with the real vLLM.

Every example is the evidence folder that ``fpm probe --dry-run`` writes for
one MODEL.json of ``tools/probe_models/``.  Needs vLLM 0.33.0 (CPU build is
enough) and the ``vllm_033`` and ``vllm_027`` plugins installed::

    python tools/regen_probes.py            # rewrite examples/probes/<name>/
    python tools/regen_probes.py --check    # exit 1 if any byte differs
    python tools/regen_probes.py --only glm53flash-tp4 --out /tmp/x

The ``vllm-0.27.0-plain`` example is written by the ``vllm_027`` plugin's
record writer from vLLM 0.33.0's planning of a plain model (vLLM 0.27.0 is
not installed here); its README says so.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tools" / "probe_models"
EXAMPLES = ROOT / "examples" / "probes"


class Example(NamedTuple):
    """One embedded example: its MODEL.json, TP size, prefix caching and record writer."""

    model: str
    tp: int
    caching: bool
    writer: str = "vllm_033"


#: The example set (examples/probes/README.md).
EXAMPLE_SET: dict[str, Example] = {
    "glm53flash-tp4": Example("glm53flash_tp4.json", 4, True),
    "glm53flash-tp4-no-checkpoint": Example("glm53flash_tp4_triton.json", 4, True),
    "plain-dense-tp4": Example("plain_dense_62.json", 4, True),
    "sliding-window": Example("sliding_full.json", 1, True),
    "gdn-hybrid-tp4": Example("gdn_hybrid.json", 4, True),
    "vllm-0.27.0-plain": Example("plain_llama8b.json", 1, True, writer="vllm_027"),
}


def _writer(name: str) -> tuple[Callable[..., dict[str, Any]] | None, str | None]:
    """The record writer and the version the launch pins."""
    if name == "vllm_033":
        return None, None
    from fpmcore_vllm027.observe import FRAMEWORK_VERSION, build_record

    def write(source: dict[str, Any], *, phase: str, rank: int) -> dict[str, Any]:
        return build_record({**source, "runtime_version": FRAMEWORK_VERSION}, phase=phase, rank=rank)

    return write, FRAMEWORK_VERSION


def generate(name: str, out_dir: Path) -> dict[str, Any]:
    """Write example ``name`` into the empty folder ``out_dir``; return the planning summary."""
    from fpmcore_vllm033 import probe

    ex = EXAMPLE_SET[name]
    observer, version = _writer(ex.writer)
    return probe.dry_probe(
        MODELS / ex.model,
        out_dir,
        tp=ex.tp,
        caching=ex.caching,
        configuration=name,
        observer=observer,
        framework_version=version,
    )


def differences(a: Path, b: Path) -> list[str]:
    """Relative paths whose bytes differ between two folders (or exist in one only)."""
    files_a = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()} if a.exists() else set()
    files_b = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    out = sorted(files_a ^ files_b)
    out += sorted(f for f in files_a & files_b if not filecmp.cmp(a / f, b / f, shallow=False))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed examples; exit 1 on any difference")
    parser.add_argument("--only", action="append", choices=sorted(EXAMPLE_SET), help="one example (repeatable)")
    parser.add_argument("--out", type=Path, default=EXAMPLES, help="examples folder (default examples/probes)")
    args = parser.parse_args(argv)
    names = args.only or list(EXAMPLE_SET)
    failed = False
    with tempfile.TemporaryDirectory(prefix="fpm-regen-") as tmp:
        for name in names:
            fresh = Path(tmp, name)
            generate(name, fresh)
            target = args.out / name
            diff = differences(target, fresh)
            if args.check:
                if diff:
                    failed = True
                    print(f"{name}: differs from a fresh run: {', '.join(diff[:5])}", file=sys.stderr)
                else:
                    print(f"{name}: identical")
                continue
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(fresh, target)
            print(f"{name}: {'rewritten' if diff else 'unchanged'} ({target})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
