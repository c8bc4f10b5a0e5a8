"""DeepSeek V4.1's producer contract is chosen by the cell's Engram residency (05 §6.3)."""

import pytest

from fpmcore import ExecutionIdentity
from fpmcore.documents.errors import FpmError
from fpmcore.testing import make_host


def test_residency_hbm_tp_sharded_is_eager():
    host = make_host(entry_points=("dsv41",))
    plugin, contract = host.hooks.choose_producer_contract(
        identity=ExecutionIdentity("7" * 64, "full", "hbm_tp_sharded", "text")
    )
    assert (plugin, contract.name, contract.execution_mode) == ("dsv41", "dsv41_eager", "eager")


def test_a_glm_cell_is_not_claimed_by_dsv41():
    host = make_host(entry_points=("dsv41",))
    with pytest.raises(FpmError) as info:
        host.hooks.choose_producer_contract(identity=ExecutionIdentity("7" * 64, "full", "none", "text"))
    assert info.value.message == "native execution identity cell has no audited producer contract: none"
