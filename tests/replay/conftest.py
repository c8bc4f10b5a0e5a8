"""Make the replay test helpers importable and parametrize over both backends."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def _c_available() -> bool:
    if os.environ.get("FPMCORE_PUREPYTHON", "") not in ("", "0"):
        return False
    try:
        from fpmcore import _native  # noqa: F401
    except ImportError:
        return False
    return True


BACKENDS = ["python", "c"] if _c_available() else ["python"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every vector runs on the C engine and on the Python reference."""
    return request.param
