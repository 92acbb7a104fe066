"""A trained policy for Python programs: `Policy.load(path)` from an exported SavedModel
version folder or a run directory (its newest checkpoint that restores), then
`policy.predict(observation)` for one raw observation or a batch of them."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf
from absl import logging

from tfsac.data.envs import unit_to_bounds
from tfsac.data.spaces import space_from_json
from tfsac.deploy.loading import checkpoint_learner, load_policy
from tfsac.deploy.metadata import saved_model_metadata
from tfsac.errors import TfsacError, first_line
from tfsac.files import model_versions

# (flat float32 observations [N, obs_dim], deterministic) -> actions [N, action_dim]
ActFn = Callable[[np.ndarray, bool], np.ndarray]


class Policy:
    """A trained policy for Python: actions in the env's bounds for raw observations of
    the space it was trained on. Make one with `Policy.load`.

    Attributes:
        metadata: what the export or run says about the policy (env id, spaces, bounds,
            algorithm, training steps, final evaluation).
        obs_dim: the width of the flat observation the networks take.
        observation_space: the env's observation space, where the metadata records it.
    """

    def __init__(self, act: ActFn, obs_dim: int, space: Optional[gym.Space], metadata: Dict):
        self._act, self.obs_dim, self.observation_space = act, obs_dim, space
        self.metadata = metadata

    @classmethod
    def load(cls, path: str, step: Optional[int] = None) -> Policy:
        """Loads a policy from an export or a run.

        Args:
            path: a SavedModel version folder (it holds saved_model.pb), a model folder of
                versions (its highest, the one TF Serving serves) or a run directory (it
                holds config.json).
            step: for a run directory, the env step of the checkpoint to load; None loads
                the newest that restores.

        Returns:
            The `Policy`.

        Raises:
            TfsacError: the path is none of the three, or its files do not read.
        """
        versions = model_versions(path, servable=True)
        if versions and not os.path.isfile(os.path.join(path, "config.json")):
            path = os.path.join(path, versions[-1])
            logging.info("loading %s, the highest version (the one TF Serving serves)", path)
        if os.path.isfile(os.path.join(path, "saved_model.pb")):
            if step is not None:
                raise TfsacError(f"step applies to a run directory; {path!r} is a SavedModel")
            return cls._from_saved_model(path)
        if os.path.isfile(os.path.join(path, "config.json")):
            return cls._from_run_dir(path, step)
        raise TfsacError(
            f"{path!r} is neither a SavedModel version folder (saved_model.pb) nor a tfsac "
            "run directory (config.json)"
        )

    @classmethod
    def _from_saved_model(cls, path: str) -> Policy:
        model = load_policy(path)
        signatures = {True: model.signatures["serving_default"], False: None}
        signatures[False] = model.signatures["sample"]
        metadata = saved_model_metadata(model, path)  # TfsacError where it does not read

        def act(batch, deterministic):
            return signatures[deterministic](observation=tf.constant(batch))["action"].numpy()

        dim = int(
            model.signatures["serving_default"]
            .structured_input_signature[1]["observation"]
            .shape[-1]
        )
        return cls(act, dim, _space(metadata), metadata)

    @classmethod
    def _from_run_dir(cls, run_dir: str, step: Optional[int]) -> Policy:
        learner, spec, info = checkpoint_learner(run_dir, step)

        def act(batch, deterministic):
            unit = learner.act(batch, deterministic=deterministic)
            return unit_to_bounds(unit, spec.action_low, spec.action_high)

        return cls(act, spec.obs_dim, _space(info), info)

    def predict(self, observation: Any, deterministic: bool = True) -> np.ndarray:
        """Actions for one observation or a batch, flattened as training flattened them.

        Args:
            observation: one observation of the env's space (a Box array of any shape, an
                int for Discrete, a dict for Dict, ...) or a batch of them (a leading axis,
                or a list).
            deterministic: True takes the policy's mode (the squashed mean); False samples
                from it.

        Returns:
            float32 actions in the env's bounds: `[action_dim]` for one observation,
            `[N, action_dim]` for a batch.

        Raises:
            TfsacError: an observation that is not of the space (named by key for a Dict),
                or that holds NaN or Inf.
        """
        if not isinstance(deterministic, (bool, np.bool_)):
            raise TfsacError(f"deterministic must be True or False, got {deterministic!r}")
        batch, single = self._flat_batch(observation)
        if not np.isfinite(batch).all():  # the exported files answer NaN (docs/serving.md)
            rows = np.flatnonzero(~np.isfinite(batch).all(axis=1)).tolist()
            where = "" if single else f" (batch rows {rows[:10]})"
            raise TfsacError(
                f"the observation holds NaN or infinite values{where} (as float32, the "
                "policy's input: beyond 3.4e38 is infinite)"
            )
        actions = np.asarray(self._act(batch, deterministic))
        return actions[0] if single else actions

    __call__ = predict

    def _flat_batch(self, observation: Any):
        """([N, obs_dim] float32, whether it was one observation)."""
        space = self.observation_space
        if space is None or (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
            array = _numbers(observation)
            if array.ndim in (1, 2) and array.shape[-1] == self.obs_dim:
                return array.reshape(-1, self.obs_dim), array.ndim == 1
            raise TfsacError(
                f"expected an observation of shape ({self.obs_dim},) or a batch of shape "
                f"(N, {self.obs_dim}), got shape {array.shape}"
            )
        if _contains(space, observation):
            return gym.spaces.flatten(space, observation)[None].astype(np.float32), True
        if isinstance(space, gym.spaces.Box):
            array = _numbers(observation)
            if array.ndim and array.shape[1:] == space.shape:
                return array.reshape(len(array), self.obs_dim), False
        items = _vector_batch(space, observation)
        if items is None:
            try:
                items = list(observation)
            except TypeError:
                items = None
        if items and all(_contains(space, item) for item in items):
            rows = [gym.spaces.flatten(space, item) for item in items]
            return np.stack(rows).astype(np.float32), False
        raise TfsacError(
            _dict_mismatch(space, observation)
            or f"expected an observation of {space} or a list of them, got {observation!r}"[:300]
        )


def _dict_mismatch(space: gym.Space, observation: Any) -> Optional[str]:
    """What is wrong with a dict given for a Dict space, said by key (a large space's text
    names neither the key nor the shape); None where the fault is not one of a key."""
    if not (isinstance(space, gym.spaces.Dict) and isinstance(observation, dict)):
        return None
    missing = sorted(set(space.spaces) - set(observation))
    extra = sorted(set(observation) - set(space.spaces))
    if missing or extra:
        return f"observation keys: missing {missing}, not in the env's space {extra}"
    boxes = {k: sub.shape for k, sub in space.spaces.items() if isinstance(sub, gym.spaces.Box)}
    batches = set()
    for key, want in boxes.items():  # other parts' values: the generic line
        shape = np.shape(observation[key])
        if want and shape not in (want, shape[:1] + want):
            return f"observation key {key!r} of shape {shape}, the env's is {want}"
        batches.add(shape[0] if len(shape) > len(want) else None)
    if len(batches) > 1 and len(boxes) == len(space.spaces):
        return f"observation keys of different batch sizes: {sorted(map(str, batches))}"
    return None


def _vector_batch(space: gym.Space, observation: Any) -> Optional[list]:
    """The observations of a batch as a vector env gives a Dict or Tuple space's (one array
    per key with a leading axis), one by one; None where it is no such batch."""
    if not isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return None
    try:
        first = next(iter(observation.values() if isinstance(observation, dict) else observation))
        while isinstance(first, (dict, tuple)):  # nested spaces: down to an array
            first = next(iter(first.values() if isinstance(first, dict) else first))
        batched = gym.vector.utils.batch_space(space, len(first))
        return list(gym.vector.utils.iterate(batched, observation))
    except (TypeError, KeyError, IndexError, ValueError, StopIteration, AssertionError):
        return None


def _numbers(observation: Any) -> np.ndarray:
    """`observation` as a float32 array; TfsacError naming it where it is not numbers."""
    try:
        with np.errstate(over="ignore"):  # beyond float32's range is said by predict
            return np.asarray(observation, np.float32)
    except (TypeError, ValueError) as e:
        raise TfsacError(
            f"the observation must be numbers ({first_line(e)}), got {observation!r}"[:300]
        ) from None


def _contains(space: gym.Space, observation) -> bool:
    """Whether `observation` is one observation of `space` (dtypes taken loosely: a list
    for a Box, a Python int for Discrete)."""
    try:
        if isinstance(space, gym.spaces.Box):
            array = np.asarray(observation)
            return array.shape == space.shape and array.dtype.kind in "biuf"
        # Discrete parts flatten to one-hot columns: their values index, so integers only.
        if isinstance(space, gym.spaces.Discrete):
            return _integers(observation, ()) and space.contains(np.int64(observation))
        if isinstance(space, gym.spaces.MultiDiscrete):
            return _integers(observation, space.shape) and space.contains(
                np.asarray(observation, space.dtype)
            )
        if isinstance(space, gym.spaces.MultiBinary):  # 0 and 1, as ints or floats
            array = np.asarray(observation)
            return array.dtype.kind in "biuf" and space.contains(array)
        if isinstance(space, gym.spaces.Dict):
            return (
                isinstance(observation, dict)
                and set(observation) == set(space.spaces)
                and all(_contains(space[k], v) for k, v in observation.items())
            )
        if isinstance(space, gym.spaces.Tuple):
            return (
                isinstance(observation, (tuple, list))
                and len(observation) == len(space)
                and all(_contains(s, o) for s, o in zip(space, observation, strict=True))
            )
    except (TypeError, ValueError):
        return False
    return False


def _integers(observation, shape) -> bool:
    """Whether `observation` is integers (not 1.5, not '1', not True) of `shape`."""
    array = np.asarray(observation)
    return array.shape == shape and array.dtype.kind in "iu"


def _space(metadata: Dict) -> Optional[gym.Space]:
    data = metadata.get("observation_space_json")
    return space_from_json(data) if data else None
