"""Request traces in the formats plugins add: fpmcore's JSONL, SCHED.json and the public production traces.

:mod:`~fpmcore.traces.format` says what a trace format is (``fpm_trace_formats``),
:mod:`~fpmcore.traces.reading` chooses one and reads a trace through it, :mod:`~fpmcore.traces.transforms`
windows and scales it; the host's readers are :mod:`~fpmcore.traces.own_formats` (fpmcore's JSONL and
SCHED.json), :mod:`~fpmcore.traces.mooncake`, :mod:`~fpmcore.traces.burstgpt` and
:mod:`~fpmcore.traces.azure`; ``fpm trace stats`` and ``fpm trace convert`` are :mod:`~fpmcore.traces.command`.
"""
