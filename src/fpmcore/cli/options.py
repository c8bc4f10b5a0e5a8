"""The argparse types of ``fpm``'s numeric options, one place for every subcommand.

Every integer option of every subcommand (fpmcore's own and a plugin's) reads
its value through :func:`integer`, every real-valued one through
:func:`number`: the command line's parser maps argparse's ``type=int`` and
``type=float`` to the defaults of the two, and a command that needs a tighter
range asks for it (``type=integer(minimum=1)``).  A value out of range is a
usage error (exit 2) that names the option and its limits, before any work
starts; no value reaches a pipeline or the C library unbounded.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

#: The largest integer any option accepts: the C library's bound on counts,
#: lengths and steps (``FPM_MAX_TOKENS`` in ``csrc/fpm_replay.h``, R-32).
MAX_INTEGER = 2**40
#: The largest real number any option accepts (seconds, GiB, fractions).
MAX_NUMBER = 2.0**40


def integer(minimum: int = 0, maximum: int = MAX_INTEGER) -> Callable[[str], int]:
    """An argparse type: a decimal integer in ``[minimum, maximum]``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10) if len(text) <= 64 else None
        except ValueError:
            value = None
        if value is None or not minimum <= value <= maximum:
            shown = text if len(text) <= 40 else text[:40] + "…"
            raise argparse.ArgumentTypeError(f"must be an integer from {minimum:,} to {maximum:,}; got {shown!r}")
        return value

    parse.__name__ = "integer"
    return parse


def number(minimum: float = 0.0, maximum: float = MAX_NUMBER) -> Callable[[str], float]:
    """An argparse type: a finite decimal number in ``[minimum, maximum]`` (no ``nan``, no ``inf``)."""

    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= 64 else math.nan
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and minimum <= value <= maximum):
            shown = text if len(text) <= 40 else text[:40] + "…"
            raise argparse.ArgumentTypeError(f"must be a number from {minimum:g} to {maximum:g}; got {shown!r}")
        return value

    parse.__name__ = "number"
    return parse


__all__ = ["MAX_INTEGER", "MAX_NUMBER", "integer", "number"]
