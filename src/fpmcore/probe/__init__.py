"""``fpm probe``: observe a runtime's KV cache and write observation records — a dry run of its planning
(:mod:`fpmcore.probe.dry_run`) or a live engine (:mod:`fpmcore.probe.live`); the command is
:mod:`fpmcore.probe.command`."""
