"""GLM-5.3-Flash's producer contract is chosen by the cell's Engram residency (05 §6.3)."""

import pytest

from fpmcore import ExecutionIdentity
from fpmcore.documents.errors import FpmError
from fpmcore.testing import make_host


def test_residency_none_is_native_graph_policy():
    host = make_host(entry_points=("glm53flash",))
    plugin, contract = host.hooks.choose_producer_contract(
        identity=ExecutionIdentity(model_config_sha256="9" * 64, execution_profile="full",
                                   engram_residency="none", input_modality="text"))  # fmt: skip
    assert plugin == "glm53flash"
    assert (contract.name, contract.execution_mode, contract.residency) == (
        "glm53flash_native_graph_policy",
        "native_graph_policy",
        "none",
    )


def test_other_residencies_are_not_claimed():
    host = make_host(entry_points=("glm53flash",))
    identity = ExecutionIdentity("9" * 64, "full", "hbm_tp_sharded", "text")
    with pytest.raises(FpmError) as info:
        host.hooks.choose_producer_contract(identity=identity)
    assert info.value.rule == "A-14"
