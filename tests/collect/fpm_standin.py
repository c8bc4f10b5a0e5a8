"""``fpm`` with the stand-in runtime plugin registered: ``python -m tests.collect.fpm_standin ARGS…``.

The kill tests run it as a subprocess (from the repository root) and kill it.
"""

from __future__ import annotations

import sys

from fpmcore.cli import main
from fpmcore.plugins import PluginHost
from tests.collect.standin import StandinRuntime, use_standin


def run(argv: list[str]) -> int:
    runtime = StandinRuntime()
    use_standin(runtime)
    return main(argv, host=PluginHost(plugins=[runtime], autoload=False, enable=("vllm_033",), environ={}))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
