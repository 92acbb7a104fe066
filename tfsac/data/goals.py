"""Goal-conditioned envs (gymnasium-robotics' GoalEnv API): a Dict observation with
`achieved_goal` and `desired_goal`, flattened like any Dict, and a batched `compute_reward`;
`goal_columns` says where each key lies in the flat vector."""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import gymnasium as gym
import numpy as np

from tfsac.errors import Fault

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
    """The columns of `key` in the flat observation."""
    return next(slice(first, stop) for name, first, stop in columns if name == key)


VECTORISED = "her needs it vectorised over the batch (as gymnasium-robotics' envs)"


def batched_rewards(compute: Callable, achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
    """`compute(achieved, desired, infos)` over a batch of goals, with empty infos as SB3's:
    its n rewards, or a Fault where it does not give them."""
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
