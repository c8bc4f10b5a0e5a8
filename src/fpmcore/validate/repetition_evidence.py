"""The repetition-evidence sidecar rules (05 §7.5; A-28, A-38, A-39), shared by every contract that binds one.

A contract whose producer writes a repetition-evidence sidecar next to its
rank artifact builds its rules from :class:`RepetitionRules`: how many
warm-up and measured repetitions each line must hold, how many rejected ones
it may hold, and whether rejections must come before the first warm-up (the
GLM-5.3-Flash producer rejects only its first repetition; a producer that
re-seeds after a prefix-cache miss may reject anywhere).  The three rules:

A-28  the sidecar's SHA-256 equals ``repetition_evidence.sha256``, every line
      ends with a newline, and the line count equals ``records``;
A-38  each row's ``repetition_evidence_sha256`` takes one unbound line of its
      rank's sidecar (compared as multisets; after the rank's last row no line
      is left unbound);
A-39  the bound line names the row's benchmark id and rank and holds the
      repetitions the contract asks for, the measured ones last with
      ``raw_sample_index`` 0 … R−1 and exactly the raw samples' wall times.

``label`` is how the diagnostics name the contract's producer where they do
(the texts are those of 05 §8).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import orjson

from fpmcore.documents.rules_catalogue import checks
from fpmcore.host.hooktypes import Diagnostic
from fpmcore.validate.cell import CellView, RankView
from fpmcore.validate.integers import parse_line
from fpmcore.validate.measured_values import ABSENT, TRIMMED_MEAN, canonical_bytes, get, is_int, is_number, js, plain
from fpmcore.validate.rows import raw_fpms

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
#: The roles of a repetition in a sidecar line (05 §7.5), in the order a line holds them; ``contended``: a
#: sample taken under contention and retaken (A-43), for a contract that retakes them.
REPETITION_ROLES = ("rejected", "warmup", "measured", "contended")


def pass_share(measured: int, passes: int, visit: int) -> int:
    """Measured samples of pass ``visit`` when ``measured`` are spread over ``passes`` passes: evenly, the
    earlier passes taking the remainder; the re-measuring visit (``visit == passes``) takes the largest share."""
    base, extra = divmod(measured, passes)
    if visit >= passes:
        return base + (1 if extra else 0)
    return base + (1 if visit < extra else 0)


@checks("A-28")
def check_repetition_sidecar(view: CellView) -> Diagnostic | None:
    """A-28 [BEYOND]: the sidecar's digest, its final newline and its line count."""
    for r in view.ranks:
        ev = get(r.doc, "repetition_evidence")
        sha, records = get(ev, "sha256"), get(ev, "records")
        if not (isinstance(ev, dict) and isinstance(get(ev, "path"), str) and isinstance(sha, str) and _HEX64.match(sha)
                and is_int(records) and records >= 0 and r.sidecar_path is not None):  # fmt: skip
            return Diagnostic(
                "A-28",
                'repetition_evidence expected {"path","records","sha256"} naming a sidecar next to the artifact, '
                f"found {js(ev)}: {r.path}",
                r.path,
            )
        if r.sidecar is None:
            return Diagnostic(
                "A-28", f"repetition evidence sidecar digest differs: expected {sha}, found absent: {r.path}", r.path
            )
        data = b"".join(r.sidecar)
        found = hashlib.sha256(data).hexdigest()
        if found != sha:
            return Diagnostic(
                "A-28", f"repetition evidence sidecar digest differs: expected {sha}, found {found}: {r.path}", r.path
            )
        if data and not data.endswith(b"\n"):
            return Diagnostic(
                "A-28", f"repetition evidence sidecar must end every line with a newline: {r.path}", r.path
            )
        n = data.count(b"\n")
        if n != records:
            return Diagnostic(
                "A-28", f"repetition evidence sidecar holds {n} lines, artifact records {records}: {r.path}", r.path
            )
    return None


def _line_pool(rank: RankView) -> dict[str, list[int]]:
    if rank.line_pool is None:
        pool: dict[str, list[int]] = {}
        for i, line in enumerate(rank.sidecar or ()):
            body = line[:-1] if line.endswith(b"\n") else line
            pool.setdefault(hashlib.sha256(body).hexdigest(), []).append(i)
        for v in pool.values():
            v.reverse()
        rank.line_pool = pool
    return rank.line_pool


