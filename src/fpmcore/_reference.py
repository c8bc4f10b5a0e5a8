"""The Python reference of the native API (:mod:`fpmcore.native`).

It mirrors ``csrc/`` function by function and is the oracle of the
differential tests; ``FPM_PUREPYTHON=1`` selects it at run time.
"""

from __future__ import annotations

import fpmcore


def version() -> str:
    """The library version: the package version (C: ``fpm_version``)."""
    return fpmcore.__version__


def replay_run(cfg, requests, arrival_mode):  # type: ignore[no-untyped-def]
    """Replay a whole trace (C: ``fpm_replay_run``); see :mod:`fpmcore.replay.reference`."""
    from fpmcore.replay.reference import run_reference

    return run_reference(cfg, requests, arrival_mode)


def align_stop(query):  # type: ignore[no-untyped-def]
    """04 G-2 … G-6 (C: ``fpm_align_stop``)."""
    from fpmcore.replay.align import align_stop as rule

    return rule(query)
