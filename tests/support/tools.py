"""The maintainers' scripts of ``tools/`` that tests drive, loaded in one place.

``regen_probes.py`` (the dry-probe examples), ``replay_vs_vllm.py`` (the replay against a real vLLM
``Scheduler``), ``glm_align_grid.py`` and ``bench_replay_out.py`` are scripts a maintainer runs; a test
gets one as a module with :func:`load_tool`, which puts ``tools/`` on ``sys.path`` so that a script may
import its neighbours by name.  The user workflows of the live engine are commands of the ``vllm_032``
plugin (``fpm tiny-model``, ``fpm live-steps``), tested as such.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` as the module ``name`` (imported once)."""
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    return importlib.import_module(name)
