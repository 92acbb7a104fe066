"""Deterministic (or stochastic) evaluation episodes on a separate env."""

from __future__ import annotations

from typing import Callable, List, Optional

import gymnasium as gym
import numpy as np


def run_episodes(
    env: gym.Env,
    policy: Callable[[np.ndarray], np.ndarray],
    episodes: int,
    seed: Optional[int] = None,
) -> List[float]:
    """Runs `episodes` full episodes; `policy` maps a [1, obs_dim] batch to env actions.

    The env is seeded once (on the first reset) so later evaluations see new starts.
    """
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed if i == 0 else None)
        total, done = 0.0, False
        while not done:
            action = policy(np.asarray(obs, np.float32)[None])[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns
