"""The measurement reader: ``fpm validate`` and the rules of chapter 05.

A collected run is read attempt by attempt, each for the frozen cell of the
plan its directory names; the first failing rule (A-1 … A-41, in numeric
order) refuses the cell.  The modules, in the order a run is read:

:mod:`~fpmcore.validate.attempt`
    reading a run: the artifact index, the indexed files and nothing else
    (05 §1; symbolic links, strict JSON and the reader's limits).
:mod:`~fpmcore.validate.cell`
    the parsed cell (:class:`~fpmcore.validate.cell.CellView`, one
    :class:`~fpmcore.validate.cell.RankView` per rank artifact) and the
    cell's execution identity (05 §6.2).
:mod:`~fpmcore.validate.integers`
    A-2, the integer schema compiled once into a checker.
:mod:`~fpmcore.validate.structure`
    A-1, A-3 … A-13: structure, Dynamo's merge invariants, plan and provenance.
:mod:`~fpmcore.validate.protocol`
    A-15 … A-20 and A-24: contract identity, measurement protocol, warm-ups.
:mod:`~fpmcore.validate.rows`
    A-29 … A-35, A-37 and A-40: the rules of each row.
:mod:`~fpmcore.validate.evaluation`
    the evaluation order (05 §8) and :class:`~fpmcore.validate.evaluation.ContractRules`,
    the rules a producer contract adds.
:mod:`~fpmcore.validate.contract_hooks`
    the three hooks of a model plugin that owns a producer contract (05 §6.3).
:mod:`~fpmcore.validate.reader`
    one cell's verdict (contract choice, A-14), publication (A-41, A-42), a run.
:mod:`~fpmcore.validate.command`
    ``fpm validate``.
:mod:`~fpmcore.validate.measured_values`
    rendering and comparing JSON values as the diagnostics of 05 do.

A model plugin that owns a producer contract writes only its own rules, as
:class:`~fpmcore.validate.evaluation.ContractRules`, with the pieces above;
the host never names a model or a runtime version.
"""
