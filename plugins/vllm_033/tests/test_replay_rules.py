"""The replay rules of vLLM 0.33.0 (``fpm_replay_rules``): the engine's reference runtime, every switch on."""

from __future__ import annotations

import attrs

from fpmcore.replay.rules import SCHEDULER_SETTINGS, ReplayRules
from fpmcore.testing import make_host


def test_the_plugin_gives_the_rules_of_its_release_through_the_host():
    host = make_host(entry_points=("vllm_033",))
    rules = host.hooks.replay_rules("vllm==0.33.0")
    assert rules == ReplayRules(runtime="vllm==0.33.0")
    assert not any(v for v in attrs.asdict(rules).values() if isinstance(v, bool))  # every switch off
    assert rules.settings == SCHEDULER_SETTINGS
    assert host.hooks.replay_runtimes() == ["vllm==0.33.0"]
