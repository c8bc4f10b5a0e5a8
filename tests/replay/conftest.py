"""Make the replay test helpers importable and parametrize over both backends."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def _reference_only() -> bool:
    """``FPM_PUREPYTHON=1`` asks for the Python reference alone; otherwise the C
    engine is tested too, and a missing build fails its tests (never skips them)."""
    from fpmcore.replay.native import want_reference

    return want_reference(os.environ)


BACKENDS = ["python"] if _reference_only() else ["python", "c"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every vector runs on the C engine and on the Python reference."""
    return request.param
