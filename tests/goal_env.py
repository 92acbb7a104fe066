"""A tiny goal-conditioned env for the HER tests (no gymnasium-robotics needed): a point in
[-1, 1]^2 moved by 0.2 * action towards a goal; Fetch's sparse reward, -(distance > 0.1),
from a `compute_reward` that takes batches; `is_success` in the step's info; 20-step
episodes (enough to cross the square). `--env=goal_env:PointReach-v0` from the tests
folder registers it."""

import gymnasium as gym
import numpy as np

ENV_ID = "PointReach-v0"
THRESHOLD = 0.1


class PointReachEnv(gym.Env):
    def __init__(self, dim: int = 2):
        box = gym.spaces.Box(-1.0, 1.0, (dim,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": box, "achieved_goal": box, "desired_goal": box}
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (dim,), np.float32)
        self.dim = dim

    def _obs(self):
        return {
            "observation": self.position.copy(),
            "achieved_goal": self.position.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1, 1, self.dim).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, self.dim).astype(np.float32)
        return self._obs(), {}

    def step(self, action):
        step = 0.2 * np.clip(np.asarray(action, np.float32), -1, 1)
        self.position = np.clip(self.position + step, -1, 1).astype(np.float32)
        reward = float(self.compute_reward(self.position, self.goal, {}))
        info = {"is_success": float(reward == 0.0)}
        return self._obs(), reward, False, False, info

    def compute_reward(self, achieved_goal, desired_goal, info):
        distance = np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1)
        return -(distance > THRESHOLD).astype(np.float32)


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=PointReachEnv, max_episode_steps=20)
