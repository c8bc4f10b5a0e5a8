"""The embedded vLLM 0.27.0 example regenerates to the same bytes with the installed vLLM 0.27.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tools import load_tool

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[3]


def test_embedded_027_example_regenerates_to_the_same_bytes(tmp_path):
    """examples/probes/vllm-0.27.0-plain is what tools/regen_probes.py writes with vLLM 0.27.0."""
    pytest.importorskip("vllm")
    from importlib import metadata

    if metadata.version("vllm") != "0.27.0":
        pytest.skip("the vllm027-real env checks this example")
    regen = load_tool("regen_probes")
    assert regen.planned_here() == ["vllm-0.27.0-plain"]
    fresh = tmp_path / "vllm-0.27.0-plain"
    regen.generate("vllm-0.27.0-plain", fresh)
    assert regen.differences(regen.EXAMPLES / "vllm-0.27.0-plain", fresh) == []
