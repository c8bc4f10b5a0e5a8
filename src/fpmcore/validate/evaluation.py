"""The evaluation order of the reader rules (05 §8) and the rules a producer contract adds.

Rules are evaluated in numeric order.  Artifact-level rules run first, rule
by rule, each checked for every rank artifact (ranks ascending) before the
next; row-level rules then run rank by rank (ascending) and, within a rank,
row by row in ``results`` order, all row rules for one row before the next
row; a contract's rank-end rules run after a rank's last row.  The first
failing rule refuses the cell and its diagnostic is the result.

A model plugin builds its contract as :class:`ContractRules` (the rules it
adds to the general ones) and runs them with :func:`run_rules`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from fpmcore.host.hooktypes import Diagnostic
from fpmcore.validate.cell import ArtifactRule, CellView, RankEndRule, RowRule
from fpmcore.validate.protocol import GENERAL_ARTIFACT_RULES
from fpmcore.validate.rows import GENERAL_ROW_RULES

#: Re-raise exceptions from rules instead of turning them into diagnostics
#: (tests set it to find rules that are not robust against malformed input).
STRICT = False


@attrs.frozen
class ContractRules:
    """The rules a producer contract adds to the general ones.

    ``artifact``/``rows``/``rank_end`` are ``(rule id, function)`` pairs;
    ``owns_protocol_producer`` says the contract's artifacts carry
    ``measurement_protocol.producer`` (A-17); ``interleaved_passes`` that its
    producer measures the points in passes over the whole list, so that the
    raw samples' forward indices rise within each row and are unique within
    the rank instead of rising across the rank (A-33).
    """

    name: str
    artifact: tuple[tuple[str, ArtifactRule], ...] = ()
    rows: tuple[tuple[str, RowRule], ...] = ()
    rank_end: tuple[tuple[str, RankEndRule], ...] = ()
    owns_protocol_producer: bool = False
    interleaved_passes: bool = False


def rule_number(rule: str) -> float:
    """Sort key of a rule id: ``A-n`` → n; a contract check outside chapter 05 (``§6.4``) runs
    right after the contract identity rules A-14 … A-17."""
    m = re.fullmatch(r"A-(\d+)", rule)
    return float(m.group(1)) if m else 17.5


def _failed(rule: str, where: str, exc: Exception) -> Diagnostic:
    """A rule that raised: a bug of the rule on this input, reported instead of a traceback."""
    if STRICT:
        raise exc
    return Diagnostic(rule, f"{rule} cannot read the input: {type(exc).__name__}: {where}", where)


def safe(rule: str, where: str, fn: Callable[..., Diagnostic | None], *args: Any) -> Diagnostic | None:
    """``fn(*args)``, a rule that must never turn bad input into a traceback."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001
        return _failed(rule, where, exc)


def run_artifact_rules(view: CellView, rules: Iterable[tuple[str, ArtifactRule]]) -> Diagnostic | None:
    """Artifact-level rules in numeric order (stable); the first diagnostic or ``None``."""
    for rule, fn in sorted(rules, key=lambda r: rule_number(r[0])):
        d = safe(rule, view.first_path, fn, view)
        if d is not None:
            return d
    return None


def run_rules(view: CellView, contract: ContractRules) -> list[Diagnostic]:
    """Rules A-15 … A-40 of one cell: the general ones plus ``contract``'s, in numeric order (05 §8)."""
    view.rules = contract
    d = run_artifact_rules(view, [*GENERAL_ARTIFACT_RULES, *contract.artifact])
    if d is not None:
        return [d]
    rows = sorted([*GENERAL_ROW_RULES, *contract.rows], key=lambda r: rule_number(r[0]))
    for rank in view.ranks:
        rank.reset()
        for k, row in enumerate(rank.rows):
            for rule, fn in rows:
                try:
                    d = fn(view, rank, k, row)
                except Exception as exc:  # noqa: BLE001  (safe(), inlined: it runs once per row and rule)
                    d = _failed(rule, rank.path, exc)
                if d is not None:
                    return [d]
        for rule, end in contract.rank_end:
            d = safe(rule, rank.path, end, view, rank)
            if d is not None:
                return [d]
    return []


#: The rules of a cell without a configuration-bound identity.
GENERAL_CONTRACT = ContractRules(name="general")
