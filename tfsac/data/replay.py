"""A preallocated, fixed-size replay buffer of transitions."""

from __future__ import annotations

from typing import Dict, Mapping, Tuple

import numpy as np

FIELDS = ("observation", "action", "reward", "next_observation", "terminated")
# One value per transition (the others are vectors).
SCALAR_FIELDS = ("reward", "terminated")


def transition_layout(obs_dim: int, action_dim: int) -> Tuple[Tuple[str, int], ...]:
    """(field, width) of each column block of a packed transition row, in FIELDS order.

    One row is [observation | action | reward | next_observation | terminated]; the
    learner's compiled update takes batches in this packed form (one tensor per call).
    """
    return (
        ("observation", obs_dim),
        ("action", action_dim),
        ("reward", 1),
        ("next_observation", obs_dim),
        ("terminated", 1),
    )


def pack_batch(batches: Mapping[str, np.ndarray]) -> np.ndarray:
    """Packs a dict of [..., width] (reward, terminated: [...]) arrays into one float32
    array [..., row width] in `transition_layout` order."""
    columns = []
    for name in FIELDS:
        value = np.asarray(batches[name], np.float32)
        columns.append(value[..., None] if name in SCALAR_FIELDS else value)
    return np.concatenate(columns, axis=-1)


class ReplayBuffer:
    """A ring buffer of (s, a, r, s', terminated), allocated once at full size.

    Transitions are rows of one float32 array (`storage`, laid out as
    `transition_layout`); `observation`, `action`, `reward`, `next_observation` and
    `terminated` are views of its columns. A sample is then one gather, and reaches the
    compiled update as one tensor. `next_observation` is stored explicitly (not taken from
    the following slot) so that a truncated episode keeps its true final observation for
    bootstrapping.
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, seed: int = 0):
        self.capacity = int(capacity)
        self.layout = transition_layout(obs_dim, action_dim)
        width = sum(w for _, w in self.layout)
        self.storage = np.zeros((self.capacity, width), np.float32)
        self._columns = {}
        start = 0
        for name, w in self.layout:
            # Scalar fields are 1-D views, vector fields 2-D views of the same rows.
            self._columns[name] = start if name in SCALAR_FIELDS else slice(start, start + w)
            start += w
        for name, column in self._columns.items():
            setattr(self, name, self.storage[:, column])
        self.cursor = 0  # next slot to write
        self.size = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, observation, action, reward, next_observation, terminated) -> None:
        """Adds one transition, or N in order (one per vector-env copy: every argument with a
        leading axis of N)."""
        if np.ndim(reward) == 0:
            observation, action, next_observation = (
                np.asarray(x)[None] for x in (observation, action, next_observation)
            )
            reward, terminated = [reward], [terminated]
        n = len(reward)
        idx = (self.cursor + np.arange(n)) % self.capacity
        self.observation[idx] = observation
        self.action[idx] = action
        self.reward[idx] = reward
        self.next_observation[idx] = next_observation
        self.terminated[idx] = np.asarray(terminated, np.float32)
        self.cursor = int((self.cursor + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample_packed(self, batch_size: int, num_batches: int = 1) -> np.ndarray:
        """Uniform samples with replacement as packed rows [num_batches, batch_size, width]
        (the form `SACLearner.update` takes fastest)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = self.rng.integers(0, self.size, size=(num_batches, batch_size))
        return self.storage[idx]

    def unpack(self, packed: np.ndarray) -> Dict[str, np.ndarray]:
        """Views of packed rows [..., width] by field."""
        return {name: packed[..., column] for name, column in self._columns.items()}

    def sample(self, batch_size: int, num_batches: int = 1) -> Dict[str, np.ndarray]:
        """Uniform samples with replacement by field, shaped [num_batches, batch_size, ...]."""
        return self.unpack(self.sample_packed(batch_size, num_batches))
