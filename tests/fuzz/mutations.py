"""Mutations of JSON documents and evidence folders for the fuzzing campaign (``tests/fuzz/README.md``).

A mutation is drawn with Hypothesis (``data.draw``), so a failing example
shrinks and replays from the campaign's seed.  Documents are written by
:func:`encode`, which can also write what :mod:`json` cannot: duplicate keys
(:class:`Pairs`), raw number tokens (:class:`Raw`: ``NaN``, ``1e999``, an
integer of 5,000 digits) and lone surrogates.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st


class Raw(str):
    """A token written as is (``NaN``, ``1e999``, ``1`` followed by 5,000 zeros)."""


class Pairs(list):
    """An object written from ``(key, value)`` pairs, so a key may repeat."""


def encode(value: Any) -> str:
    """JSON text of ``value``; :class:`Raw` and :class:`Pairs` as they are."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Pairs):
        return "{" + ", ".join(f"{json.dumps(k)}: {encode(v)}" for k, v in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(encode(v) for v in value) + "]"
    return json.dumps(value)


#: Values a mutation puts in place of another: other types, edges of every range, names that are paths.
VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2, 16, 2**31, 2**32 - 1, 2**32, 2**53, 2**53 + 1, 2**63, 2**64, 10**20,
    10**308, 10**309, -(10**309), 0.0, -0.0, 0.5, 1.5, 1e308, -1e308, 1e-320, 2176.0,
    "", " ", "x", "0", "false", "\ud800", "\udc00x", "[/bold]", "[red]x", "../../escaped/pwn", "/tmp/fpm-fuzz-abs",
    "a\nb", "a\x00b", "ü" * 3, "x" * 300, [], [0], [None], {}, {"a": 1},
    Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e999"), Raw("-1e999"), Raw("1" + "0" * 4400),
    Raw("1" + "0" * 400 + ".5"),
]  # fmt: skip


#: The structural operations, weighted: mostly values near the old ones, then other types and edges.
OPS = ["nudge"] * 6 + ["replace"] * 5 + ["delete", "add", "duplicate", "wrap"]
#: Strings of the vocabularies the inputs use (labels, kinds, classes, modes).
WORDS = ["fp8", "bfloat16", "half", "int8", "attention", "state", "convolution", "grouped", "linear", "align", "none",
         "all", "prefill", "decode", "worker", "scheduler", "vllm", "0.33.0", "0.27.0", "0.33.1", "cpu", "gb300",
         "vllm.v1.kv_cache_interface.FullAttentionSpec", "vllm.v1.kv_cache_interface.SlidingWindowSpec",
         "vllm.v1.kv_cache_interface.MambaSpec", "BLHNC", "LBHNC", "torch.bfloat16", "auto"]  # fmt: skip


