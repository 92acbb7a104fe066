"""Keeping the best evaluated policy as an export of its own, as Stable-Baselines3's
`EvalCallback(best_model_save_path=...)` keeps best_model.zip."""

from __future__ import annotations

import math
import os
from typing import Dict, Optional

from absl import logging

from tfsac.deploy.export import export_policy
from tfsac.deploy.formats import parse_formats
from tfsac.deploy.metadata import policy_metadata
from tfsac.files import check_writable
from tfsac.paths import check_plain_name
from tfsac.run.callbacks import Callback

BEST_DIR = "best"  # in the run directory, by default


class SaveBestPolicy(Callback):
    """Exports the policy each time an evaluation's mean return beats every earlier one,
    as SB3's `EvalCallback(best_model_save_path=...)` saves it. The config's `keep_best`
    makes one.

    Each new best is the next version of the model folder, so its highest version, the one
    TF Serving serves, is the best policy so far; its tfsac_metadata.json names the
    evaluation (`training_steps`, `eval_return_mean`, `eval_seed`). The formats are the
    run's `export_formats`. On a resume, the run's earlier evaluations count.

    Args:
        path: the model folder; None puts it at `<run_dir>/best`.
    """

    def __init__(self, path: Optional[str] = None):
        self.path = path
        self.model_dir: Optional[str] = None  # `path`, or the run's <run_dir>/best
        self.best = -math.inf
        self.saved_model_path: Optional[str] = None  # the newest best version
        self._trainer = None

    def on_training_start(self, trainer) -> None:
        self._trainer = trainer
        self.model_dir = os.path.abspath(self.path or os.path.join(trainer.run_dir, BEST_DIR))
        check_plain_name("the best policy's folder", os.path.basename(self.model_dir))
        check_writable(self.model_dir)
        self.best = max((e["return_mean"] for e in trainer.loop.evaluations), default=-math.inf)

    def on_evaluation(self, evaluation: Dict) -> Optional[bool]:
        if evaluation["return_mean"] <= self.best:
            return None
        self.best = evaluation["return_mean"]
        trainer = self._trainer
        config = trainer.config
        model_dir = self.model_dir
        self.saved_model_path = export_policy(
            trainer.learner.actor,
            trainer.spec,
            os.path.dirname(model_dir),
            os.path.basename(model_dir),
            policy_metadata(config, trainer.spec, evaluation),
            (config.log_std_min, config.log_std_max),
            parse_formats(config.export_formats),
        )
        logging.info(
            "new best evaluation return %.1f at step %d: exported to %s",
            self.best,
            evaluation["step"],
            self.saved_model_path,
        )
        return None
