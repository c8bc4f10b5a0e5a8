"""The host: plugin loading (:mod:`fpmcore.host.plugins`), the host ``fpm`` runs
(:func:`fpmcore.host.build.build_host`), the values hooks exchange (:mod:`fpmcore.host.hooktypes`), the
typed facade over them (:mod:`fpmcore.host.hooks`), the engine limits asked before an engine starts, and
the conformance suite of the plugin kit."""
