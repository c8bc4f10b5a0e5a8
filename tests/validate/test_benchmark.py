"""Speed of the measurement reader: a 577-point, two-rank GLM artifact (pytest-benchmark).

Benchmarks are disabled by default (``--benchmark-disable`` runs the body once);
``pytest tests/validate/test_benchmark.py --benchmark-enable`` times it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import fpmcore_dsv41
import fpmcore_glm53flash
from fpmcore.host.plugins import PluginHost
from fpmcore.validate.measured_values import canonical_digest
from fpmcore.validate.reader import protocol_owners, validate_files
from tests.validate.support import M

ROOT = Path(__file__).resolve().parents[2]

H = 2176


def glm_record() -> dict:
    """The 04 G-25 plan record of the example GLM profile (FlashKDA, TP 4): 496 prefill and 81 decode points."""
    from fpmcore import PlanLimits
    from fpmcore.documents.profile import load_profile

    host = PluginHost(autoload=False, plugins=[fpmcore_glm53flash], environ={})
    profile = load_profile(ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json")
    plan = host.hooks.model("glm53flash").generate_points(
        profile=profile, deployment=0, limits=PlanLimits(8192, 1048576, H, H)
    )
    return dict(plan.report["plan_record"])


@pytest.fixture(scope="module")
def big():
    record = glm_record()
    man = record["manifest"]
    assert (len(man["prefill"]), len(man["decode"])) == (496, 81)
    plan = M.glm_plan(manifest_sha256=canonical_digest(man))
    assert plan["options"]["benchmark_points"]["manifest_sha256"] == record["manifest_sha256"]
    cell = next(c for c in plan["cells"] if c["point_set"] == "full")
    files = M.glm_cell(plan, cell, man, ranks=2, run_id="glm53flash-full-run-1")
    return plan, cell, files


def test_validate_577_points_two_ranks(benchmark, big, monkeypatch):
    monkeypatch.setenv("FPM_GLM53FLASH_PRODUCER_DIR", str(M.PRODUCER_DIR))  # the producer of the example campaign
    plan, cell, files = big
    host = PluginHost(autoload=False, plugins=[fpmcore_glm53flash, fpmcore_dsv41], environ={})
    owners = protocol_owners(host)
    assert sum(len(files[f"r{r}.json"]["results"]) for r in (0, 1)) == 2 * 577
    result = benchmark(validate_files, host, cell, files, plan, owners=owners)
    assert (result.status, len(result.retained)) == ("accepted", 2 * 577)
