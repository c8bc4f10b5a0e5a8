"""The identity of the cells ``fpm collect`` measures, and their producer contract's key (05 §6.3).

A cell the model-agnostic grid plans (:mod:`fpmcore.plan.point_grid`) has the
execution identity ``(model config digest, "engine_steps", "none", "text")``
(:data:`fpmcore.plan.point_grid.CELL_IDENTITY`); fpmcore's own protocol (:mod:`fpmcore.collect.run`)
measures it in the execution mode :data:`EXECUTION_MODE` under the producer
name :data:`PROTOCOL_NAME`; :data:`CONTRACT` is the producer contract that
owns such cells, whose rules are :mod:`fpmcore.collect.contract`'s.

The values live here, apart from the rules, so that the plugin host reads the
contract's key (every plugin's contracts are checked against each other when
the host is built) without importing the validation rules.
"""

from __future__ import annotations

from fpmcore.host.hooktypes import ProducerContract

#: The execution mode of fpmcore's own measurement protocol.
EXECUTION_MODE = "engine_steps"
#: The producer name of fpmcore's own measurement protocol.
PROTOCOL_NAME = "fpmcore_engine_steps"

#: The producer contract of ``fpm collect``'s cells (``fpmcore_engine_steps``).
CONTRACT = ProducerContract(
    name="fpmcore_engine_steps",
    execution_mode=EXECUTION_MODE,
    residency="none",  # point_grid.CELL_IDENTITY (a test keeps them equal; loading the host stays light)
    label="engine-steps",
    protocol_producer=PROTOCOL_NAME,
    execution_profile=EXECUTION_MODE,
)
