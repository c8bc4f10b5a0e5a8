"""Stage A — evidence files (02 §2, §7.1: I-1 to I-11, I-114).

The index ``observations.json`` names, per configuration, the attempts, the
launch manifest and the artifacts of each phase, every file pinned by
SHA-256.  Stage A reads them through the one strict reader
(:func:`fpmcore.documents.jsonio.loads`); later stages only see parsed records.

Beyond 02 §7.1 (fpmcore issue 13):

* I-1 names a missing index as missing (``runtime observation index is
  missing: <DIR>/observations.json``), and an index that is not strict JSON
  with the reader's reason;
* I-11 compares the number of expected ranks before it builds them, so the
  work is bounded by the manifest's size, not by the launch's ``tp`` and ``dp``;
* **I-114** [beyond reference]: the staged model configuration
  ``launch.model_config.path`` exists in the folder, its SHA-256 is
  ``launch.model_config.sha256`` and it is a strict JSON object
  (:func:`staged_config_problem`).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from fpmcore.documents.jsonio import JsonError, join_path, loads
from fpmcore.importer.record_values import first_difference, is_int, is_number, same, strict_json_reason
from fpmcore.importer.state import PHASES, ImportDiagnostic, ImportState, Record, parse_record_name

INDEX_FILE = "observations.json"
INDEX_SCHEMA = "fpmcore-runtime-observations/v1"
MANIFEST_SCHEMA = "fpmcore-runtime-probe-launch/v1"
OBSERVATION = "observation"

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_IMAGE = re.compile(r"^[^\s@]+/[^\s@]+@sha256:[0-9a-f]{64}$")


class IndexRefusal(Exception):
    """An I-1 refusal of the whole index."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def sha256_file(path: Path) -> str | None:
    """The SHA-256 of a file's bytes; ``None`` when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


# --------------------------------------------------------------------------
# I-1: the index
# --------------------------------------------------------------------------

_TOP = ("schema_version", "configurations")
_CONFIG = ("launch", "active_attempt_id", "attempts")
_ATTEMPT = ("attempt_id", "phases")
_PHASE = ("launch_manifest", "artifacts")
_REF = ("path", "sha256")
_ARTIFACT = ("path", "sha256", "kind")


def _keys(obj: Any, expected: tuple[str, ...], path: str) -> None:
    if not isinstance(obj, dict):
        raise IndexRefusal(f"runtime observation index is malformed: {path or '<root>'}")
    problems = sorted(
        [f"{path}.{k}" if path else k for k in expected if k not in obj]
        + [f"{path}.{k}" if path else k for k in obj if k not in expected]
    )
    if problems:
        raise IndexRefusal(f"runtime observation index is malformed: {problems[0]}")


def read_index(folder: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Read and check the index (I-1); return it and its ``{path, sha256}``."""
    path = folder / INDEX_FILE
    if path.is_symlink():
        raise IndexRefusal(f"runtime observation index is a symlink: {path}")
    if not path.exists():
        raise IndexRefusal(f"runtime observation index is missing: {path}")
    if not path.is_file():
        raise IndexRefusal(f"runtime observation index is not a regular file: {path}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise IndexRefusal(f"runtime observation index cannot be read: {path}: {exc.strerror}") from None
    try:
        index = loads(raw)
    except JsonError as exc:
        raise IndexRefusal(
            f"runtime observation index is not strict JSON: {INDEX_FILE}: {strict_json_reason(exc)}"
        ) from None
    if not isinstance(index, dict):
        raise IndexRefusal(f"unsupported runtime observation index schema: '{INDEX_FILE}'")
    if index.get("schema_version") != INDEX_SCHEMA:
        value = index.get("schema_version")
        raise IndexRefusal(
            f"unsupported runtime observation index schema: '{value if isinstance(value, str) else INDEX_FILE}'"
        )
    _keys(index, _TOP, "")
    configs = index["configurations"]
    if not isinstance(configs, dict):
        raise IndexRefusal("runtime observation index is malformed: configurations")
    for label in sorted(configs):
        base = join_path("configurations", label)
        conf = configs[label]
        _keys(conf, _CONFIG, base)
        attempts = conf["attempts"]
        if not isinstance(attempts, list):
            raise IndexRefusal(f"runtime observation index is malformed: {base}.attempts")
        for i, attempt in enumerate(attempts):
            abase = f"{base}.attempts[{i}]"
            _keys(attempt, _ATTEMPT, abase)
            phases = attempt["phases"]
            if not isinstance(phases, dict):
                raise IndexRefusal(f"runtime observation index is malformed: {abase}.phases")
            for phase in sorted(phases):
                pbase = join_path(f"{abase}.phases", phase)
                _keys(phases[phase], _PHASE, pbase)
                _keys(phases[phase]["launch_manifest"], _REF, f"{pbase}.launch_manifest")
                arts = phases[phase]["artifacts"]
                if not isinstance(arts, list):
                    raise IndexRefusal(f"runtime observation index is malformed: {pbase}.artifacts")
                for j, art in enumerate(arts):
                    _keys(art, _ARTIFACT, f"{pbase}.artifacts[{j}]")
                    for key in _ARTIFACT:
                        if not isinstance(art[key], str):
                            raise IndexRefusal(f"runtime observation index is malformed: {pbase}.artifacts[{j}].{key}")
                for key in _REF:
                    if not isinstance(phases[phase]["launch_manifest"][key], str):
                        raise IndexRefusal(f"runtime observation index is malformed: {pbase}.launch_manifest.{key}")
    return index, {"path": INDEX_FILE, "sha256": hashlib.sha256(raw).hexdigest()}


def index_outline(folder: Path) -> tuple[list[str], list[Path]] | None:
    """The configuration labels of the index and every file it names (for ``fpm import -o``'s checks).

    Best effort and never raising: ``None`` when the index cannot be read (the
    import then refuses it, I-1, and writes nothing).
    """
    try:
        index, _ = read_index(folder)
    except (IndexRefusal, OSError):
        return None
    files = [folder / INDEX_FILE]
    for conf in index["configurations"].values():
        mc = conf["launch"].get("model_config") if isinstance(conf["launch"], dict) else None
        if isinstance(mc, dict) and isinstance(mc.get("path"), str) and mc["path"]:
            files.append(folder / mc["path"])
        for attempt in conf["attempts"]:
            for phase in attempt["phases"].values():
                files.append(folder / phase["launch_manifest"]["path"])
                files.extend(folder / art["path"] for art in phase["artifacts"])
    return sorted(index["configurations"]), files


# --------------------------------------------------------------------------
# I-5: the launch object of 02 §2.2
# --------------------------------------------------------------------------


def _nonblank(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _int(v: Any) -> bool:
    return is_int(v)


def _nonneg(v: Any) -> bool:
    return is_int(v) and v >= 0


def _int_list(v: Any) -> bool:
    return isinstance(v, list) and all(is_int(x) for x in v)


#: section -> key -> (validator, optional)
LAUNCH_SCHEMA: dict[str, dict[str, tuple[Any, bool]]] = {
    "identity": {
        "model": (_nonblank, False),
        "model_revision": (_nonblank, False),
        "architecture": (_nonblank, False),
        "num_experts": (_nonneg, False),
        "framework": (_str, False),
        "framework_version": (_str, False),
        "gpu": (_nonblank, False),
        "sm": (_int, True),
    },
    "precision": {
        "gemm_quant_mode": (_str, False),
        "moe_quant_mode": (_str, False),
        "fmha_quant_mode": (_str, False),
        "kvcache_quant_mode": (_str, False),
        "comm_quant_mode": (_str, False),
        "moe_backend": (_str, False),
        "attention_backend": (_str, False),
        "enable_wideep": (_bool, False),
        "enable_eplb": (_bool, False),
    },
    "collection": {
        "max_model_len": (_int, False),
        "max_num_batched_tokens": (_int, False),
        "max_num_seqs": (_int, False),
        "gpu_memory_utilization": (is_number, False),
        "async_scheduling": (_bool, False),
        "enforce_eager": (_bool, False),
        "cudagraph_mode": (_str, True),
        "cudagraph_capture_sizes": (_int_list, True),
        "warmup_iterations": (_nonneg, True),
        "mamba_cache_mode_override": (lambda v: v is None or isinstance(v, str), False),
    },
    "model_config": {
        "path": (_str, False),
        "sha256": (lambda v: isinstance(v, str) and bool(_HEX64.match(v)), False),
    },
    "deployment": {
        "executor": (lambda v: v in ("slurm", "kubernetes"), False),
        "image": (lambda v: isinstance(v, str) and bool(_IMAGE.match(v)), False),
    },
}
TOPOLOGY = ("tp", "pp", "dp", "moe_tp", "moe_ep", "cp")
LAUNCH_SECTIONS = ("identity", "topology", "precision", "collection", "model_config", "deployment")


def launch_problem(launch: Any) -> str | None:
    """The I-5 message for a launch object, or ``None`` when it is well formed."""
    if not isinstance(launch, dict):
        return "runtime observation launch is malformed: launch"
    topo = launch.get("topology")
    if (
        not isinstance(topo, dict)
        or set(topo) != set(TOPOLOGY)
        or not all(is_int(topo[k]) and topo[k] >= 1 for k in TOPOLOGY)
    ):
        return "runtime observations require complete explicit topology"
    if topo["pp"] != 1 or topo["cp"] != 1:
        return f"runtime observation allocation supports PP1 and CP1; got pp={topo['pp']}, cp={topo['cp']}"
    problems: list[str] = []
    for key in launch:
        if key not in LAUNCH_SECTIONS:
            problems.append(key)
    for section, schema in LAUNCH_SCHEMA.items():
        obj = launch.get(section)
        if not isinstance(obj, dict):
            problems.append(section)
            continue
        for key, (ok, optional) in schema.items():
            if key not in obj:
                if not optional:
                    problems.append(f"{section}.{key}")
            elif not ok(obj[key]):
                problems.append(f"{section}.{key}")
        problems.extend(f"{section}.{k}" for k in obj if k not in schema)
    if problems:
        return f"runtime observation launch is malformed: {sorted(problems)[0]}"
    return None


# --------------------------------------------------------------------------
# artifact paths (I-9) and files (I-10)
# --------------------------------------------------------------------------


def normalized(rel: str) -> bool:
    """A normalized relative POSIX path: no ``.``/``..``/empty part, no backslash or NUL, not absolute."""
    parts = rel.split("/")
    return not (
        not rel
        or rel.startswith("/")
        or "\\" in rel
        or "\x00" in rel
        or any(p in ("", ".", "..") for p in parts)
        or os.path.normpath(rel) != rel
    )


def path_problem(folder: Path, rel: str) -> str | None:
    """The I-9 message for one artifact path (normalization, symlinks, containment)."""
    if not normalized(rel):
        return f"artifact paths must be normalized relative paths: {rel}"
    parts = rel.split("/")
    cur = folder
    for part in parts:
        cur = cur / part
        if cur.is_symlink():
            return f"artifact path contains a symlink: {rel}"
    if not cur.is_file():
        return f"artifact paths must be normalized relative paths: {rel}"
    return None


def _expected_ranks(topo: dict[str, int]) -> dict[str, list[dict[str, int]]]:
    return {
        "workers": [{"dp_rank": d, "tp_rank": t, "pp_rank": 0} for d in range(topo["dp"]) for t in range(topo["tp"])],
        "schedulers": [{"dp_rank": d} for d in range(topo["dp"])],
    }


def _sorted_ranks(value: Any) -> Any:
    if not isinstance(value, dict) or set(value) != {"workers", "schedulers"}:
        return None
    out = {}
    for key in ("workers", "schedulers"):
        items = value[key]
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            return None
        out[key] = sorted(items, key=lambda x: sorted((k, str(v)) for k, v in x.items()))
    return out


_MANIFEST_KEYS = {"schema_version", "attempt_id", "configuration", "phase", "launch", "expected_ranks"}


def run(ctx: ImportState, index: dict[str, Any], reviewed: Any | None) -> None:
    """Stage A for one configuration; appends diagnostics, fills ``ctx.records``."""
    folder = Path(ctx.folder)
    entry = index["configurations"][ctx.label]
    ctx.index_entry = entry
    launch = entry["launch"]
    # I-4: the evidence's launch equals the reviewed launch
    if reviewed is not None:
        diff = first_difference(launch, reviewed)
        if diff is not None:
            ctx.diagnostics.append(
                ctx.diag("I-4", f"runtime observation launch differs from the reviewed launch: {diff}")
            )
            return
    ctx.launch = launch
    # I-5
    problem = launch_problem(launch)
    if problem is not None:
        ctx.diagnostics.append(ctx.diag("I-5", problem))
        return
    # I-6
    attempts = entry["attempts"]
    if not attempts:
        ctx.diagnostics.append(ctx.diag("I-6", "configuration has no runtime probe attempts"))
        return
    seen: set[Any] = set()
    for att in attempts:
        aid = att["attempt_id"]
        key = repr(aid)
        if key in seen:
            ctx.diagnostics.append(ctx.diag("I-6", f"duplicate runtime probe attempt identity: '{aid}'"))
            return
        seen.add(key)
    active = entry["active_attempt_id"]
    chosen = [a for a in attempts if isinstance(active, str) and a["attempt_id"] == active]
    if not chosen:
        ctx.diagnostics.append(ctx.diag("I-6", "configuration requires an explicit active attempt identity"))
        return
    attempt = chosen[0]
    ctx.attempt_id = active
    # I-8
    phases = attempt["phases"]
    if set(phases) != set(PHASES):
        got = ", ".join(sorted(phases)) or "none"
        ctx.diagnostics.append(ctx.diag("I-8", f"runtime evidence requires both prefill and decode phases; got {got}"))
        return
    # I-9, I-10: manifests and artifacts
    seen_paths: set[str] = set()
    ok = True
    manifests: dict[str, Any] = {}
    for phase in PHASES:
        ref = phases[phase]["launch_manifest"]
        data = _read(ctx, folder, phase, ref, seen_paths)
        ctx.manifest_refs.append({"path": ref["path"], "sha256": ref["sha256"]})
        if data is _FAILED:
            ok = False
        else:
            manifests[phase] = data
        for art in phases[phase]["artifacts"]:
            if art["kind"] != OBSERVATION:
                problem = path_problem(folder, art["path"])
                if problem is None and sha256_file(folder / art["path"]) != art["sha256"]:
                    problem = f"runtime artifact hash mismatch: {art['path']}"
                if problem is None and art["path"] in seen_paths:
                    problem = f"duplicate runtime artifact path across ranks or phases: {art['path']}"
                seen_paths.add(art["path"])
                if problem is not None:
                    ctx.diagnostics.append(_file_diag(ctx, "I-9", problem, phase, art["path"]))
                    ok = False
                ctx.other_artifacts.append({"path": art["path"], "sha256": art["sha256"]})
                continue
            data = _read(ctx, folder, phase, art, seen_paths)
            ctx.artifacts.append({"path": art["path"], "sha256": art["sha256"]})
            if data is _FAILED:
                ok = False
                continue
            kind, rank = parse_record_name(art["path"].rsplit("/", 1)[-1])
            ctx.records.append(
                Record(phase=phase, path=art["path"], sha256=art["sha256"], data=data, name_kind=kind, name_rank=rank)
            )
    if not ok:
        return
    # I-11: the launch manifests
    ranks_seen: Any = None
    for phase in PHASES:
        man = manifests[phase]
        if not isinstance(man, dict) or man.get("schema_version") != MANIFEST_SCHEMA or set(man) != _MANIFEST_KEYS:
            ctx.diagnostics.append(ctx.diag("I-11", "unsupported runtime launch manifest schema"))
            return
        expected = {"attempt_id": active, "configuration": ctx.label, "phase": phase}
        for key in ("attempt_id", "configuration", "phase"):
            if man[key] != expected[key]:
                ctx.diagnostics.append(
                    ctx.diag("I-11", f"runtime launch manifest of {phase} differs from its configuration: {key}")
                )
                return
        if first_difference(man["launch"], launch) is not None:
            ctx.diagnostics.append(
                ctx.diag("I-11", f"runtime launch manifest of {phase} differs from its configuration: launch")
            )
            return
        ranks = _sorted_ranks(man["expected_ranks"])
        topo = launch["topology"]
        # the counts first: the ranks the topology implies are built only when the manifest lists as many
        # (work bounded by the input's size, not by tp x dp); compared as JSON values (false is not 0)
        if (
            ranks is None
            or len(ranks["workers"]) != topo["dp"] * topo["tp"]
            or len(ranks["schedulers"]) != topo["dp"]
            or not same(ranks, _sorted_ranks(_expected_ranks(topo)))
            or (ranks_seen is not None and not same(ranks, ranks_seen))
        ):
            ctx.diagnostics.append(
                ctx.diag("I-11", f"runtime launch manifest of {phase} differs from its configuration: expected_ranks")
            )
            return
        ranks_seen = ranks
    ctx.manifests = manifests
    # I-114: the staged model configuration is the one the launch pins
    problem = staged_config_problem(folder, launch["model_config"])
    if problem is not None:
        ctx.diagnostics.append(ctx.diag("I-114", problem))


def staged_config_problem(folder: Path, ref: dict[str, Any]) -> str | None:
    """I-114 [beyond reference]: the I-114 message for ``launch.model_config``, or ``None``.

    The probe stages the model's ``config.json`` in the evidence folder and
    pins it by ``launch.model_config`` (02 §2.2), and I-34 compares the
    records' ``model.config_sha256`` with that pin; this rule reads the
    staged file itself, so that an empty or corrupt one is refused: a
    normalized relative path (as I-9 wants it, no symlink) to a regular file
    whose SHA-256 is ``launch.model_config.sha256`` and which holds a strict
    JSON object.
    """
    rel = ref["path"]
    problem = path_problem(folder, rel)
    if problem is not None:
        if "symlink" in problem:
            return f"staged model configuration path contains a symlink: {rel}"
        if normalized(rel) and not os.path.lexists(folder / rel):
            return f"staged model configuration is missing: {rel}"
        return f"staged model configuration must be a file at a normalized relative path: {rel}"
    try:
        raw = (folder / rel).read_bytes()
    except OSError as exc:
        return f"staged model configuration cannot be read: {rel}: {exc.strerror}"
    found = hashlib.sha256(raw).hexdigest()
    if found != ref["sha256"]:
        return (
            f"staged model configuration differs from launch.model_config.sha256: {rel}: "
            f"expected {ref['sha256']}, found {found}"
        )
    try:
        config = loads(raw)
    except JsonError as exc:
        return f"staged model configuration is not strict JSON: {rel}: {strict_json_reason(exc)}"
    if not isinstance(config, dict):
        return f"staged model configuration is not a JSON object: {rel}"
    return None


_FAILED = object()


def _file_diag(ctx: ImportState, rule: str, message: str, phase: str, path: str) -> ImportDiagnostic:
    """I-9 and I-10 name the artifact they refuse and its phase (02 §1)."""
    return ImportDiagnostic(rule, message, ctx.label, phase, path.rsplit("/", 1)[-1])


def _read(ctx: ImportState, folder: Path, phase: str, ref: dict[str, str], seen: set[str]) -> Any:
    rel = ref["path"]
    problem = path_problem(folder, rel)
    if problem is None and rel in seen:
        problem = f"duplicate runtime artifact path across ranks or phases: {rel}"
    if problem is not None:
        ctx.diagnostics.append(_file_diag(ctx, "I-9", problem, phase, rel))
        return _FAILED
    seen.add(rel)
    try:
        raw = (folder / rel).read_bytes()
    except OSError as exc:
        ctx.diagnostics.append(
            _file_diag(ctx, "I-10", f"runtime artifact cannot be read: {rel}: {exc.strerror}", phase, rel)
        )
        return _FAILED
    if hashlib.sha256(raw).hexdigest() != ref["sha256"]:
        ctx.diagnostics.append(_file_diag(ctx, "I-9", f"runtime artifact hash mismatch: {rel}", phase, rel))
        return _FAILED
    try:
        return loads(raw)
    except JsonError as exc:
        reason = strict_json_reason(exc)
        ctx.diagnostics.append(
            _file_diag(ctx, "I-10", f"runtime artifact is not strict JSON: {rel}: {reason}", phase, rel)
        )
        return _FAILED
