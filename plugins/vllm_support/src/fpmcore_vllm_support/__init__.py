"""What every fpmcore runtime plugin for vLLM needs, once (``fpmcore-vllm-support``).

Not a plugin (no entry point): the vLLM runtime plugins (``vllm_027``,
``vllm_033``, …) depend on it and import it.  Each holds only what touches
its release: the class table, the import rules, the worker cache its
tensors give and the engine core's planning calls.  Here:

:mod:`fpmcore_vllm_support.encode`
    the JSON encoding of live vLLM values (02 §3.7: dtypes, enums,
    ``Fraction``, ``MultipleOf``, non-finite floats, dataclasses).
:mod:`fpmcore_vllm_support.observe`
    the record's building blocks: unresolved-field tracking (02 §3.12), the
    identity blocks (runtime, observer, model, hardware, binding, lifecycle),
    the resolved settings, the group fields, the scheduler cache, the
    storage numbering, and :func:`~fpmcore_vllm_support.observe.build_record`,
    which assembles one :mod:`fpmcore.documents.record` record for a release.
:mod:`fpmcore_vllm_support.dryprobe`
    the dry probe on CPU: the environment vLLM needs, the staged model
    configuration, the MODEL.json options and dtype names, the default
    launch, the sources the observer reads and the planning loop that writes
    the evidence folder through :mod:`fpmcore.probe.dry_run`.
:mod:`fpmcore_vllm_support.rules`
    the import rules every vLLM release shares (KV dtype labels of I-32,
    ``max_concurrent_batches`` of 03 C-2).
:mod:`fpmcore_vllm_support.plugin`
    :class:`~fpmcore_vllm_support.plugin.VllmRuntimePlugin`: the hook
    implementations of a vLLM runtime plugin, given its release's parts.

Nothing here imports vLLM or torch at module level.
"""
