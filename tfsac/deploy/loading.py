"""Loading a trained policy: from an exported SavedModel, or from a run directory's
newest checkpoint that restores (`CheckpointReader` reads the checkpoint files that
tfsac.run.checkpointing writes)."""

from __future__ import annotations

import json
import logging as logging_module
import os
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from tfsac.algorithm.learner import SACLearner
from tfsac.data.envs import run_env_spec, unit_to_bounds
from tfsac.deploy.metadata import check_saved_model, saved_model_metadata
from tfsac.errors import TfsacError, first_line
from tfsac.files import CHECKPOINT_STATE_FILE as STATE_FILE
from tfsac.files import CHECKPOINTS_DIR, checkpoint_steps, run_config

Policy = Callable[[np.ndarray], np.ndarray]


class CheckpointReader:
    """The checkpoints under `directory` as a reader sees them: which are complete, the
    state each saved, and the learner's variables restored from one."""

    def __init__(self, directory: str, learner: SACLearner):
        self.directory = directory
        self.step = tf.Variable(0, dtype=tf.int64, name="step")
        self.checkpoint = tf.train.Checkpoint(step=self.step, **learner.checkpoint_objects())

    def candidates(self) -> List[str]:
        """Prefixes of the checkpoints whose TF files are complete, newest first; whether
        they restore is for `restore` to say."""
        return [self.prefix(s) for s in checkpoint_steps(self.directory)]

    def prefix(self, step: int) -> str:
        return os.path.join(self.directory, f"ckpt-{step}")

    @staticmethod
    def extra_dir(prefix: str) -> str:
        return prefix + ".extra"

    def read_state(self, prefix: str) -> Dict:
        try:
            with open(os.path.join(self.extra_dir(prefix), STATE_FILE)) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            raise TfsacError(f"checkpoint {prefix!r} is incomplete or corrupt: {e}") from None

    def restore_learner(self, prefix: str) -> Dict:
        """Restores only the learner's state (for evaluation: no replay buffer); returns
        the saved loop state."""
        state = self.read_state(prefix)
        restore_checkpoint(self.checkpoint, prefix, "model")
        return state

    def restore_newest_learner(self) -> Optional[Tuple[str, Dict]]:
        """(prefix, saved state) of the newest checkpoint whose learner state restores, or
        None; a damaged one is said in one line and skipped (a reader moves nothing), one of
        other networks is refused (CheckpointMismatch)."""
        for prefix in self.candidates():
            try:
                return prefix, self.restore_learner(prefix)
            except CheckpointMismatch:
                raise
            except TfsacError as e:
                logging.warning("skipping a damaged checkpoint: %s", e)
        return None


class CheckpointMismatch(TfsacError):
    """A checkpoint whose files read but hold other variables than the model it is restored
    into (other networks, another algorithm): refused, never skipped or set aside as
    damaged."""


def restore_checkpoint(checkpoint, prefix: str, match: str) -> None:
    """Restores `prefix` into `checkpoint` (a tf.train.Checkpoint); `match`: 'all' (every
    value on both sides: a resume) or 'model' (every variable of the model from the
    checkpoint, which may hold more: evaluation, init_from). TfsacError for files that do
    not read, CheckpointMismatch for other variables (shapes, dtypes, objects)."""
    try:
        status = checkpoint.restore(prefix).expect_partial()
        if match == "all":
            status.assert_consumed()
        else:
            status.assert_existing_objects_matched()
        return
    except (tf.errors.OpError, ValueError, AssertionError, IndexError, KeyError) as e:
        # Other shapes or objects, or a variable of another dtype: whole files of other
        # variables. Anything else is damage.
        other = isinstance(e, (ValueError, AssertionError)) or (
            isinstance(e, tf.errors.InvalidArgumentError) and "dtype" in str(e)
        )
        error = TfsacError(f"checkpoint {prefix!r} cannot be restored: {first_line(e)}")
        if other:
            error = CheckpointMismatch(
                f"checkpoint {prefix!r} holds other variables than this run's model "
                f"({first_line(e)}): other settings, networks or algorithm code made it (an "
                "edited config.json, a changed network or algorithm module, or actor_fn and "
                "critic_fn networks, which train(..., resume=True) takes again and its "
                "SavedModel holds)"
            )
    _quiet_unrestored_values()
    raise error


class _UnrestoredValues(logging_module.Filter):
    """TensorFlow's page of warnings, when the objects of a restore that failed are deleted
    (at any later time, at exit too), about the values they did not take: tfsac has said
    in one line why the restore failed."""

    TEXTS = ("deleted with unrestored values", "could not be found in the restored object")

    def filter(self, record) -> bool:
        return not any(text in record.getMessage() for text in self.TEXTS)


