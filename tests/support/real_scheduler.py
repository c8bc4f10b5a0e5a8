"""The replay against a real vLLM release's own ``Scheduler`` (06 R-40): the one helper of the real-scheduler tests.

``tools/replay_vs_vllm.py``, the maintainers' differential script (its full runs are the ones the plugins'
READMEs report), builds the traces and drives vLLM's ``Scheduler`` through ``tools/vllm_sched.py``; the
tests reach it only through :func:`replay_vs_vllm`, and check what every one of them checks here:

* :func:`replay_differential`: random traces (and traces of content-block ids), every step of every trace
  vLLM accepted identical to the replay's, the release the one the test is about;
* :func:`mooncake_excerpt_windows`: the shipped Mooncake excerpt's two windows on the plain and GLM-like
  models, prefix caching off and on, every step identical.

Each returns the script's report, for what a test asserts beyond that.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from tests.support.tools import load_tool

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
#: The kinds of random trace, each with prefix caching on and off.
RANDOM_KINDS = frozenset(f"{k}/{c}" for k in ("plain", "window", "gdn", "glm") for c in ("on", "off"))
#: The kinds of the excerpt's windows.
WINDOW_KINDS = frozenset(f"{k}/{c}/window" for k in ("plain", "glm") for c in ("on", "off"))


def replay_vs_vllm() -> ModuleType:
    """``tools/replay_vs_vllm.py`` as a module: the one place a test loads it from the tools folder."""
    return load_tool("replay_vs_vllm")


def _same_release(report: dict[str, Any], release: str | None) -> None:
    if release is not None:
        assert report["vllm"] == release and report["rules"] == f"vllm=={release}", (report["vllm"], report["rules"])


def replay_differential(
    n: int, seed: int, *, release: str | None = None, backend: str = "c", hash_traces: int = 0, refused: int = 0
) -> dict[str, Any]:
    """``n`` random traces and ``hash_traces`` traces of content-block ids through vLLM and the replay: no
    step differs, at most ``refused`` traces vLLM refused and every other one compared, and with ``release``
    the installed vLLM and the replay's rules are that release (``"0.33.0"``)."""
    report: dict[str, Any] = replay_vs_vllm().differential(n, seed=seed, backend=backend, hash_traces=hash_traces)
    assert report["mismatches"] == []
    assert report["vllm_refused"] <= refused, report["refusals"]
    assert report["matched"] == report["compared"] == n + hash_traces - report["vllm_refused"]
    if n and not refused:
        assert set(report["by_kind"]) >= RANDOM_KINDS
    _same_release(report, release)
    return report


def mooncake_excerpt_windows(seed: int, *, release: str | None = None) -> dict[str, Any]:
    """The Mooncake excerpt's windows (lines 0–19 and 20–39, C engine) on the plain and GLM-like models,
    prefix caching off and on: all eight identical to vLLM step by step, with preemptions (the pools hold
    one long request) and the shared first block hit with prefix caching."""
    labels, rules, report = replay_vs_vllm().excerpt_windows(seed)
    assert labels == ["0-19", "20-39"]
    assert report["mismatches"] == [] and report["vllm_refused"] == 0
    assert report["matched"] == report["compared"] == 8
    assert set(report["by_kind"]) == WINDOW_KINDS
    assert report["preemptions"] > 0
    assert report["by_kind"]["plain/on/window"]["prefix_hit_tokens"] > 0  # the shared first block (id 0)
    assert report["rules"] == rules.runtime
    _same_release(report, release)
    return report
