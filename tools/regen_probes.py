#!/usr/bin/env python3
"""Regenerate the embedded dry-probe examples of ``examples/probes/`` with the real vLLM.

Every example is the evidence folder that ``fpm probe --dry-run`` writes for
one MODEL.json of ``tools/probe_models/``.  Each example is planned by the
real vLLM release its records name, on CPU:

* the vLLM 0.33.0 examples in this interpreter, which needs vLLM 0.33.0 and
  the ``vllm_033`` plugin (``tox -e vllm033-real``);
* ``vllm-0.27.0-plain`` by the ``vllm_027`` plugin's dry probe
  (``fpmcore_vllm027.plugin.dry_probe``) in an interpreter with vLLM
  0.27.0 and the ``vllm_027`` plugin: ``--vllm027-python`` (default
  ``$FPM_VLLM027_PYTHON``, else ``~/.cache/fpm-vllm027/venv/bin/python``,
  built as tox.ini's ``vllm027-real`` env installs it); this interpreter
  when it runs vLLM 0.27.0 itself.

::

    python tools/regen_probes.py            # rewrite examples/probes/<name>/
    python tools/regen_probes.py --check    # exit 1 if any byte differs
    python tools/regen_probes.py --only glm53flash-tp4 --out /tmp/x
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tools" / "probe_models"
EXAMPLES = ROOT / "examples" / "probes"


class Example(NamedTuple):
    """One embedded example: its MODEL.json, TP size, prefix caching and the runtime plugin that plans it."""

    model: str
    tp: int
    caching: bool
    runtime: str = "vllm_033"


#: The example set (examples/probes/README.md).
EXAMPLE_SET: dict[str, Example] = {
    "glm53flash-tp4": Example("glm53flash_tp4.json", 4, True),
    "glm53flash-tp4-no-checkpoint": Example("glm53flash_tp4_triton.json", 4, True),
    "plain-dense-tp4": Example("plain_dense_62.json", 4, True),
    "sliding-window": Example("sliding_full.json", 1, True),
    "gdn-hybrid-tp4": Example("gdn_hybrid.json", 4, True),
    "vllm-0.27.0-plain": Example("plain_llama8b.json", 1, True, runtime="vllm_027"),
}


#: The interpreter with vLLM 0.27.0 (tox.ini ``vllm027-real``).
DEFAULT_VLLM027_PYTHON = Path.home() / ".cache" / "fpm-vllm027" / "venv" / "bin" / "python"

#: Runs the vllm_027 dry probe in the vLLM 0.27.0 interpreter: argv model, out, tp, caching, configuration.
_VLLM027_SNIPPET = """
import json, sys
from fpmcore_vllm027 import plugin
model, out, tp, caching, configuration = sys.argv[1:]
summary = plugin.dry_probe(model, out, tp=int(tp), caching=caching == "on", configuration=configuration)
print(json.dumps(summary))
"""


def _installed_vllm() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


#: The runtime plugin that plans the examples of each installed vLLM version.
RUNTIME_OF_VERSION = {"0.33.0": "vllm_033", "0.27.0": "vllm_027"}


def planned_here() -> list[str]:
    """The examples this interpreter's installed vLLM plans itself (each real env checks its own)."""
    runtime = RUNTIME_OF_VERSION.get(_installed_vllm() or "")
    return [name for name, ex in EXAMPLE_SET.items() if ex.runtime == runtime]


def generate(name: str, out_dir: Path, *, vllm027_python: Path = DEFAULT_VLLM027_PYTHON) -> dict[str, Any]:
    """Write example ``name`` into the empty folder ``out_dir``; return the planning summary."""
    ex = EXAMPLE_SET[name]
    if ex.runtime == "vllm_033":
        from fpmcore_vllm033 import plugin

        return plugin.dry_probe(MODELS / ex.model, out_dir, tp=ex.tp, caching=ex.caching, configuration=name)
    if _installed_vllm() == "0.27.0":
        from fpmcore_vllm027 import plugin

        return plugin.dry_probe(MODELS / ex.model, out_dir, tp=ex.tp, caching=ex.caching, configuration=name)
    if not Path(vllm027_python).exists():
        raise SystemExit(f"{name}: needs an interpreter with vLLM 0.27.0; {vllm027_python} does not exist "
                         "(build it as tox.ini [testenv:vllm027-real] does, or pass --vllm027-python)")  # fmt: skip
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}
    args = [str(MODELS / ex.model), str(out_dir), str(ex.tp), "on" if ex.caching else "off", name]
    done = subprocess.run(
        [str(vllm027_python), "-c", _VLLM027_SNIPPET, *args], check=False, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{name}: the vLLM 0.27.0 dry probe failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def differences(a: Path, b: Path) -> list[str]:
    """Relative paths whose bytes differ between two folders (or exist in one only)."""
    files_a = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()} if a.exists() else set()
    files_b = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    out = sorted(files_a ^ files_b)
    out += sorted(f for f in files_a & files_b if not filecmp.cmp(a / f, b / f, shallow=False))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed examples; exit 1 on any difference"
    )
    parser.add_argument("--only", action="append", choices=sorted(EXAMPLE_SET), help="one example (repeatable)")
    parser.add_argument("--out", type=Path, default=EXAMPLES, help="examples folder (default examples/probes)")
    parser.add_argument("--vllm027-python", type=Path,
                        default=Path(os.environ.get("FPM_VLLM027_PYTHON") or DEFAULT_VLLM027_PYTHON),
                        help="interpreter with vLLM 0.27.0 and the vllm_027 plugin (for vllm-0.27.0-plain)")  # fmt: skip
    args = parser.parse_args(argv)
    names = args.only or list(EXAMPLE_SET)
    failed = False
    with tempfile.TemporaryDirectory(prefix="fpm-regen-") as tmp:
        for name in names:
            fresh = Path(tmp, name)
            generate(name, fresh, vllm027_python=args.vllm027_python)
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
