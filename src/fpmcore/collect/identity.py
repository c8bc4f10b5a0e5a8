"""The identity of the cells ``fpm collect`` measures, and their producer contract's key (05 §6.3).

A cell the model-agnostic grid plans (:mod:`fpmcore.point_grid`) has the
execution identity ``(model config digest, "engine_steps", "none", "text")``
(:data:`CELL_IDENTITY`); fpmcore's own protocol (:mod:`fpmcore.collect.run`)
measures it in the execution mode :data:`EXECUTION_MODE` under the producer
name :data:`PROTOCOL_NAME`; :data:`CONTRACT` is the producer contract that
owns such cells, whose rules are :mod:`fpmcore.collect.contract`'s.

The values live here, apart from the rules, so that the plugin host reads the
contract's key (every plugin's contracts are checked against each other when
the host is built) without importing the validation rules.
"""

from __future__ import annotations

from fpmcore.hooktypes import ProducerContract
from fpmcore.point_grid import CELL_IDENTITY as CELL_IDENTITY  # the identity of the cells the grid plans

#: The execution mode of fpmcore's own measurement protocol.
EXECUTION_MODE = "engine_steps"
#: The producer name of fpmcore's own measurement protocol.
PROTOCOL_NAME = "fpmcore_engine_steps"

#: The producer contract of ``fpm collect``'s cells (``fpmcore_engine_steps``).
CONTRACT = ProducerContract(
    name="fpmcore_engine_steps",
    execution_mode=EXECUTION_MODE,
    residency=CELL_IDENTITY["engram_residency"],
    label="engine-steps",
    protocol_producer=PROTOCOL_NAME,
    execution_profile=CELL_IDENTITY["execution_profile"],
)
