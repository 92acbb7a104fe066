"""Keeping the best evaluated policy as an export of its own."""

from __future__ import annotations

import math
import os
import time
from typing import Dict, Optional

from absl import logging

from tfsac.config.fields import Check, refuse_unless
from tfsac.deploy.export import export_policy
from tfsac.deploy.formats import FILES, add_formats, parse_formats
from tfsac.deploy.metadata import policy_metadata
from tfsac.deploy.parity import PARITY_TOLERANCE
from tfsac.files import check_plain_name, check_writable, model_versions
from tfsac.run.callbacks import Callback

BEST_DIR = "best"  # in the run directory, by default
FOLDER = Check(
    lambda v: isinstance(v, (str, os.PathLike)) and isinstance(os.fspath(v), str),
    f"a folder (a str or os.PathLike) or None for <run_dir>/{BEST_DIR}",
    "{0!r:.60} ({0.__class__.__name__})",
)


class SaveBestPolicy(Callback):
    """Exports the policy each time an evaluation's mean return beats every earlier one (a
    resumed run's too), as SB3's `EvalCallback(best_model_save_path=...)`, as the next version
    of the model folder `path` (default `<run_dir>/best`), the run's other export_formats
    added to the highest at the end. The config's `keep_best` makes one."""

    def __init__(self, path: Optional[str] = None):
        # Checked here, not at the run's start: by then the run's first files are written.
        if path is not None:
            refuse_unless(FOLDER, "SaveBestPolicy: path", path)
            path = os.fspath(path)
            check_plain_name("SaveBestPolicy: the best policy's folder", _last_name(path))
            check_writable(path)
        self.path = path
        self.model_dir: Optional[str] = None  # `path`, or the run's <run_dir>/best
        self.best = -math.inf
        self.saved_model_path: Optional[str] = None  # the newest best version
        self._trainer = None

    def on_training_start(self, trainer) -> None:
        self._trainer = trainer
        self.model_dir = os.path.abspath(self.path or os.path.join(trainer.run_dir, BEST_DIR))
        check_plain_name("the best policy's folder", _last_name(self.model_dir))
        check_writable(self.model_dir)
        self.best = max((e["return_mean"] for e in trainer.loop.evaluations), default=-math.inf)

    def on_evaluation(self, evaluation: Dict) -> Optional[bool]:
        if evaluation["return_mean"] <= self.best:
            return None
        self.best = evaluation["return_mean"]
        trainer, config = self._trainer, self._trainer.config
        started = time.perf_counter()
        self.saved_model_path = export_policy(
            trainer.learner.actor,
            trainer.spec,
            os.path.dirname(self.model_dir),
            os.path.basename(self.model_dir),
            policy_metadata(config, trainer.spec, evaluation),
            (config.log_std_min, config.log_std_max),
        )
        logging.info(
            "new best evaluation return %.1f at step %d: exported to %s (training paused %.1f s)",
            self.best,
            evaluation["step"],
            self.saved_model_path,
            time.perf_counter() - started,
        )
        return None

    def on_training_end(self) -> None:
        """The run's export_formats beyond the SavedModel, into the highest version."""
        versions = model_versions(self.model_dir)
        if not versions:
            return
        newest = os.path.join(self.model_dir, versions[-1])
        formats = [f for f in parse_formats(self._trainer.config.export_formats) if f in FILES]
        missing = [f for f in formats if not os.path.isfile(os.path.join(newest, FILES[f]))]
        if not missing:
            return
        started = time.perf_counter()
        written = add_formats(newest, missing)
        logging.info(
            "best policy: exported %s (%.0f s), each within %g of the SavedModel's actions",
            ", ".join(written),
            time.perf_counter() - started,
            PARITY_TOLERANCE,
        )


def _last_name(path: str) -> str:
    return os.path.basename(os.path.normpath(path)) if path else path
