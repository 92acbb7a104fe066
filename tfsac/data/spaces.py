"""What the networks and exports know of an env (`EnvSpec`, a run's env_spec.json), its spaces
as JSON, and goal envs: their goal keys' columns, and a batched `compute_reward`."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional, Tuple

import gymnasium as gym
import numpy as np

from tfsac.errors import Fault
from tfsac.files import ENV_SPEC_FILE, read_json

GOAL_KEYS = ("achieved_goal", "desired_goal")
# (key, first column, end column) of each key of the flat observation, in its order.
GoalColumns = Tuple[Tuple[str, int, int], ...]


def goal_columns(space: gym.Space) -> Optional[GoalColumns]:
    """Where each key of a goal env's Dict observation lies in the flat vector; None unless
    the space is a Dict of flat Boxes holding both goal keys of one width."""
    if not isinstance(space, gym.spaces.Dict) or not all(k in space.spaces for k in GOAL_KEYS):
        return None
    columns, start = [], 0
    for key, part in space.spaces.items():
        if not (isinstance(part, gym.spaces.Box) and len(part.shape) == 1):
            return None
        columns.append((key, start, start + part.shape[0]))
        start += part.shape[0]
    widths = {stop - first for key, first, stop in columns if key in GOAL_KEYS}
    return tuple(columns) if len(widths) == 1 else None


def column(columns: GoalColumns, key: str) -> slice:
    return next(slice(first, stop) for name, first, stop in columns if name == key)


VECTORISED = "her needs it vectorised over the batch (as gymnasium-robotics' envs)"


def batched_rewards(compute: Callable, achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
    """`compute(achieved, desired, empty infos)` over a batch: its n rewards, else a Fault."""
    n = len(achieved)
    reward = np.asarray(compute(achieved, desired, [{} for _ in range(n)]), np.float32)
    if reward.shape != (n,):
        raise Fault(
            f"compute_reward returned shape {reward.shape} for a batch of {n} goals; {VECTORISED}"
        )
    if not np.isfinite(reward).all():  # a relabelled goal the env's own steps never meet
        bad = int(np.flatnonzero(~np.isfinite(reward))[0])
        raise Fault(
            f"compute_reward returned {reward[bad]} for a relabelled goal (achieved "
            f"{achieved[bad].tolist()}, desired {desired[bad].tolist()}): her needs finite "
            "rewards for every goal, the achieved goal itself too ('future' includes it)"
        )
    return reward


def episode_limit(env: gym.Env) -> Optional[int]:
    """The env's TimeLimit (max_episode_steps), where its spec has one."""
    spec = getattr(env, "spec", None)
    return getattr(spec, "max_episode_steps", None)


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """What the networks and the exported policy need to know about an env."""

    env_id: str
    obs_dim: int
    action_dim: int
    action_low: Tuple[float, ...]
    action_high: Tuple[float, ...]
    observation_space: str
    action_space: str
    # How the env's observation becomes the flat float32 vector the networks take.
    observation_flattening: str
    # The space as JSON, from which a Policy flattens raw observations as training did.
    observation_space_json: Optional[dict] = None
    # A goal env's (key, first, end column) of each Dict key in the flat observation.
    goal_columns: Optional[GoalColumns] = None
    # The env_fn (module.name) that made the env, wrappers gymnasium.make(env_id) leaves out.
    env_fn: Optional[str] = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, source: str) -> EnvSpec:
        """The spec that `to_dict` wrote; a Fault naming `source` where it is not one."""
        if not isinstance(data, dict):
            raise Fault(f"{source} is not an env spec that tfsac wrote: not an object")
        try:
            data = dict(data, action_low=tuple(data["action_low"]))
            data.update(action_high=tuple(data["action_high"]))
            columns = data.get("goal_columns")
            data["goal_columns"] = tuple(map(tuple, columns)) if columns else None
            spec = cls(**data)
        except (KeyError, TypeError, ValueError) as e:
            raise Fault(f"{source} is not an env spec that tfsac wrote: {e}") from None
        sizes = (spec.obs_dim, spec.action_dim)
        if not all(type(size) is int and size > 0 for size in sizes):
            raise Fault(f"{source}: obs_dim and action_dim must be positive whole numbers")
        if not len(spec.action_low) == len(spec.action_high) == spec.action_dim:
            raise Fault(f"{source}: action bounds of another size than action_dim")
        try:  # a Policy rebuilds the space from it
            if spec.observation_space_json is not None:
                space_from_json(spec.observation_space_json)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise Fault(f"{source}: observation_space_json is no space: {e!r}") from None
        return spec


