"""Pure-Python implementation of the native API (:mod:`fpmcore.native`).

It mirrors ``csrc/`` function by function and is the oracle of the
differential tests; ``FPMCORE_PUREPYTHON=1`` selects it at run time.
"""

from __future__ import annotations

import fpmcore


def version() -> str:
    """The library version: the package version (C: ``fpm_version``)."""
    return fpmcore.__version__
