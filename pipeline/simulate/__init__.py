"""The fleet simulator: a synthetic GPU fleet in the input layout, with its ground truth.

``simulate_fleet`` is the fast core (no files); ``simulate`` writes telemetry, kernel logs,
tickets, the inventory and ``truth/``. See docs/simulator.md for the generative model.
"""

from pipeline.simulate.process import DEFAULT_START, FleetSim, simulate_fleet
from pipeline.simulate.writer import simulate

__all__ = ["DEFAULT_START", "FleetSim", "simulate", "simulate_fleet"]
