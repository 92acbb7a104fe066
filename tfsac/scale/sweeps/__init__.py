"""Sweeps of tfsac runs on Ray Tune: a grid of training-flag values times seeds, or an Optuna
search with ASHA early stopping; each trial is one ordinary run under the sweep directory."""

from tfsac.scale.sweeps.driver import run_sweep
from tfsac.scale.sweeps.plan import RESERVED_FLAGS, ConfigSource, Plan, plan_sweep
from tfsac.scale.sweeps.results import summarize, write_results
from tfsac.scale.sweeps.state import SWEEP_FILE, SweepState

__all__ = [
    "RESERVED_FLAGS",
    "SWEEP_FILE",
    "ConfigSource",
    "Plan",
    "SweepState",
    "plan_sweep",
    "run_sweep",
    "summarize",
    "write_results",
]
