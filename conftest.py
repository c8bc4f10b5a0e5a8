"""Repository-wide pytest configuration.

* the fpmcore test kit (fixtures ``fpm_host`` and ``run_fpm``);
* tests marked ``real`` need the real vLLM wheels (``tox -e vllm033-real``)
  and are skipped where vLLM is not importable.
"""

import importlib.util

import pytest

pytest_plugins = ["fpmcore.testing"]


def pytest_collection_modifyitems(config, items):
    if importlib.util.find_spec("vllm") is not None:
        return
    skip = pytest.mark.skip(reason="needs the real vLLM (tox -e vllm033-real)")
    for item in items:
        if "real" in item.keywords:
            item.add_marker(skip)
