"""A skipped real-runtime test names the tox env that runs it: a runtime plugin's own tests the env of its release."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
assert _spec is not None and _spec.loader is not None
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)


def _reason(path: Path) -> str:
    mark = conftest._real_env_skip(SimpleNamespace(path=path))
    return mark.kwargs["reason"]


def test_a_runtime_plugins_real_tests_name_their_releases_env():
    assert (
        _reason(ROOT / "plugins/vllm_027/tests/test_replay_real027.py") == "needs the real vLLM (tox -e vllm027-real)"
    )
    assert _reason(ROOT / "plugins/vllm_033/tests/test_rules_real.py") == "needs the real vLLM (tox -e vllm033-real)"
    assert _reason(ROOT / "tests/test_probe_cli.py") == "needs the real vLLM (tox -e vllm033-real)"


def test_every_env_named_exists_in_tox_ini():
    envs = {line.strip()[len("[testenv:") : -1] for line in (ROOT / "tox.ini").read_text().splitlines()
            if line.startswith("[testenv:")}  # fmt: skip
    for plugin in sorted((ROOT / "plugins").glob("vllm_0*")):
        for test in sorted((plugin / "tests").glob("test_*real*.py")):
            env = _reason(test).split("tox -e ")[1].rstrip(")")
            assert env in envs, (test, env)
