"""A preallocated, fixed-size replay buffer of transitions."""

from __future__ import annotations

from typing import Dict

import numpy as np


class ReplayBuffer:
    """A ring buffer of (s, a, r, s', terminated), allocated once at full size.

    `next_observation` is stored explicitly (not taken from the following slot) so that a
    truncated episode keeps its true final observation for bootstrapping.
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, seed: int = 0):
        self.capacity = int(capacity)
        self.observation = np.zeros((capacity, obs_dim), np.float32)
        self.action = np.zeros((capacity, action_dim), np.float32)
        self.reward = np.zeros((capacity,), np.float32)
        self.next_observation = np.zeros((capacity, obs_dim), np.float32)
        self.terminated = np.zeros((capacity,), np.float32)
        self.cursor = 0  # next slot to write
        self.size = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, observation, action, reward, next_observation, terminated) -> None:
        i = self.cursor
        self.observation[i] = observation
        self.action[i] = action
        self.reward[i] = reward
        self.next_observation[i] = next_observation
        self.terminated[i] = float(terminated)
        self.cursor = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def add_batch(self, observation, action, reward, next_observation, terminated) -> None:
        """Adds N transitions (one per vector-env copy), rows in order."""
        n = len(reward)
        idx = (self.cursor + np.arange(n)) % self.capacity
        self.observation[idx] = observation
        self.action[idx] = action
        self.reward[idx] = reward
        self.next_observation[idx] = next_observation
        self.terminated[idx] = np.asarray(terminated, np.float32)
        self.cursor = int((self.cursor + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, num_batches: int = 1) -> Dict[str, np.ndarray]:
        """Uniform samples with replacement, shaped [num_batches, batch_size, ...]."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = self.rng.integers(0, self.size, size=(num_batches, batch_size))
        return {
            "observation": self.observation[idx],
            "action": self.action[idx],
            "reward": self.reward[idx],
            "next_observation": self.next_observation[idx],
            "terminated": self.terminated[idx],
        }
