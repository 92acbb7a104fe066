"""A sweep's state files: sweep.json (what the sweep is) and trials.json (each trial's spec
and status)."""

from __future__ import annotations

import os
from typing import Dict, Optional

from tfsac.files import read_json, write_json

SWEEP_FILE = "sweep.json"  # what the sweep is: a --resume must ask for the same
TRIALS_FILE = "trials.json"  # each trial's spec and status, as the driver saw them
TRIAL_FILE = "trial.json"  # in a run directory: the trial's attempts and evaluations
DONE = ("finished", "stopped")  # not run again by --resume


class SweepState:
    """trials.json: every trial's spec, status and outcome, rewritten on each change."""

    def __init__(self, sweep_dir: str):
        self.path = os.path.join(sweep_dir, TRIALS_FILE)
        self.trials: Dict[str, Dict] = read_json(self.path, {})

    def update(self, name: str, **fields) -> None:
        self.trials.setdefault(name, {}).update(fields)
        write_json(self.path, self.trials)

    def done(self, spec: Dict) -> bool:
        status = self.trials.get(spec["name"], {}).get("status")
        return status in DONE or bool(finished_run(spec["run_dir"]))


def finished_run(run_dir: str) -> Optional[Dict]:
    """The summary.json of a run directory that holds a run trained to its total_steps,
    else None."""
    summary = read_json(os.path.join(run_dir, "summary.json"), None) or {}
    config = read_json(os.path.join(run_dir, "config.json"), None) or {}
    done = bool(summary) and summary.get("total_steps") == config.get("total_steps")
    return summary if done else None
