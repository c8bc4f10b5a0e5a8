"""The plugin host ``fpm`` runs: :func:`build_host`.

fpmcore's own commands come in as the built-in plugin :mod:`fpmcore.cli.commands`,
registered before any other plugin, the way any plugin's commands come in;
plugin loading (:mod:`fpmcore.host.plugins`) and the hook facade (:mod:`fpmcore.host.hooks`)
know no command.  Everything that needs the host ``fpm`` would build — the
command line, the sweep's workers, the conformance kit, a runtime plugin's own
checks — builds it here, not through the command line.
"""

from __future__ import annotations

from typing import Any

from fpmcore.cli import commands
from fpmcore.host.plugins import PluginHost

#: The built-in plugins registered before any other plugin.
BUILTIN_PLUGINS: tuple[object, ...] = (commands,)


def build_host(**kwargs: Any) -> PluginHost:
    """The plugin host of ``fpm``: the built-in commands plugin, then the plugins ``kwargs`` select.

    ``kwargs`` are those of :class:`~fpmcore.host.plugins.PluginHost` (``plugins``,
    ``autoload``, ``enable``, ``disable``, ``strict``, ``environ``).
    """
    return PluginHost(builtins=BUILTIN_PLUGINS, **kwargs)
