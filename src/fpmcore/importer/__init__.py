"""``fpm import``: runtime observation records → an FPM profile draft (02, 03).

The pipeline (:mod:`fpmcore.importer.pipeline`) runs stages A to M of 02 §6
for each selected configuration and gives ``complete`` with a profile draft,
or ``incomplete`` with diagnostics that name the rule, the record and the
value; never a traceback.  Everything specific to a vLLM version is asked of
the runtime plugins through the host's hooks (``classify_spec``,
``normalize_record``, ``runtime_rules``: hybrid evidence, KV dtype labels, the
§5.1 table, state families, the startup reservation of 03 C-1) and its
runtime selection; the import names no vLLM version and no spec class.

Command line::

    fpm import DIR [-o PROFILE] [--json] [--launch LAUNCH.json] [--configuration LABEL]

Exit status: 0 every selected configuration is complete; 1 incomplete;
2 the evidence folder or its index cannot be read, or bad usage.

Modules, named by what they check, in stage order (02 §6.1):

==========================  =====  ===============================================
module                      stage  checks
==========================  =====  ===============================================
``evidence_files``          A      index, launch, attempt, artifact files (I-1 … I-11, I-114)
``record_envelope``         B      record envelope, binding, rank coverage (I-12 … I-20, I-113)
``runtime_identity``        C      runtime identity and version gates (I-21 … I-26)
``launch_settings``         D      launch agreement, resolved settings (I-27 … I-39)
``cache_groups``            E, F   cache groups, class tables, state and checkpoint evidence (I-40 … I-61)
``block_pool``              G, H   block pool, storages, allocations, block ownership (I-62 … I-76)
``layer_views``             I      layer views, kernel blocks, attention groups (I-77 … I-89)
``prefix_and_capacity``     J-L    prefix caching and block sizes, startup capacity, cross-rank
                                   agreement (I-90 … I-109)
``draft``                   M      the profile draft and its provenance (I-110)
==========================  =====  ===============================================

``pipeline`` runs them, ``state`` holds the records, the diagnostics and the
per-configuration :class:`~fpmcore.importer.state.ImportState`, ``record_values`` the JSON value helpers of 02 §1, ``capacity`` the 03 formulas and
``command`` the ``fpm import`` command line.

**Layout-level evidence** (a rule beyond the reference; fpmcore issue 3 asks
for it and wins over 02 §7.2 here).  ``fpm probe --dry-run`` runs the
runtime's real cache planning without allocating a tensor; its worker records
say ``lifecycle.measurement: "cache_planned"`` with ``cache_initialized``,
``warmup_completed`` and ``capture_completed`` false.  Such an attempt imports
``complete`` on what it holds:

* I-19 accepts in a dry worker's ``unresolved_fields`` exactly the
  tensor-level paths (:data:`fpmcore.importer.record_envelope.TENSOR_LEVEL_PATHS`:
  storages, allocated bytes, allocations' storage ids and view-derived block
  strides, layer views, attention groups, model runner, hardware); any other
  path is still I-19, and I-20 checks the dry lifecycle;
* the rules that need allocated tensors or a device do not run: I-35 and
  I-105 (hardware), I-64 (storages), stage H (allocations, layout, block
  ownership) and stage I (views, attention groups, model runner).  The pool
  page ``P`` is the planned bytes over ``num_blocks`` (I-65, I-66 check the
  plan: :func:`fpmcore.importer.block_pool.planned_cache_bytes`);
* every other rule runs: groups, classes, pages, state and checkpoint
  evidence, block pool, prefix caching and block sizes, startup capacity
  (I-100 to I-104), scheduler agreement, cross-phase and cross-rank agreement;
* **I-113** [beyond reference]: one attempt never mixes dry and live worker
  records (``runtime evidence mixes layout-level and tensor-level records in
  one attempt: <subject> is …, <subject> is …``);
* the result says so: ``"evidence": "layout"`` in the import result, in the
  ``--json`` document and in the provenance of the profile draft, and a line
  of the human output.

Live (tensor-level) evidence is judged exactly as before.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigResult", "HostServices", "ImportRun", "import_command", "import_evidence"]


def __getattr__(name: str) -> Any:
    # The pipeline and the command load on first use: another stage imports the pipeline
    # (fpmcore.importer.pipeline) without the command, the command line the command by its module name.
    if name in ("ConfigResult", "HostServices", "ImportRun", "import_evidence"):
        from fpmcore.importer import pipeline

        return getattr(pipeline, name)
    if name == "import_command":
        from fpmcore.importer import command

        return command.import_command
    raise AttributeError(name)
