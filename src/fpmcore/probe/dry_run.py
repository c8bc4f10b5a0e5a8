"""The runtime-neutral half of ``fpm probe --dry-run``: MODEL.json and the evidence folder.

A dry probe plans a MODEL.json with one runtime's own cache planning on CPU
and writes the evidence folder of 02 §2.  The planning, the runtime's
environment and the objects it reads are the runtime plugin's (for vLLM,
:mod:`fpmcore_vllm_support.dryprobe`); two things are fpmcore's own formats,
the same whichever runtime plans, and live here:

* **MODEL.json** (``examples/probes/README.md``): ``max_model_len`` and
  ``available_memory_bytes`` (integers), ``cache`` and ``scheduler`` options,
  ``layers`` (layer-name templates expanded by ``names`` / ``indices`` /
  ``range`` / ``count``, each with a spec ``{"type": <class>, <fields>}``),
  and an optional ``launch`` merged over the runtime's default launch
  (:func:`merge`).  :func:`read_model` refuses a file that cannot be planned
  with :class:`ModelJsonError`, whose message names the file, the key and the
  value; :func:`layer_specs` expands the layers in registration order with
  the runtime's spec builder.
* **the evidence folder** (02 §2): the index ``observations.json``
  (02 §2.1), the staged model configuration and, per phase, the launch
  manifest (02 §2.2) and one record per worker rank and scheduler under its
  02 §2.3 name (:func:`record_file_name`), each file listed with its
  SHA-256 (:func:`evidence_files`), the whole folder published at once and
  never over an existing one (:func:`write_files`, through
  :func:`fpmcore.documents.output_files.publish_folder`: a kill leaves no folder or the
  complete one).

This module imports no runtime.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fpmcore.documents.jsonio import loads
from fpmcore.documents.output_files import publish_folder

#: ``schema_version`` of the index ``observations.json`` (02 §2.1).
INDEX_SCHEMA = "fpmcore-runtime-observations/v1"
#: ``schema_version`` of a launch manifest (02 §2.2).
MANIFEST_SCHEMA = "fpmcore-runtime-probe-launch/v1"
#: The phases of one attempt, in the order they are planned and listed.
PHASES = ("prefill", "decode")
#: The staged model configuration's file name in the evidence folder (02 §2.1).
MODEL_CONFIG = "model-config.json"


#: Why an evidence folder that holds anything is refused (02 §2.3).
NEVER_OVERWRITES = "a probe never overwrites evidence"


class ModelJsonError(ValueError):
    """MODEL.json cannot be planned; the message names the key and the value."""


# --------------------------------------------------------------------------
# MODEL.json
# --------------------------------------------------------------------------


def read_model(model_path: Path, raw: bytes) -> dict[str, Any]:
    """The MODEL.json object of ``raw`` (the bytes of ``model_path``), checked for what every plan reads.

    Refuses what is not strict JSON (:class:`fpmcore.documents.jsonio.JsonError`, the one
    reader) and (:class:`ModelJsonError`) anything but an object with a
    ``layers`` list and integer ``max_model_len`` / ``available_memory_bytes``
    (a boolean is not an integer).
    """
    model = loads(raw, where=str(model_path))
    if not isinstance(model, dict) or not isinstance(model.get("layers"), list):
        raise ModelJsonError(f"{model_path}: MODEL.json must be an object with a 'layers' list")
    for key in ("max_model_len", "available_memory_bytes"):
        if not isinstance(model.get(key), int) or isinstance(model.get(key), bool):
            raise ModelJsonError(f"{model_path}: '{key}' must be an integer; got {model.get(key)!r}")
    return model


def layer_names(entry: Mapping[str, Any]) -> list[str]:
    """The layer names of one ``layers`` entry.

    ``names`` lists them; otherwise ``name`` is a template formatted with
    ``i`` over ``indices``, ``range`` (the arguments of :func:`range`) or
    ``count`` (``0 .. count-1``), and without any of these it is the one name.
    """
    if "names" in entry:
        return list(entry["names"])
    template = entry["name"]
    if "indices" in entry:
        indices = list(entry["indices"])
    elif "range" in entry:
        indices = list(range(*entry["range"]))
    elif "count" in entry:
        indices = list(range(int(entry["count"])))
    else:
        return [template]
    return [template.format(i=i) for i in indices]


def layer_specs(model: Mapping[str, Any], build_spec: Callable[[Mapping[str, Any]], Any]) -> dict[str, Any]:
    """``{layer name: build_spec(entry["spec"])}`` in model registration order.

    The spec of each entry is built once, in entry order.  With
    ``sort_by_layer_index`` (default true) the names are ordered by the
    number in ``layers.<n>.`` (names without one last), then entry order,
    then their order in the entry.  A name given twice is refused.
    """
    rows = []
    for entry_idx, entry in enumerate(model["layers"]):
        spec = build_spec(entry["spec"])
        for name_idx, name in enumerate(layer_names(entry)):
            match = re.search(r"layers\.(\d+)\.", name)
            rows.append((int(match.group(1)) if match else 10**9, entry_idx, name_idx, name, spec))
    if model.get("sort_by_layer_index", True):
        rows.sort(key=lambda r: r[:3])
    specs: dict[str, Any] = {}
    for *_, name, spec in rows:
        if name in specs:
            raise ModelJsonError(f"duplicate layer name {name}")
        specs[name] = spec
    return specs


def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in: objects key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


# --------------------------------------------------------------------------
# the evidence folder
# --------------------------------------------------------------------------


def launch_manifest(attempt: str, configuration: str, phase: str, launch: Mapping[str, Any], tp: int) -> dict[str, Any]:
    """The launch manifest of one phase (02 §2.2): ``tp`` workers of data-parallel rank 0 and its scheduler."""
    return {
        "schema_version": MANIFEST_SCHEMA,
        "attempt_id": attempt,
        "configuration": configuration,
        "phase": phase,
        "launch": launch,
        "expected_ranks": {
            "workers": [{"dp_rank": 0, "tp_rank": t, "pp_rank": 0} for t in range(tp)],
            "schedulers": [{"dp_rank": 0}],
        },
    }


def observations_index(
    configuration: str, launch: Mapping[str, Any], attempt: str, phases: Mapping[str, Any]
) -> dict[str, Any]:
    """The index ``observations.json`` (02 §2.1) of one configuration with one attempt."""
    return {
        "schema_version": INDEX_SCHEMA,
        "configurations": {
            configuration: {
                "launch": launch,
                "active_attempt_id": attempt,
                "attempts": [{"attempt_id": attempt, "phases": phases}],
            }
        },
    }


def dumps(document: Any) -> bytes:
    """The bytes of one evidence file: strict JSON, one-space indent, final newline."""
    return (json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()


def record_file_name(record: Mapping[str, Any]) -> str:
    """The file name of a record in its phase folder (02 §2.3), from its ``binding``."""
    rank = record["binding"]["rank"]
    if record["binding"]["kind"] == "worker":
        return f"runtime-observation-worker-dp{rank['dp']}-tp{rank['tp']}-pp{rank['pp']}.json"
    return f"runtime-observation-scheduler-dp{rank['dp']}.json"


def write_files(out: Path, files: Mapping[Path, bytes]) -> None:
    """Publish ``files`` (relative path → bytes) as the evidence folder ``out``, all at once.

    Through :func:`fpmcore.documents.output_files.publish_folder`: the files are written into
    a temporary sibling folder and renamed into place together, so a kill
    leaves no folder or the complete one.  ``out`` must be new or empty (a
    probe never overwrites evidence: :class:`fpmcore.documents.output_files.OutputError`
    ``O-2``) and its parent must exist (``O-1``).
    """
    publish_folder(out, {Path(rel).as_posix(): data for rel, data in files.items()}, refusal=NEVER_OVERWRITES)


def evidence_files(
    *,
    configuration: str,
    attempt: str,
    launch: Mapping[str, Any],
    model_config: bytes,
    phases: Mapping[str, tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]],
    extras: Mapping[str, Sequence[tuple[str, bytes, str]]] | None = None,
) -> dict[Path, bytes]:
    """The files of an evidence folder with one attempt (02 §2), relative path → bytes, the index last.

    ``phases`` gives, in phase order, each phase's launch manifest and its
    records (worker ranks, then the scheduler).  Each record goes to
    ``<attempt>/<phase>/<its 02 §2.3 name>``; the index lists every file with
    its SHA-256 and the staged ``model_config`` once, in the first phase.
    ``extras`` gives, per phase, more artifacts ``(path relative to the
    folder, bytes, kind)``, listed after the records (``fpm import`` reads
    only kind ``observation`` and keeps the hashes of the others, 02 §2.1).
    Pass the result to :func:`write_files`.
    """
    config_sha = hashlib.sha256(model_config).hexdigest()
    files: dict[Path, bytes] = {Path(MODEL_CONFIG): model_config}
    listed: dict[str, Any] = {}
    for i, (phase, (manifest, records)) in enumerate(phases.items()):
        folder = Path(attempt, phase)
        manifest_bytes = dumps(manifest)
        files[folder / "launch-manifest.json"] = manifest_bytes
        artifacts = []
        for record in records:
            rel = folder / record_file_name(record)  # 02 §2.3
            data = dumps(record)
            files[rel] = data
            artifacts.append(
                {"path": rel.as_posix(), "sha256": hashlib.sha256(data).hexdigest(), "kind": "observation"}
            )
        for rel_path, data, kind in (extras or {}).get(phase, ()):
            files[Path(rel_path)] = data
            artifacts.append({"path": rel_path, "sha256": hashlib.sha256(data).hexdigest(), "kind": kind})
        if i == 0:
            artifacts.append({"path": MODEL_CONFIG, "sha256": config_sha, "kind": "model_config"})
        listed[phase] = {
            "launch_manifest": {
                "path": (folder / "launch-manifest.json").as_posix(),
                "sha256": hashlib.sha256(manifest_bytes).hexdigest(),
            },
            "artifacts": artifacts,
        }
    files[Path("observations.json")] = dumps(observations_index(configuration, launch, attempt, listed))
    return files
