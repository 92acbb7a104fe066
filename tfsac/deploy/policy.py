"""A trained policy for Python programs (`Policy.load`, then `predict`), and the functions
of flat observations that scripts/evaluate.py and collect.py run."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfsac.data.envs import unit_to_bounds
from tfsac.data.spaces import space_from_json
from tfsac.deploy.loading import checkpoint_learner, load_policy, policy_source, predict_input
from tfsac.deploy.metadata import saved_model_metadata


class Policy:
    """Actions in the env's bounds for raw observations of the space it was trained on;
    `metadata` is what the export or run records, `obs_dim` the networks' input width;
    `act(flat float32 batch [N, obs_dim], deterministic)` gives its actions."""

    def __init__(self, act: Callable, obs_dim: int, space: Optional[gym.Space], metadata: Dict):
        self._act, self.obs_dim, self.observation_space = act, obs_dim, space
        self.metadata = metadata

    @classmethod
    def load(cls, path: str, step: Optional[int] = None) -> Policy:
        """A policy from a SavedModel version folder, a model folder of versions (its highest,
        as TF Serving serves) or a run directory (its checkpoint of env step `step`, default
        the newest that restores); TfsacError where `path` is none of these or does not read."""
        path, saved_model = policy_source(path, step)
        return cls._from_saved_model(path) if saved_model else cls._from_run_dir(path, step)

    @classmethod
    def _from_saved_model(cls, path: str) -> Policy:
        model = load_policy(path)
        signatures = {True: model.signatures["serving_default"], False: model.signatures["sample"]}
        metadata = saved_model_metadata(model, path)

        def act(batch, deterministic):
            observation = tf.constant(batch, tf.float32)
            return signatures[deterministic](observation=observation)["action"].numpy()

        spec = signatures[True].structured_input_signature[1]["observation"]
        return cls(act, int(spec.shape[-1]), _space(metadata), metadata)

    @classmethod
    def _from_run_dir(cls, run_dir: str, step: Optional[int]) -> Policy:
        learner, spec, info = checkpoint_learner(run_dir, step)

        def act(batch, deterministic):
            unit = learner.act(batch, deterministic=deterministic)
            return unit_to_bounds(unit, spec.action_low, spec.action_high)

        return cls(act, spec.obs_dim, _space(info), info)

    def predict(self, observation: Any, deterministic: bool = True) -> np.ndarray:
        """float32 actions in the env's bounds ([action_dim] or [N, action_dim]) for one
        observation of the env's space or a batch (a leading axis, or a list); deterministic
        takes the mode (the squashed mean). TfsacError for one not of the space, or NaN/Inf."""
        space, dim = self.observation_space, self.obs_dim
        batch, single = predict_input(space, dim, observation, deterministic)
        actions = np.asarray(self._act(batch, deterministic))
        return actions[0] if single else actions

    __call__ = predict


def _space(metadata: Dict) -> Optional[gym.Space]:
    data = metadata.get("observation_space_json")
    return space_from_json(data) if data else None


def saved_model_policy(path: str, stochastic: bool = False) -> Tuple[Callable, Dict]:
    """(a function of flat observation batches, the metadata) from an exported SavedModel."""
    return _flat(Policy._from_saved_model(path), stochastic)


def checkpoint_policy(run_dir: str, stochastic: bool = False, step: Optional[int] = None):
    """The same from a run's checkpoint of env step `step` (default: the newest that restores)."""
    return _flat(Policy._from_run_dir(run_dir, step), stochastic)


def _flat(policy: Policy, stochastic: bool) -> Tuple[Callable, Dict]:
    return partial(policy._act, deterministic=not stochastic), policy.metadata
