"""The align-stop rule and the point list against the real vLLM 0.33.0 (04 G-2 … G-7, G-17).

Needs vLLM 0.33.0 importable (``tox -e vllm033-real``, or the oracle venv's
site-packages on ``PYTHONPATH``); skipped otherwise.  The grid and the vLLM
call are those of ``tools/glm_align_grid.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from fpmcore import PlanLimits
from fpmcore.documents.profile import parse_profile
from fpmcore_glm53flash.plan_inputs import deployment_facts
from fpmcore_glm53flash.planner import plan_points, select_points, settings_for
from tests.support.tools import load_tool

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools" / "glm_align_grid.py"
PROFILE = Path(__file__).parent / "data" / "plan" / "glm53flash-tp4.fpm-profile.json"


@pytest.fixture(scope="module")
def vllm_split():
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    vllm = pytest.importorskip("vllm")
    if vllm.__version__ != "0.33.0":
        pytest.skip(f"needs vLLM 0.33.0, found {vllm.__version__}")
    from vllm.v1.core.sched.scheduler import Scheduler

    return Scheduler._mamba_block_aligned_split


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    if not TOOL.exists():
        pytest.skip("tools/glm_align_grid.py is not in this tree")
    return load_tool("glm_align_grid")


@pytest.mark.parametrize("alignment", [16, None], ids=["checkpoint", "no-checkpoint"])
@pytest.mark.parametrize("block", [2176, 4608, 16])
def test_align_stop_agrees_with_vllm_on_the_grid(vllm_split, tool, block: int, alignment: int | None) -> None:
    """G-2 … G-6 equal ``Scheduler._mamba_block_aligned_split`` on ≥ 100,000 cases per setting."""
    cases, bad = tool.compare(block, alignment, vllm_split)
    assert cases >= 100_000
    assert bad == []


def test_grid_detects_a_wrong_rule(vllm_split, tool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The grid separates the rule from a plausible misreading: the G-5 limit read as the budget left."""
    align = tool.load_align()
    real = align.align_split

    def misread(**kw):
        kw["max_num_batched_tokens"] = kw["num_new_tokens"]
        return real(**kw)

    monkeypatch.setattr(align, "align_split", misread)
    _, bad = tool.compare(2176, 16, vllm_split)
    assert bad


def _profile_with_block(block: int, checkpoint: bool):
    data = json.loads(PROFILE.read_text())
    dep = data["deployments"][0]["resources"]
    dep["runtime_memory"]["hash_block_size_tokens"] = block
    for g in dep["cache_groups"]:
        if g["name"] != "runtime_group_5":  # the tail ring keeps its 4-token block
            g["block_size_tokens"] = block
        if not checkpoint and "prefill_checkpoint_blocks" in g:
            g["prefill_checkpoint_blocks"] = 0
            del g["prefill_checkpoint_alignment"]
    return parse_profile(json.dumps(data))


@pytest.mark.parametrize("checkpoint", [True, False], ids=["checkpoint", "no-checkpoint"])
@pytest.mark.parametrize("block", [1024, 1568, 2184, 3072, 8704])
def test_point_list_equals_a_list_built_with_vllms_split(vllm_split, tool, block: int, checkpoint: bool) -> None:
    """G-17 with vLLM's own split gives the same list as the planner, for five other block sizes."""
    profile = _profile_with_block(block, checkpoint)
    limits = PlanLimits(token_budget=8192, max_model_len=1048576, block_size=block, hash_block_size=block)
    ours = plan_points([deployment_facts(profile.deployments[0], 0)], limits, profile.model_revision)

    settings = settings_for([deployment_facts(profile.deployments[0], 0)], limits)
    alignment = 16 if checkpoint else None
    asked: list[tuple[int, int]] = []

    def split(prefix: int, new_tokens: int) -> int:
        asked.append((prefix, new_tokens))
        shim = tool.scheduler_flags(block, 8192, alignment, False)
        request = SimpleNamespace(
            num_computed_tokens=0,
            num_prompt_tokens=prefix + new_tokens,
            num_tokens=prefix + new_tokens,
            shared_prefix_boundary=0,
        )
        return vllm_split(shim, request, new_tokens, prefix, 0)

    theirs = select_points(settings, split)
    assert len(asked) == ours.candidates["prefill"] > 0
    assert theirs.points == ours.points
    assert theirs.dropped == ours.dropped
    assert theirs.record()["manifest_sha256"] == ours.record()["manifest_sha256"]
    if not checkpoint and block < 8192:
        assert ours.dropped["align_split"] > 0  # every n > B splits without the checkpoint (G-7)
