"""Goal-conditioned envs (gymnasium-robotics' GoalEnv API): a Dict observation with
`achieved_goal` and `desired_goal` (and usually `observation`), and a `compute_reward
(achieved_goal, desired_goal, info)` that takes batches. Their observations are flattened
like any Dict (gymnasium.spaces.flatten: the keys in the space's order, which gymnasium
sorts: achieved_goal | desired_goal | observation), the input SB3's MultiInputPolicy
builds from the same keys; `goal_columns` says where each key lies in that flat vector."""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import gymnasium as gym
import numpy as np

from tfsac.errors import TfsacError

GOAL_KEYS = ("achieved_goal", "desired_goal")
# (key, first column, end column) of each key of the flat observation, in its order.
GoalColumns = Tuple[Tuple[str, int, int], ...]


def goal_columns(space: gym.Space) -> Optional[GoalColumns]:
    """Where each key of a goal env's Dict observation lies in the flattened vector; None
    unless the space is a Dict of flat Boxes holding both goal keys of one width."""
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


def reward_function(env: gym.Env, columns: Optional[GoalColumns], name: str) -> Callable:
    """The env's `compute_reward`, where it is a goal env (`columns`: its EnvSpec's
    goal_columns); TfsacError (one line) otherwise. The outermost wrapper's that has one:
    a wrapper that changes the reward in `step` and in `compute_reward` relabels with its
    own, so that relabelled rewards are those its `step` gives."""
    try:
        compute = env.get_wrapper_attr("compute_reward")
    except AttributeError:
        compute = None
    if columns is None or not callable(compute):
        raise TfsacError(
            f"her needs a goal-conditioned env (a Dict observation of flat Boxes with "
            f"achieved_goal and desired_goal of one width, and compute_reward), and {name} "
            f"has observation space {env.unwrapped.observation_space}"
            + ("" if callable(compute) else " and no compute_reward")
        )
    return compute


VECTORISED = "her needs it vectorised over the batch (as gymnasium-robotics' envs)"


def batched_rewards(compute: Callable, achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
    """`compute(achieved, desired, infos)` over a batch of goals [n, width] (empty infos,
    as SB3's), as HER relabels: its n rewards, or TfsacError where it does not give them."""
    n = len(achieved)
    reward = np.asarray(compute(achieved, desired, [{} for _ in range(n)]), np.float32)
    if reward.shape != (n,):
        raise TfsacError(
            f"compute_reward returned shape {reward.shape} for a batch of {n} goals; {VECTORISED}"
        )
    if not np.isfinite(reward).all():  # a relabelled goal the env's own steps never meet
        bad = int(np.flatnonzero(~np.isfinite(reward))[0])
        raise TfsacError(
            f"compute_reward returned {reward[bad]} for a relabelled goal (achieved "
            f"{achieved[bad].tolist()}, desired {desired[bad].tolist()}): her needs finite "
            "rewards for every goal, the achieved goal itself too ('future' includes it)"
        )
    return reward


def check_batched_reward(compute: Callable, columns: GoalColumns, name: str) -> None:
    """TfsacError (one line) unless `compute` takes a batch of goals, as HER calls it at
    each update (batched_rewards): checked before a run starts, on a batch whose size is
    not the goal's width (a reward summed over the wrong axis gives the width)."""
    goals = column(columns, "achieved_goal")
    width = goals.stop - goals.start
    n = max(3, width + 1)
    batch = np.zeros((n, width), np.float32)
    try:
        batched_rewards(compute, batch, batch + 0.5)  # apart: a distance's log stays finite
    except TfsacError as e:
        raise TfsacError(f"{name}'s {e}") from None
    except Exception as e:  # noqa: BLE001 - the env's code: what it raised, in one line
        raise TfsacError(
            f"{name}'s compute_reward raised {type(e).__name__} for a batch of {n} goals: "
            f"{e}; {VECTORISED}".replace("\n", " ")
        ) from None


def episode_limit(env: gym.Env) -> Optional[int]:
    """The env's TimeLimit (max_episode_steps), where its spec has one."""
    spec = getattr(env, "spec", None)
    return getattr(spec, "max_episode_steps", None)