def _nudges(value: Any) -> list[Any]:
    """Values of the same JSON type as ``value``, near it."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1, value * 2, value // 2, 0, 1, -value, value * 1024]
    if isinstance(value, float):
        return [value * 2, value / 2, value + 1, 0.0, 1.0, -value]
    if isinstance(value, str):
        return [*WORDS, value + "x", value.upper(), value[:-1]]
    if isinstance(value, list):
        return [value[:-1], value + value[-1:], list(reversed(value)), []] if value else [[0], [None]]
    if isinstance(value, dict):
        return [dict(list(value.items())[:-1]), {}]
    return [0, "", False]


def paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path into ``value`` (keys and indexes), containers included, in document order."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*prefix, i))


def _parent(doc: Any, path: tuple) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


def mutate_document(data: st.DataObject, doc: Any, *, nested: Callable[[Any], Any] | None = None) -> Any:
    """One structural mutation of ``doc`` (a copy): a value replaced, a key removed, added or repeated."""
    doc = copy.deepcopy(doc)
    all_paths = [p for p in paths(doc) if p]
    if not all_paths:
        return data.draw(st.sampled_from(VALUES))
    path = data.draw(st.sampled_from(all_paths), label="path")
    parent = _parent(doc, path)
    key = path[-1]
    op = data.draw(st.sampled_from(OPS), label="op")
    if op == "nudge":  # a value of the same type, near the old one: reaches the rules past the types
        parent[key] = data.draw(st.sampled_from(_nudges(parent[key])), label="value")
    elif op == "replace":
        parent[key] = data.draw(st.sampled_from(VALUES), label="value")
    elif op == "delete":
        del parent[key]
    elif op == "add" and isinstance(parent, dict):
        parent[data.draw(st.sampled_from(["extra", "", "\ud800", "a\nb", key if isinstance(key, str) else "k"]))] = (
            data.draw(st.sampled_from(VALUES)))  # fmt: skip
    elif op == "add":
        parent.insert(key, data.draw(st.sampled_from(VALUES)))
    elif op == "duplicate" and isinstance(parent, dict):
        pairs = Pairs(parent.items())
        pairs.append((key, data.draw(st.sampled_from([parent[key], *VALUES[:8]]))))
        if len(path) == 1:
            return pairs
        _parent(doc, path[:-1])[path[-2]] = pairs
    elif op == "wrap":
        parent[key] = [parent[key]]
    return doc


def mutate_bytes(data: st.DataObject, raw: bytes) -> bytes:
    """Sometimes a byte-level fault on top: truncation, a BOM, a byte that is not UTF-8, deep nesting."""
    op = data.draw(st.sampled_from(["none"] * 25 + ["truncate", "bom", "bad-byte", "deep", "empty"]), label="bytes")
    if op == "truncate" and raw:
        return raw[: data.draw(st.integers(0, len(raw) - 1))]
    if op == "bom":
        return b"\xef\xbb\xbf" + raw
    if op == "bad-byte" and raw:
        i = data.draw(st.integers(0, len(raw) - 1))
        return raw[:i] + b"\xff" + raw[i + 1 :]
    if op == "deep":
        n = data.draw(st.sampled_from([257, 1000, 100_000]))
        return b"[" * n + b"]" * n
    if op == "empty":
        return b""
    return raw


# --------------------------------------------------------------------------
# evidence folders
# --------------------------------------------------------------------------


def evidence_files(folder: Path) -> dict[str, list[str]]:
    """The files of an evidence folder by role: ``index``, ``manifest``, ``worker``, ``scheduler``, ``staged``."""
    index = json.loads((folder / "observations.json").read_bytes())
    out: dict[str, list[str]] = {"index": ["observations.json"], "manifest": [], "worker": [], "scheduler": [],
                                 "staged": []}  # fmt: skip
    for conf in index["configurations"].values():
        out["staged"].append(conf["launch"]["model_config"]["path"])
        for attempt in conf["attempts"]:
            for phase in attempt["phases"].values():
                out["manifest"].append(phase["launch_manifest"]["path"])
                for art in phase["artifacts"]:
                    if art["kind"] == "observation":
                        out["worker" if "worker" in art["path"] else "scheduler"].append(art["path"])
    return out


def repin(folder: Path) -> None:
    """Pin every file the index names by its current SHA-256 (where the index can still be read)."""
    if not (folder / "observations.json").is_file() or (folder / "observations.json").is_symlink():
        return  # a FIFO in its place would block the read
    try:
        index = json.loads((folder / "observations.json").read_bytes())
        for conf in index["configurations"].values():
            for attempt in conf["attempts"]:
                for phase in attempt["phases"].values():
                    for ref in [phase["launch_manifest"], *phase["artifacts"]]:
                        p = folder / ref["path"]
                        if p.is_file() and not p.is_symlink():
                            ref["sha256"] = hashlib.sha256(p.read_bytes()).hexdigest()
    except (ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError):
        return
    (folder / "observations.json").write_text(json.dumps(index, indent=1) + "\n")


def mutate_evidence(data: st.DataObject, folder: Path) -> None:
    """Mutate an evidence folder in place: a file's document, the same change in every file of a role,
    the launch everywhere, or the file itself (gone, a folder, a FIFO, a symlink); hashes re-pinned mostly."""
    roles = evidence_files(folder)
    what = data.draw(
        st.sampled_from(["one", "one", "role", "role", "role", "role", "launch", "launch", "label", "file"]),
        label="evidence op",
    )
    if what == "file":
        rel = data.draw(st.sampled_from([r for files in roles.values() for r in files]))
        target = folder / rel
        kind = data.draw(st.sampled_from(["delete", "dir", "fifo", "symlink"]))
        target.unlink()
        if kind == "dir":
            target.mkdir()
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "symlink":
            os.symlink(folder / "observations.json", target)
    elif what == "label":
        index = json.loads((folder / "observations.json").read_bytes())
        (label, conf) = next(iter(index["configurations"].items()))
        new = data.draw(st.sampled_from(["../../escaped/pwn", "/tmp/fpm-fuzz-abs/pwn", "..", "", "a\x00b", "sub/x",
                                         "[/bold]", "other"]))  # fmt: skip
        index["configurations"] = {label: conf, new: copy.deepcopy(conf)} if data.draw(st.booleans()) else {new: conf}
        (folder / "observations.json").write_text(json.dumps(index, indent=1))
    elif what == "launch":  # one change, made consistently in the index, the manifests and the records
        index = json.loads((folder / "observations.json").read_bytes())
        (conf,) = list(index["configurations"].values())[:1]
        new_launch = mutate_document(data, conf["launch"])
        conf["launch"] = new_launch
        (folder / "observations.json").write_text(encode(index))
        for rel in roles["manifest"] + roles["worker"] + roles["scheduler"]:
            doc = json.loads((folder / rel).read_bytes())
            doc["launch"] = new_launch
            (folder / rel).write_text(encode(doc))
    else:
        role = data.draw(
            st.sampled_from(["worker"] * 3 + ["scheduler"] * 2 + ["manifest", "index", "staged"]), label="role"
        )
        files = roles[role] if what == "role" else [data.draw(st.sampled_from(roles[role]))]
        base = json.loads((folder / files[0]).read_bytes())
        mutated = mutate_document(data, base)
        raw = mutate_bytes(data, encode(mutated).encode("utf-8", "surrogatepass"))
        for rel in files:
            if what == "role" and rel != files[0]:  # the same path changed in every file of the role
                doc = json.loads((folder / rel).read_bytes())
                raw = encode(_same_change(base, mutated, doc)).encode("utf-8", "surrogatepass")
            (folder / rel).write_bytes(raw)
    if data.draw(st.integers(0, 19), label="repin") < 19:
        repin(folder)


def _same_change(base: Any, mutated: Any, other: Any) -> Any:
    """``other`` with the top-level keys that differ between ``base`` and ``mutated`` taken from ``mutated``."""
    if not (isinstance(base, dict) and isinstance(mutated, dict) and isinstance(other, dict)):
        return mutated
    out = dict(other)
    for k in set(base) | set(mutated):
        if k not in mutated:
            out.pop(k, None)
        elif k not in base or encode(base[k]) != encode(mutated[k]):
            out[k] = (
                _same_change(base.get(k), mutated[k], other.get(k)) if isinstance(base.get(k), dict) else mutated[k]
            )
    return out


def repin_plan(raw: bytes, run: Path) -> bytes:
    """A mutated plan with its hash made the digest of its new content, and the run's collector provenance
    recording that hash, so that the rules past the plan's digest are reached; ``raw`` as it is when it is not
    a plan whose hash fpmcore can compute."""
    from fpmcore.documents.jsonio import JsonError, loads
    from fpmcore.validate.reader import plan_content_digest

    try:
        doc = loads(raw)
    except JsonError:
        return raw
    if not isinstance(doc, dict) or not all(isinstance(k, str) for k in doc):
        return raw
    digest = plan_content_digest(doc)
    if digest is None:
        return raw
    doc["sha256" if "sha256" in doc else "plan_sha256"] = digest
    for prov in sorted(run.rglob("provenance*.json")):
        try:
            record = json.loads(prov.read_bytes())
        except (ValueError, OSError):
            continue
        if isinstance(record, dict) and isinstance(record.get("plan_sha256"), str):
            record["plan_sha256"] = digest
            prov.write_text(json.dumps(record, indent=2), encoding="utf-8")
    return json.dumps(doc).encode("utf-8")


def snapshot(root: Path, skip: Path | None = None) -> dict[str, tuple[int, int]]:
    """``{relative path: (mode, size)}`` of everything below ``root`` but ``skip``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if skip is not None and (p == skip or skip in p.parents):
                continue
            st_ = p.lstat()
            out[str(p.relative_to(root))] = (st_.st_mode, st_.st_size if not os.path.isdir(p) else 0)
    return out


def copy_example(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst
