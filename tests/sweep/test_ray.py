"""fpm sweep --engine ray on a local Ray instance (opt-in: ``tox -e ray``, ``pytest -m ray``)."""

from __future__ import annotations

import pytest

from fpmcore.testing import run_fpm
from tests.sweep.support import rows_of

pytestmark = pytest.mark.ray


def test_ray_and_local_engines_give_the_same_rows(acceptance_grid, tmp_path):
    local = run_fpm("sweep", str(acceptance_grid), "-o", str(tmp_path / "local.jsonl"), "--workers", "2", "--json")
    assert local.exit_code == 0, local.stderr
    ray = run_fpm("sweep", str(acceptance_grid), "-o", str(tmp_path / "ray.jsonl"), "--engine", "ray",
                  "--workers", "2", "--json")  # fmt: skip
    assert ray.exit_code == 0, ray.stderr
    assert rows_of(ray) == rows_of(local)
    assert len(rows_of(ray)) == 24


def test_ray_resumes_a_local_sweep(acceptance_grid, tmp_path):
    """Half the rows from the local pool, the rest from Ray: the same rows as one local run."""
    from fpmcore.sweep.results import encode, read_rows

    out = tmp_path / "r.jsonl"
    full = run_fpm("sweep", str(acceptance_grid), "-o", str(tmp_path / "full.jsonl"), "--json", "--workers", "2")
    rows = rows_of(full)
    out.write_bytes(b"".join(encode(r) for r in rows[::2]))
    ray = run_fpm("sweep", str(acceptance_grid), "-o", str(out), "--engine", "ray", "--resume", "--json")
    assert ray.exit_code == 0, ray.stderr
    assert rows_of(ray) == rows
    assert len(read_rows(out)[0]) == 24
