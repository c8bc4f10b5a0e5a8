"""The plugin passes fpmcore's conformance suite (fpmcore.testing.check_plugin)."""

from fpmcore.testing import check_plugin


def test_the_plugin_conforms():
    assert check_plugin("fpmcore_vllm032:plugin") == []
