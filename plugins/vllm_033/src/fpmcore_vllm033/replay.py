"""The replay rules of vLLM 0.33.0's scheduler (``fpm_replay_rules``).

vLLM 0.33.0 is the replay engine's reference runtime (06): every switch of
:class:`fpmcore.replay.rules.ReplayRules` is off (each names a departure from it) and every
scheduler setting the engine models is one of its ``SchedulerConfig`` fields
(vllm/config/scheduler.py).  The step sequence is checked against its own
``Scheduler`` (vllm/v1/core/sched/scheduler.py) with
``tools/replay_vs_vllm.py``; the counts are in the plugin's README.
"""

from __future__ import annotations

from fpmcore.plugin_api import ReplayRules, RuntimePin
from fpmcore_vllm033 import VERSION

#: vLLM 0.33.0's scheduler: every switch off, every setting.
REPLAY_RULES = ReplayRules(runtime=str(RuntimePin(VERSION)))
