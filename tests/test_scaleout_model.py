"""The scale-out scaling model (``benchmarks/scaleout_model.py``) that docs/scaleout.md's
*Scaling* figures come from: its closed form and its discrete-event simulation are two
independent computations of the same throughput and must agree; the consumer-group and
leader limits show where they should."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

_spec = importlib.util.spec_from_file_location(
    "scaleout_model", Path(__file__).resolve().parents[1] / "benchmarks" / "scaleout_model.py")
model = importlib.util.module_from_spec(_spec)
sys.modules["scaleout_model"] = model  # dataclasses resolve annotations through it
_spec.loader.exec_module(model)

# costs of the order measured at k = 8, tau = 100 (a cheap leader) and k = 64, tau = 200
CHEAP = model.CellCosts(8, 100, (32.0, 200.0, 790.0), (1.2e-3, 1.5e-3, 3e-3),
                        (1e-3, 1.5e-3, 2e-3), (1.5e-3, 2e-3, 2.5e-3), (5e-6, 6e-6, 6e-6),
                        (0.1e6, 0.5e6, 0.8e6))
COSTLY = model.CellCosts(64, 200, (32.0, 3200.0, 12000.0), (5e-3, 0.16, 0.64),
                         (4e-3, 0.01, 0.03), (5e-3, 0.01, 0.03), (5e-6, 20e-6, 45e-6),
                         (0.5e6, 5e6, 22e6))
SETTINGS = model.Settings(batch_size=1000, partitions=64, t_io=90e-6)


@pytest.mark.parametrize("cell", [CHEAP, COSTLY], ids=["cheap_leader", "costly_leader"])
@pytest.mark.parametrize("machines", [1, 16, 64])
def test_simulation_agrees_with_the_closed_form(cell, machines):
    analytic = model.analytic(machines, cell, SETTINGS)
    simulated = model.simulate(machines, cell, SETTINGS, seconds=30.0, warmup=4.0)
    assert simulated["records_per_s"] == pytest.approx(analytic["records_per_s"], rel=0.1)
    assert simulated["leader_busy"] == pytest.approx(analytic["leader_busy"], abs=0.1)


def test_members_beyond_the_partition_count_add_nothing():
    at_n = model.analytic(64, CHEAP, SETTINGS)["records_per_s"]
    assert model.analytic(128, CHEAP, SETTINGS)["records_per_s"] == pytest.approx(at_n)


def test_a_cheap_leader_saturates_later_than_a_costly_one():
    """At k = 8, tau = 100 the members scale linearly to 8 (the merge takes less than half
    of the leading member's core) and the leader binds by 64; at k = 64, tau = 200 it binds
    from the start and the rate stays far below P full workers."""
    at_8 = model.analytic(8, CHEAP, SETTINGS)
    assert at_8["binds"] == "workers"
    assert at_8["records_per_s"] == pytest.approx(
        8 * model.analytic(1, CHEAP, SETTINGS)["records_per_s"], rel=0.1)
    at_64 = model.analytic(64, CHEAP, SETTINGS)
    assert at_64["binds"] == "leader" and at_64["efficiency"] < 0.75 * at_8["efficiency"]
    for machines in (1, 16, 64):
        costly = model.analytic(machines, COSTLY, SETTINGS)
        assert costly["binds"] == "leader" and costly["efficiency"] < 0.5
    # a leader with nothing else to do absorbs more than the members deliver around it
    assert model.leader_ceiling(COSTLY, SETTINGS) > model.analytic(
        64, COSTLY, SETTINGS)["records_per_s"]


def test_larger_batches_raise_the_leader_ceiling_only_beyond_k_tau_records():
    """An update carries at most k * tau rows: once it stands for more records, larger
    batches make each row stand for more records at the same cost."""
    larger = model.Settings(batch_size=4000, partitions=64, t_io=90e-6)
    assert model.leader_ceiling(CHEAP, larger) > 3 * model.leader_ceiling(CHEAP, SETTINGS)
    assert model.leader_ceiling(COSTLY, larger) < 1.5 * model.leader_ceiling(COSTLY, SETTINGS)
