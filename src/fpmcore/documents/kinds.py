"""What fpm document a JSON object is, when it is given where another kind is read.

A plan given to ``fpm replay`` as its profile used to be refused for its first
unknown field (``unknown field 'schema' [P-S1]``), which does not say what went
wrong.  The readers ask :func:`document_kind` when a document fails to read,
and name what the file is and which command reads it.  The kinds are told by
keys no other fpm document has together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``(kind, the keys that tell it, the command that reads it)``, most specific first.
KINDS: tuple[tuple[str, frozenset[str], str], ...] = (
    ("a plan of fpm plan", frozenset({"plan_sha256", "points", "limits"}), "fpm collect reads it"),
    ("an FPM latency table", frozenset({"rows"}), "fpm replay reads it with --fpm-table"),
    ("an FPM profile", frozenset({"schema_version", "deployments", "model"}), "fpm replay and fpm plan read it"),
    ("a runtime observation record", frozenset({"record_version"}), "fpm import reads its evidence folder"),
)
#: ``schema`` or ``kind`` values of fpm's reports and manifests.
NAMED = {
    "fpmcore.onboard/v1": "the manifest of an fpm onboard campaign (onboard.json)",
    "fpmcore.collect/v1": "the manifest of an fpm collect run (collect.json)",
    "fpmcore.assessment": "a repeatability report of fpm assess",
}


def document_kind(obj: Any) -> str | None:
    """What fpm document ``obj`` is (``"a plan of fpm plan (fpm collect reads it)"``), or ``None``."""
    if not isinstance(obj, Mapping):
        return None
    for key in ("schema", "kind"):
        value = obj.get(key)
        if isinstance(value, str) and value in NAMED:
            return NAMED[value]
    if obj.get("command") == "verify" and "runs" in obj:
        return "a report of fpm verify"
    keys = set(obj)
    for kind, tell, reader in KINDS:
        if tell <= keys:
            return f"{kind} ({reader})"
    return None


def not_a(expected: str, obj: Any) -> str | None:
    """``"this is a plan of fpm plan (fpm collect reads it), not an FPM profile"`` when ``obj`` is another
    kind of fpm document than ``expected``; ``None`` when it is none of them (or is the expected kind)."""
    kind = document_kind(obj)
    if kind is None or kind.startswith(expected):
        return None
    return f"this is {kind}, not {expected}"