def _quiet_unrestored_values() -> None:
    """Adds the filter to TensorFlow's logger once, at the first restore that failed."""
    logger = logging_module.getLogger("tensorflow")
    if not any(isinstance(f, _UnrestoredValues) for f in logger.filters):
        logger.addFilter(_UnrestoredValues())


# The signatures every tfsac export has, each `observation` [batch, width] -> `action`.
POLICY_SIGNATURES = ("serving_default", "sample")


def load_policy(path: str):
    """Loads an exported policy; returns the SavedModel object (`.signatures[...]`).
    TfsacError where it does not load, or is not a policy as tfsac exports them."""
    check_saved_model(path)
    try:
        model = tf.saved_model.load(path)
    # IndexError: a truncated variables file ("Read less bytes than requested").
    except (OSError, ValueError, IndexError, tf.errors.OpError) as e:
        raise TfsacError(f"cannot load the SavedModel at {path!r}: {first_line(e)}") from None
    for name in POLICY_SIGNATURES:
        fn = model.signatures.get(name)
        inputs = fn.structured_input_signature[1] if fn is not None else {}
        outputs = fn.structured_outputs if fn is not None else {}
        if set(inputs) != {"observation"} or "action" not in outputs:
            raise TfsacError(
                f"the SavedModel at {path!r} is not a tfsac policy: it has no {name!r} "
                f"signature from 'observation' to 'action' (its signatures: "
                f"{', '.join(sorted(model.signatures)) or 'none'})"
            )
    return model


def saved_model_policy(path: str, stochastic: bool = False) -> Tuple[Policy, Dict]:
    """A policy from an exported SavedModel (its `serving_default` or `sample` signature)
    and the metadata exported with it."""
    model = load_policy(path)
    fn = model.signatures["sample" if stochastic else "serving_default"]

    def policy(obs):
        return fn(observation=tf.constant(obs, tf.float32))["action"].numpy()

    return policy, saved_model_metadata(model, path)


def checkpoint_learner(run_dir: str, step: Optional[int] = None):
    """(learner, env spec, info) from a run directory's checkpoint of env step `step`, or
    by default its newest that restores; info: the run's config (a dict), the observation
    space, the checkpoint and its step, and the seed and return of the evaluation of those
    weights (where one was made at that step: a run stopped between evaluations has none)."""
    config = run_config(run_dir, need_checkpoint=step is not None, step=step)
    spec = run_env_spec(run_dir, config.env_id, config.env_kwargs)
    learner = SACLearner(spec.obs_dim, spec.action_dim, config)
    reader = CheckpointReader(os.path.join(run_dir, CHECKPOINTS_DIR), learner)
    if step is not None:
        prefix = reader.prefix(step)
        restored = prefix, reader.restore_learner(prefix)
    else:
        restored = reader.restore_newest_learner()
    if restored is None:
        folder = os.path.join(run_dir, CHECKPOINTS_DIR)
        raise TfsacError(f"no checkpoint that restores in {folder!r}")
    prefix, state = restored
    info = config.to_dict()
    info.update(
        observation_dim=spec.obs_dim,
        action_low=list(spec.action_low),
        action_high=list(spec.action_high),
        observation_space_json=spec.observation_space_json,
        checkpoint=prefix,
        checkpoint_step=state["step"],
        **({"env_fn": spec.env_fn} if spec.env_fn else {}),
    )
    evaluations = state.get("evaluations") or []
    # The evaluation of these weights, for scripts/evaluate.py to repeat: not an earlier one.
    if evaluations and evaluations[-1]["step"] == state["step"]:
        info.update(
            eval_seed=evaluations[-1]["seed"],
            eval_return_mean=evaluations[-1]["return_mean"],
        )
        if "success_rate" in evaluations[-1]:  # a goal env's
            info["eval_success_rate"] = evaluations[-1]["success_rate"]
    return learner, spec, info


def checkpoint_policy(
    run_dir: str, stochastic: bool = False, step: Optional[int] = None
) -> Tuple[Policy, Dict]:
    """A policy from a run directory's checkpoint of env step `step` (default: the newest
    that restores), and the run's config (a dict, with what checkpoint_learner adds)."""
    learner, spec, info = checkpoint_learner(run_dir, step)

    def policy(obs):
        unit = learner.act(obs, deterministic=not stochastic)
        return unit_to_bounds(unit, spec.action_low, spec.action_high)

    return policy, info