def _bounds_text(bounds: np.ndarray):
    """Box bounds as strict JSON: numbers as text ('inf' included), one for all if equal."""
    flat = [repr(float(x)) for x in bounds.flat]
    return flat[0] if len(set(flat)) == 1 else flat


def _bounds_array(text, shape: tuple, dtype) -> np.ndarray:
    values = np.array([float(x) for x in np.atleast_1d(text)])
    # One value for all (a scalar space's too: shape ()), or one per element.
    values = np.broadcast_to(values[0], shape) if values.size == 1 else values.reshape(shape)
    return values.astype(dtype)


# The arguments that make each space of whole numbers, kept as its JSON's keys.
WHOLE_NUMBER_SPACES = {
    "Discrete": ("n", "start"),
    "MultiDiscrete": ("nvec", "start"),
    "MultiBinary": ("n",),
}


def space_to_json(space: gym.Space) -> Optional[dict]:
    """An observation space SAC trains on as JSON (None for another kind)."""
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _bounds_text(space.low),
            "high": _bounds_text(space.high),
        }
    for kind, keys in WHOLE_NUMBER_SPACES.items():
        if isinstance(space, getattr(gym.spaces, kind)):
            return {"type": kind, **{k: np.asarray(getattr(space, k)).tolist() for k in keys}}
    if isinstance(space, gym.spaces.Dict):
        parts = {str(k): space_to_json(v) for k, v in space.spaces.items()}
        return None if None in parts.values() else {"type": "Dict", "spaces": parts}
    if isinstance(space, gym.spaces.Tuple):
        parts = [space_to_json(v) for v in space]
        return None if None in parts else {"type": "Tuple", "spaces": parts}
    return None


def unsupported_part(space: gym.Space, where: str = "") -> Optional[str]:
    """Which part of a space SAC cannot train on, as "['s'][1] is a Sequence" (or None)."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        items = space.spaces.items() if isinstance(space, gym.spaces.Dict) else enumerate(space)
        for key, part in items:
            if found := unsupported_part(part, f"{where}[{key!r}]"):
                return found
        return None
    if space_to_json(space) is None:
        return f"{where} is a {type(space).__name__}".lstrip()
    return None


def space_from_json(data: dict) -> gym.Space:
    kind = data["type"]
    if kind == "Box":
        shape, dtype = tuple(data["shape"]), np.dtype(data["dtype"])
        low, high = (_bounds_array(data[k], shape, dtype) for k in ("low", "high"))
        return gym.spaces.Box(low, high, shape, dtype=dtype)
    if kind in WHOLE_NUMBER_SPACES:
        return getattr(gym.spaces, kind)(**{k: data[k] for k in WHOLE_NUMBER_SPACES[kind]})
    if kind == "Dict":
        return gym.spaces.Dict({k: space_from_json(v) for k, v in data["spaces"].items()})
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_json(v) for v in data["spaces"]])
    raise Fault(f"unknown observation space type {kind!r}")


def read_env_spec(run_dir: str) -> Optional[EnvSpec]:
    """The run directory's env_spec.json (None: an older tfsac wrote none)."""
    path = os.path.join(run_dir, ENV_SPEC_FILE)
    data = read_json(path)
    return None if data is None else EnvSpec.from_dict(data, path)
