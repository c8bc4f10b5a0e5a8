"""The campaign folder: the name of every file in it, and how each is pinned by its SHA-256.

A campaign is the folder ``fpm onboard -o CAMPAIGN`` writes and the later
commands (``fpm assess``, ``fpm verify -o``, ``fpm finalize``) add to::

    CAMPAIGN/
      onboard.json        the manifest: options, and per stage its inputs and outputs with their SHA-256
      probe/              the live probe's evidence folder (02 §2)
      profile.json        the imported profile
      plan.json           the plan
      smoke/              the smoke collection of a full campaign (fpm collect --smoke's run folder)
      readiness.json      may the full collection start (fpmcore.campaign.readiness)
      run/                the collected run (fpm collect's run folder; pinned by its index.json)
      validation.json     the verdict of every cell of the run
      table.json          the published FPM latency table
      assessment.json     the repeatability report (fpm assess)
      verification.json   the serving validation (fpm verify -o)
      final.json          the finalization record (fpm finalize): every artifact above with its SHA-256

Every name is defined here once; :mod:`fpmcore.campaign.onboard` and
:mod:`fpmcore.campaign.finalize` read them from here.

**Digests.**  A file is pinned by the SHA-256 of its bytes
(:func:`file_sha256`), a folder by the SHA-256 over the sorted relative paths
and digests of its visible files (:func:`folder_sha256`), a collected run by
its artifact index (:func:`run_sha256`, 05 §1: the index pins every artifact
file) and a model folder by its ``config.json`` (:func:`digest`, kind
``model``).  An absent file or folder has the digest ``None``.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from fpmcore.documents.jsonio import one_line, sha256
from fpmcore.documents.paths import parent_text

if TYPE_CHECKING:
    from pathlib import Path

#: The manifest of ``fpm onboard`` and its schema.
MANIFEST = "onboard.json"
MANIFEST_SCHEMA = "fpmcore.onboard/v1"
#: The outputs of the onboarding stages, in the order they are written.
PROBE_DIR, PROFILE, PLAN, RUN_DIR, VALIDATION, TABLE = (
    "probe", "profile.json", "plan.json", "run", "validation.json", "table.json")  # fmt: skip
#: The smoke run of a full campaign and the readiness document written after it.
SMOKE_DIR, READINESS = "smoke", "readiness.json"
#: The repeatability report of ``fpm assess`` and the serving validation of ``fpm verify -o``.
ASSESSMENT, VERIFICATION = "assessment.json", "verification.json"
#: The ``kind`` of a repeatability report (``fpm assess`` writes it, ``fpm publish`` and ``fpm finalize`` read it).
ASSESSMENT_KIND = "fpmcore.assessment"
#: The finalization record of ``fpm finalize``.
FINAL = "final.json"
#: The stages of ``fpm onboard --smoke``, in order (each the work of its command): the smoke subset collected,
#: validated, its readiness written, and published.
COLLECTION_STAGES = ("probe", "import", "plan", "collect", "validate", "readiness", "publish")
#: The stages of a full ``fpm onboard``: the smoke subset first (``smoke/``) and its readiness, which the full
#: collection waits for; then the full run validated, assessed for repeatability, published, its predictions
#: verified against the served engine, and the campaign finalized.
FULL_STAGES = ("probe", "import", "plan", "smoke", "readiness", "collect", "validate", "assess", "publish", "verify",
               "finalize")  # fmt: skip


#: The kinds of a stage's recorded input or output (:func:`digest`).
ITEM_KINDS = ("file", "folder", "run", "model")


def _shown(value: Any) -> str:
    return one_line(json.dumps(value, ensure_ascii=True))[:80]


def _item_problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return f"expected an object with path, kind and sha256, found {_shown(item)}"
    path, kind, sha = item.get("path"), item.get("kind"), item.get("sha256")
    if "sha256" not in item:  # null is an item that was missing; no key is no record of the item at all
        return "sha256 is missing (a 64-hex digest, or null for an item that was missing)"
    if kind not in ITEM_KINDS:
        return f"kind expected one of {', '.join(ITEM_KINDS)}, found {_shown(kind)}"
    if not isinstance(path, str) or not path or "\0" in path:
        return f"path expected a non-empty string, found {_shown(path)}"
    from pathlib import PurePosixPath

    if kind != "model" and (PurePosixPath(path).is_absolute() or ".." in PurePosixPath(path).parts):
        return f"path expected a name inside the campaign folder, found {_shown(path)}"
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
        return f"sha256 expected a 64-hex digest or null, found {_shown(sha)}"
    return None


def manifest_problem(manifest: Any) -> str | None:
    """Why a document is not the manifest ``fpm onboard`` writes (:data:`MANIFEST`), or ``None``.

    An object of :data:`MANIFEST_SCHEMA` with ``options`` (an object) and
    ``stages``: a list of the finished stages, each an object with a known,
    unique ``name``, ``status`` ``"done"`` (only finished stages are
    recorded) and ``inputs`` and ``outputs``, objects of items each with a
    ``kind`` of :data:`ITEM_KINDS`, a ``path`` (inside the campaign folder
    but for a model folder) and a ``sha256`` (64 hex digits, or ``null``
    for an item that was missing).
    """
    if not isinstance(manifest, dict) or manifest.get("schema") != MANIFEST_SCHEMA:
        return f"expected an object of schema {MANIFEST_SCHEMA}"
    if not isinstance(manifest.get("options"), dict):
        return f"options expected an object, found {_shown(manifest.get('options'))}"
    stages = manifest.get("stages")
    if not isinstance(stages, list):
        return f"stages expected a list, found {_shown(stages)}"
    seen: set[str] = set()
    for i, stage in enumerate(stages):
        if not isinstance(stage, dict):
            return f"stages[{i}] expected an object, found {_shown(stage)}"
        name = stage.get("name")
        if not isinstance(name, str) or name not in FULL_STAGES or name in seen:  # a list or an object: no name
            twice = isinstance(name, str) and name in seen
            what = "a stage recorded twice" if twice else f"one of {', '.join(FULL_STAGES)}"
            return f"stages[{i}].name expected {what}, found {_shown(name)}"
        seen.add(name)
        if stage.get("status") != "done":
            return f"stages[{i}] ({name}).status expected \"done\" (only finished stages are recorded), " \
                   f"found {_shown(stage.get('status'))}"  # fmt: skip
        for side in ("inputs", "outputs"):
            items = stage.get(side)
            if not isinstance(items, dict):
                return f"stages[{i}] ({name}).{side} expected an object, found {_shown(items)}"
            for label, item in items.items():
                problem = _item_problem(item)
                if problem is not None:
                    return f"stages[{i}] ({name}).{side}.{one_line(label)[:40]}: {problem}"
    return None


def file_sha256(path: Path) -> str | None:
    """The SHA-256 of a file's bytes; ``None`` when it cannot be read."""
    try:
        return sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def folder_sha256(path: Path) -> str | None:
    """SHA-256 over the sorted relative paths and SHA-256 of every visible file of a folder."""
    if not path.is_dir():
        return None
    h = sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts):
            h.update(p.relative_to(path).as_posix().encode() + b"\0" + sha256(p.read_bytes()).digest())
    return h.hexdigest()


