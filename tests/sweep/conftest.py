"""Fixtures of the sweep tests."""

from __future__ import annotations

import pytest

from tests.sweep.support import ACCEPTANCE, write_grid


@pytest.fixture
def acceptance_grid(tmp_path):
    """The acceptance grid (2 profiles x 3 max_num_seqs x 2 token budgets x 2 traces) as a file."""
    return write_grid(tmp_path / "grid.json", ACCEPTANCE)
