"""Sweeps of tfsac runs on Ray Tune: a grid of training-flag values times seeds, or an Optuna
search with early stopping (ASHA). Each trial is one ordinary run (`train(config,
resume=True)`) in its own run directory under the sweep directory.

- `plan`: the --grid and --space flag values parsed, every trial's config checked (no Ray,
  no TensorFlow);
- `state`: sweep.json and trials.json, written atomically;
- `trial`: the function each trial runs in a Ray worker (imports TensorFlow there);
- `driver`: `run_sweep`, the Tune and Optuna wiring and the progress lines (imports Ray
  when it runs);
- `results`: results.csv, results.md and the learning curves.
"""

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