def run_sha256(path: Path) -> str | None:
    """A collected run is pinned by its artifact index (05 §1)."""
    from fpmcore.collect import store

    return file_sha256(path / store.INDEX)


def digest(root: Path, kind: str, name: str) -> str | None:
    """The digest of item ``name`` of kind ``file``, ``folder``, ``run`` (in ``root``) or ``model`` (a model
    folder, anywhere: its ``config.json``)."""
    if kind == "model":
        from pathlib import Path

        return file_sha256(Path(name) / "config.json")
    p = root / name
    if kind == "folder":
        return folder_sha256(p)
    if kind == "run":
        return run_sha256(p)
    return file_sha256(p)


def finalized_folders(*paths: str | os.PathLike[str] | None) -> list[Path]:
    """The finalized campaign folders (a ``final.json`` in them) that hold one of ``paths``: the folder holding
    a path, and the folder holding the file it resolves to when that is another one.  (Looked for without
    pathlib, which a replay that reads no campaign does not import.)"""
    found: list[str] = []
    for path in paths:
        if path is None:
            continue
        lexical = parent_text(path)
        real = os.path.dirname(os.path.realpath(path))
        for folder in [lexical] if os.path.realpath(lexical) == real else [lexical, real]:
            if os.path.exists(os.path.join(folder, FINAL)) and folder not in found:
                found.append(folder)
    if not found:
        return []
    from pathlib import Path

    return [Path(folder) for folder in found]
