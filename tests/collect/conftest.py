"""Shared fixtures of the collection tests: an imported hybrid profile, its plans and a stand-in engine.

The profile is the dry probe of ``examples/probes/gdn-hybrid-tp4`` (a GDN
hybrid: three Mamba state groups and one attention group of 544-token blocks,
prefix caching in align mode) imported with the installed ``vllm_033``
plugin; its launch evidence names ``model-config.json``, whose bytes are the
stand-in's model folder ``config.json`` so that the cell's model digest holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fpmcore.documents.jsonio import load_path
from fpmcore.testing import make_host, run_fpm
from tests.collect.standin import StandinRuntime, fake_model_dir

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "examples" / "probes" / "gdn-hybrid-tp4"


@pytest.fixture(scope="session", autouse=True)
def no_prefill_idle():
    """The stand-in engine has no caches to cool: its prefill repetitions start without the idle a CPU engine
    needs (``--prefill-idle``, 0.1 s each), which would only slow these tests; the idle is tested on its own."""
    from fpmcore.collect import run

    saved, run.DEFAULT_PREFILL_IDLE = run.DEFAULT_PREFILL_IDLE, 0.0
    yield
    run.DEFAULT_PREFILL_IDLE = saved


@pytest.fixture(scope="session")
def gdn_profile(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("profile") / "gdn.fpm-profile.json"
    host = make_host(entry_points=("vllm_033",))
    result = run_fpm("import", str(PROBE), "-o", str(out), host=host)
    assert result.exit_code == 0, result.stderr
    return out


def make_plan(profile: Path, out: Path, *extra: str) -> Path:
    result = run_fpm("plan", str(profile), "-o", str(out), *extra, host=make_host())
    assert result.exit_code == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def small_plan(gdn_profile, tmp_path_factory) -> Path:
    """The grid at max_model_len 1,200 and a 600-token budget: 77 points (59 prefill, 18 decode), 4 smoke points."""
    return make_plan(gdn_profile, tmp_path_factory.mktemp("plan") / "plan.json", "--max-model-len", "1200",
                     "--token-budget", "600")  # fmt: skip


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    return fake_model_dir(tmp_path_factory.mktemp("model") / "gdn", (PROBE / "model-config.json").read_bytes())


@pytest.fixture
def standin() -> StandinRuntime:
    return StandinRuntime()


def plan_of(path: Path) -> dict:
    return load_path(path)


def standin_host(runtime: StandinRuntime | None = None, *entry_points: str):
    """A host like fpm's with the runtime plugin of the recorded profile (vllm_033) and the stand-in engine
    wrapping its ``fpm_measurement_driver`` (none: no engine driver at all)."""
    plugins = (runtime,) if runtime is not None else ()
    return make_host(*plugins, entry_points=("vllm_033", *entry_points))
