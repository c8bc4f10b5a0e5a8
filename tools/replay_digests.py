"""Digests of ``fpm replay`` outputs over the examples and the Mooncake conversation trace.

Runs ``fpm replay … --json`` and ``fpm replay … --out DIR --out-format jsonl.gz`` on every example
profile × example trace (and a few trace transforms), caching on and off, and on the Mooncake
conversation trace of ``shared/traces`` (its first 3,000 requests with ``--out``, the whole trace
with ``--json``); stores the SHA-256 of each output (``--out`` files decompressed), of stderr and
the exit status.  A change of the trace reading must leave every digest as it was::

    python tools/replay_digests.py out/digests-before.json
    python tools/replay_digests.py out/digests-after.json --compare out/digests-before.json
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FPM = str(Path(sys.executable).parent / "fpm")
#: The shared folder sits beside the checkout (or beside the folder of its worktrees).
MOONCAKE = next(
    (p for p in (d / "shared" / "traces" / "mooncake-conversation.jsonl.gz" for d in ROOT.parents) if p.exists()),
    ROOT.parent / "shared" / "traces" / "mooncake-conversation.jsonl.gz",
)
PLAIN70B = "examples/profiles/plain-llama70b-tp8.fpm-profile.json"
EXCERPT = "examples/traces/public/mooncake-conversation-40.jsonl"
TRANSFORMS = (
    ("--start", "5", "--limit", "20"),
    ("--max-prompt-len", "2000"),
    ("--max-prompt-len", "2000", "--over-long", "clip"),
    ("--time-scale", "2"),
    ("--rate", "3"),
    ("--hash-block-tokens", "256"),
    ("--start", "3", "--max-prompt-len", "9000", "--over-long", "clip", "--rate", "0.5"),
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run(args: list[str], out: bool) -> dict[str, object]:
    """One ``fpm replay``: exit status, stdout and stderr digests, and the ``--out`` files' digests."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [FPM, "replay", *args]
        if out:
            cmd += ["--out", f"{tmp}/out", "--out-format", "jsonl.gz"]
        else:
            cmd += ["--json"]
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False)
        got: dict[str, object] = {
            "status": p.returncode,
            "stdout": _sha(p.stdout.replace(tmp.encode(), b"TMP")),
            "stderr": _sha(p.stderr.replace(tmp.encode(), b"TMP")),
        }
        if out and Path(f"{tmp}/out").is_dir():
            files = {}
            for f in sorted(Path(f"{tmp}/out").iterdir()):
                data = f.read_bytes()
                files[f.name] = _sha(gzip.decompress(data) if f.name.endswith(".gz") else data)
            got["files"] = files
    return got


def cases() -> list[tuple[str, list[str], bool]]:
    """(name, arguments, with --out) of every run."""
    out: list[tuple[str, list[str], bool]] = []
    profiles = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "profiles").glob("*.fpm-profile.json"))
    traces = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "traces").rglob("*.jsonl"))
    for caching in ("on", "off"):
        for prof in profiles:
            for tr in traces:
                for with_out in (False, True):
                    args = [prof, "--trace", tr, "--prefix-caching", caching]
                    out.append((" ".join(args) + (" --out" if with_out else " --json"), args, with_out))
        for extra in TRANSFORMS:
            args = [PLAIN70B, "--trace", EXCERPT, "--prefix-caching", caching, *extra]
            out.append((" ".join(args) + " --json", args, False))
        if MOONCAKE.exists():
            base = [PLAIN70B, "--trace", str(MOONCAKE), "--max-num-seqs", "256", "--max-num-batched-tokens", "8192",
                    "--prefix-caching", caching]  # fmt: skip
            out.append(("mooncake-conversation whole --json " + caching, base, False))
            out.append(("mooncake-conversation --limit 3000 --out " + caching, [*base, "--limit", "3000"], True))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output", type=Path, help="where the digests are written (JSON)")
    ap.add_argument("--compare", type=Path, help="digests of an earlier run: report every difference")
    a = ap.parse_args()
    digests = {}
    for name, args, with_out in cases():
        digests[name] = run(args, with_out)
        print(f"{digests[name]['status']} {name}", flush=True)
    a.output.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    if a.compare is None:
        return 0
    before = json.loads(a.compare.read_text())
    differ = sorted(k for k in before.keys() | digests.keys() if before.get(k) != digests.get(k))
    for k in differ:
        print(f"DIFFERS: {k}\n  before {before.get(k)}\n  after  {digests.get(k)}")
    print(f"{len(digests)} runs, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
