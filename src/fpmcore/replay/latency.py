"""The FPM latency model of the replay (06 R-27 … R-31).

Mirrors ``csrc/fpm_latency.c`` function by function; both evaluate in IEEE-754
double precision in the same order (the C build turns off fused multiply-add),
so C and Python step times are bit-identical.  The C side groups the table's
rows once per replay and evaluates only the knots around a step's point (the
others' extrapolation flags by comparison with their ends): the same values
and flags as interpolating every knot, as done here.
"""

from __future__ import annotations

from fpmcore.replay.model import LatencyTable


class _Lin:
    """Collects the extrapolation flag of R-31 over ``lin`` calls."""

    def __init__(self) -> None:
        self.extrapolated = False

    def lin(self, x: float, knots: list[tuple[float, float]]) -> float:
        """R-28: linear interpolation inside, extrapolation outside."""
        m = len(knots)
        if m == 1:
            return knots[0][1]
        if x < knots[0][0] or x > knots[-1][0]:
            self.extrapolated = True
        if x <= knots[0][0]:
            i = 0
        elif x >= knots[-1][0]:
            i = m - 2
        else:
            i = 0
            while not (knots[i][0] <= x <= knots[i + 1][0]):
                i += 1
        xa, ya = knots[i]
        xb, yb = knots[i + 1]
        return ya + (yb - ya) * (x - xa) / (xb - xa)


def prefill_time(table: LatencyTable, b: int, t: int, k: int, lc: _Lin) -> float:
    """R-29 ``P(b, t, k)`` before the floor."""
    nbar = t / b
    pbar = k / b
    slices: list[tuple[float, float]] = []
    rows = table.prefill
    i = 0
    while i < len(rows):
        beta = rows[i][0]
        tt = beta * nbar
        kk = beta * pbar
        tknots: list[tuple[float, float]] = []
        while i < len(rows) and rows[i][0] == beta:
            tj = rows[i][1]
            kknots: list[tuple[float, float]] = []
            while i < len(rows) and rows[i][0] == beta and rows[i][1] == tj:
                kknots.append((float(rows[i][2]), rows[i][3]))
                i += 1
            tknots.append((float(tj), lc.lin(kk, kknots)))
        slices.append((float(beta), lc.lin(tt, tknots)))
    return lc.lin(float(b), slices)


def decode_time(table: LatencyTable, d: int, k: int, lc: _Lin) -> float:
    """R-30 ``D(d, k)`` before the floor."""
    cbar = k / d
    rows = table.decode
    slices: list[tuple[float, float]] = []
    i = 0
    while i < len(rows):
        beta = rows[i][0]
        kk = beta * cbar
        knots: list[tuple[float, float]] = []
        while i < len(rows) and rows[i][0] == beta:
            knots.append((float(rows[i][1]), rows[i][2]))
            i += 1
        slices.append((float(beta), lc.lin(kk, knots)))
    return lc.lin(float(d), slices)


def step_time(
    table: LatencyTable, nprefill: int, ptok: int, pkv: int, ndecode: int, dkv: int
) -> tuple[float, bool] | int:
    """R-31: the step duration and its flag, or the missing phase (0 prefill, 1 decode) as an int.

    A step with both phases lasts ``P + D − min(S, P, D)`` with ``S`` the
    table's ``shared_step_seconds`` (RD-16: one forward, so the fixed cost both
    phases' rows include is paid once; ``S`` = 0 is R-31's ``P + D``).
    """
    lc = _Lin()
    total = 0.0
    pv = 0.0
    if nprefill > 0:
        if not table.prefill:
            return 0
        v = prefill_time(table, nprefill, ptok, pkv, lc)
        floor = min(r[3] for r in table.prefill)
        if v < floor:
            v = floor
            lc.extrapolated = True
        total += v
        pv = v
    if ndecode > 0:
        if not table.decode:
            return 1
        v = decode_time(table, ndecode, dkv, lc)
        floor = min(r[2] for r in table.decode)
        if v < floor:
            v = floor
            lc.extrapolated = True
        total += v
        if nprefill > 0 and table.shared_step_seconds > 0.0:
            total -= min(table.shared_step_seconds, pv, v)
    return total, lc.extrapolated
