"""``fpm collect`` and ``fpm assess``: the measurement of a plan's points on a runtime plugin's engine
(:mod:`fpmcore.collect.run`, whose :func:`~fpmcore.collect.run.run_collect` ``fpm onboard`` calls too,
:mod:`fpmcore.collect.measure`, :mod:`fpmcore.collect.store`), what the shared machine did to each timed step
(:mod:`fpmcore.collect.contention`), the producer contract of a collected run, and its assessment: is the run
repeatable (:mod:`fpmcore.collect.assess`).  Both commands are :mod:`fpmcore.collect.command`; the protocol's
options they share with ``fpm onboard`` are :mod:`fpmcore.collect.protocol_options`."""