@checks("A-38")
def bind_repetition_line(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
    """A-38 [BEYOND]: the row's ``repetition_evidence_sha256`` takes one unbound sidecar line."""
    sha = get(row, "repetition_evidence_sha256")
    lines = _line_pool(rank).get(sha) if isinstance(sha, str) else None
    if not lines:
        bid = plain(get(get(row, "point"), "benchmark_id"))
        return Diagnostic(
            "A-38",
            f"repetition_evidence_sha256 of benchmark_id={bid} rank={rank.rank} matches no line of the repetition "
            f"evidence sidecar: found {plain(sha)}: {rank.path}",
            rank.path,
        )
    rank.bound[k] = lines.pop()
    return None


@checks("A-38")
def check_no_unbound_repetition_lines(view: CellView, rank: RankView) -> Diagnostic | None:
    """A-38 [BEYOND]: after the rank's last row, no sidecar line is left unbound."""
    left = sorted((i, sha) for sha, idx in _line_pool(rank).items() for i in idx)
    if left:
        i, sha = left[0]
        return Diagnostic(
            "A-38", f"repetition evidence sidecar line {i + 1} is bound to no row: sha256 {sha}: {rank.path}", rank.path
        )
    return None


def _canonical(obj: Any, body: bytes) -> bool:
    """``body`` is ``canonical(obj)``; orjson's sorted form is tried first, Python's decides."""
    try:
        if orjson.dumps(obj, option=orjson.OPT_SORT_KEYS) == body:
            return True
    except (TypeError, orjson.JSONEncodeError):
        pass
    try:
        return canonical_bytes(obj) == body
    except ValueError:
        return False


@attrs.frozen
class RepetitionRules:
    """What a contract's repetition-evidence lines must hold (A-39).

    ``warmups`` and ``measured`` are exact counts, ``max_rejected`` a bound;
    ``rejected_first``: every rejected repetition comes before the first
    warm-up.  A contract that reads its counts from the artifact passes a
    function of the cell view instead (:meth:`for_view`).
    """

    warmups: int
    measured: int
    max_rejected: int
    rejected_first: bool = True
    #: a multi-pass producer: the line holds the visits of passes 0 … passes − 1 (and at most one
    #: re-measuring visit ``passes``) one after the other, each with ``warmups`` warm-ups before its
    #: :func:`pass_share` of measured samples; retaken ``contended`` samples may follow the warm-ups
    passes: int | None = None

    def share(self, visit: int) -> int:
        return pass_share(self.measured, self.passes or 1, visit)

    def line_problem(self, line: bytes, row: Any, rank: RankView) -> str | None:
        """What the sidecar line bound to ``row`` contradicts (A-39), or ``None``."""
        body = line[:-1] if line.endswith(b"\n") else line
        obj = parse_line(line)
        if obj is ABSENT:
            return "line is not JSON"
        if not _canonical(obj, body):
            return "line is not canonical JSON (04 G-23)"
        bid = get(get(row, "point"), "benchmark_id")
        for field, want in (("benchmark_id", bid), ("dp_rank", rank.rank)):
            v = get(obj, field)
            if not is_int(v) or v != want:
                return f"{field} expected {plain(want)}, found {plain(v)}"
        reps = get(obj, "repetitions")
        if not isinstance(reps, list):
            return f"repetitions expected a list, found {js(reps)}"
        raw = raw_fpms(row)
        if self.passes is not None:
            return self._passes_problem(reps, raw)
        for j, rep in enumerate(reps):
            if type(rep) is not dict:
                return f"repetitions[{j}] expected an object, found {js(rep)}"
            idx = rep.get("index", ABSENT)
            if type(idx) is not int or idx != j:
                return f"repetitions[{j}].index expected {j}, found {plain(idx)}"
        problem = self._visit_problem(list(enumerate(reps)), raw, 0, self.measured)
        if problem is None and len(raw) != self.measured:
            return f"measured repetitions expected {self.measured}, found {len(raw)}"
        return problem

    def _passes_problem(self, reps: list[Any], raw: list[Any]) -> str | None:
        """The multi-pass line: each visit's repetitions in turn (see :attr:`passes`)."""
        assert self.passes is not None
        visits: list[list[tuple[int, Any]]] = []
        last = -1
        for j, rep in enumerate(reps):
            if type(rep) is not dict:
                return f"repetitions[{j}] expected an object, found {js(rep)}"
            v, idx = rep.get("pass", ABSENT), rep.get("index", ABSENT)
            if type(idx) is not int or idx != j:
                return f"repetitions[{j}].index expected {j}, found {plain(idx)}"
            if type(v) is not int or not max(last, 0) <= v <= self.passes:
                return (
                    f"repetitions[{j}].pass expected an integer from {max(last, 0)} to {self.passes}, found {plain(v)}"
                )
            if v != last:
                if v != len(visits):
                    return f"repetitions[{j}] starts pass {v} after pass {last}"
                visits.append([])
                last = v
            visits[-1].append((j, rep))
        if len(visits) not in (self.passes, self.passes + 1):
            return f"passes expected {self.passes} (or one more, re-measuring), found {len(visits)}"
        total = 0
        for v, entries in enumerate(visits):
            share = self.share(v)
            problem = self._visit_problem(entries, raw, total, share)
            if problem is not None:
                return f"pass {v}: {problem}"
            total += share
        if total != len(raw):
            return f"measured repetitions expected {len(raw)}, found {total}"
        return None

    def _visit_problem(self, entries: list[tuple[int, Any]], raw: list[Any], first: int, share: int) -> str | None:
        """One visit's repetitions ``(line position, repetition)``: its warm-ups, then ``share`` measured
        samples ``first`` … ``first + share − 1`` of the row, retaken contended samples after the warm-ups."""
        rejected = warmup = measured = 0
        for j, rep in entries:
            g = rep.get
            role, fc = g("role", ABSENT), g("fpm_count", ABSENT)
            if role not in REPETITION_ROLES or not isinstance(role, str):
                return f"repetitions[{j}].role expected {'|'.join(REPETITION_ROLES)}, found {plain(role)}"
            if type(fc) is not int or fc < 1:
                return f"repetitions[{j}].fpm_count expected an integer ≥ 1, found {plain(fc)}"
            if role == "measured":
                k = first + measured
                rsi, w = g("raw_sample_index", ABSENT), g("wall_time", ABSENT)
                if type(rsi) is not int or rsi != k:
                    return f"raw_sample_index of repetition {j} expected {k}, found {plain(rsi)}"
                sample = raw[k] if k < len(raw) else ABSENT
                want = sample.get("wall_time", ABSENT) if sample.__class__ is dict else ABSENT
                if w.__class__ is not want.__class__ or w != want or not is_number(w):
                    return f"measured wall_time of raw sample {k} expected {plain(want)}, found {plain(w)}"
                measured += 1
            elif role == "warmup":
                if measured:
                    return f"warm-up repetition {j} comes after a measured repetition"
                warmup += 1
            elif role == "contended":
                if warmup < self.warmups:
                    return f"contended repetition {j} comes before the last warm-up"
            else:
                if self.rejected_first and (warmup or measured):
                    return f"rejected repetition {j} comes after the first warm-up"
                if not isinstance(g("reason"), str):
                    return f"rejected repetition {j} has no reason"
                rejected += 1
        if rejected > self.max_rejected:
            return f"{rejected} rejected repetitions, at most {self.max_rejected}"
        if warmup != self.warmups:
            return f"warm-up repetitions expected {self.warmups}, found {warmup}"
        if measured != share:
            return f"measured repetitions expected {share}, found {measured}"
        return None


def repetition_line_rule(
    rules: Callable[[CellView], RepetitionRules | None],
) -> Callable[[CellView, RankView, int, Any], Any]:
    """A-39 [BEYOND] with the counts ``rules(view)`` gives (``None``: an earlier rule refused the counts)."""

    @checks("A-39")
    def sidecar_line_agrees_with_row(view: CellView, rank: RankView, k: int, row: Any) -> Diagnostic | None:
        i = rank.bound.get(k)
        counts = rules(view)
        if i is None or rank.sidecar is None or counts is None:
            return None
        problem = counts.line_problem(rank.sidecar[i], row, rank)
        if problem is not None:
            bid = plain(get(get(row, "point"), "benchmark_id"))
            return Diagnostic(
                "A-39",
                f"repetition evidence line for benchmark_id={bid} rank={rank.rank} contradicts its row: {problem}: "
                f"{rank.path}",
                rank.path,
            )
        return None

    return sidecar_line_agrees_with_row


def reduced_indices(walls: Sequence[float], measured: int, passes: int, reduction: str) -> list[int]:
    """The raw samples a point's retained wall time reduces: every sample but the first, and, for the mean of a
    point re-measured because its passes disagreed (A-44; its samples in pass order, the re-measuring visit's
    last), not those of the pass whose mean lies farthest from the median of the passes' means — the pass a
    burst moved, which the re-measuring visit replaces.  The upper median needs no such exclusion: the
    re-measuring visit outvotes a burst."""
    count = len(walls)
    indices = list(range(1, count))
    if reduction != TRIMMED_MEAN or passes < 2 or count != measured + pass_share(measured, passes, passes):
        return indices
    blocks, start = [], 0
    for v in range(passes + 1):
        n = pass_share(measured, passes, v)
        blocks.append(range(start, start + n))
        start += n
    means = [math.fsum(walls[i] for i in b) / len(b) for b in blocks if len(b)]
    if len(means) != len(blocks):
        return indices
    mid = sorted(means)[len(means) // 2]
    odd = max(range(passes), key=lambda v: (abs(means[v] - mid), -v))
    return [i for i in indices if i not in blocks[odd]]
