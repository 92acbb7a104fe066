"""Minibatches of recorded and online transitions: an exact share of every batch recorded, as
RLPD's symmetric sampling (Ball et al. 2023, arXiv:2302.02948), or the union uniformly."""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from tfsac.data.offline_data import RecordedData
from tfsac.data.replay import ReplayBuffer, n_step_returns, pack_batch, packed_width

STATE_KEY = "offline_data"  # in a checkpoint's state.json


class RecordedReplay:
    """Recorded transitions as packed rows, with n-step returns over their episodes."""

    def __init__(self, data: RecordedData, n_steps: int, gamma: float):
        self.data, self.n_steps, self.gamma = data, int(n_steps), float(gamma)
        self.size = self.capacity = len(data)  # and below: what n_step_returns reads
        self.reward, self.terminated = data.reward, data.terminated
        self.next_index = data.next_index

    def __len__(self) -> int:
        return self.size

    def packed(self, slots: np.ndarray) -> np.ndarray:
        """The transitions in `slots` (any shape) as packed rows [..., width]."""
        d, fields = self.data, {"reward": self.data.reward[slots]}
        last = slots
        if self.n_steps > 1:
            fields["reward"], last, fields["discount"] = n_step_returns(
                self, slots, self.n_steps, self.gamma
            )
        fields.update(observation=d.observation[slots], action=d.action[slots])
        fields.update(next_observation=d.next_observation[last], terminated=d.terminated[last])
        return pack_batch(fields, self.gamma)


class MixedReplay:
    """Samples packed batches with round(ratio * batch_size) rows from `recorded` and the
    rest from `online`, or with ratio None uniformly from both; stands for the replay."""

    def __init__(
        self, online: ReplayBuffer, recorded: RecordedReplay, ratio: Optional[float], seed: int
    ):
        self.online, self.recorded, self.ratio = online, recorded, ratio
        # Its own stream: the online buffer's draws stay those of a run without the data.
        self.rng = np.random.default_rng([seed, 1])

    def recorded_rows(self, batch_size: int) -> int:
        return int(round(self.ratio * batch_size))

    def sample_packed(self, batch_size: int, num_batches: int = 1) -> np.ndarray:
        shape = (num_batches, batch_size)
        if self.ratio is None:  # the union uniformly
            n = len(self.recorded)
            pick = self.rng.integers(0, n + len(self.online), shape)
            recorded = pick < n
            width = packed_width(self.online.obs_dim, self.online.action_dim)
            out = np.empty((*shape, width), np.float32)
            out[recorded] = self.recorded.packed(pick[recorded])
            out[~recorded] = self.online.packed(pick[~recorded] - n)
            return out
        k = self.recorded_rows(batch_size)
        parts = []
        if k:
            parts.append(
                self.recorded.packed(self.rng.integers(0, len(self.recorded), (num_batches, k)))
            )
        if batch_size - k:
            parts.append(self.online.sample_packed(batch_size - k, num_batches))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    def state(self) -> Dict:
        """The recorded data's reference and the sampling RNG, for a checkpoint."""
        reference = self.recorded.data.reference()
        return {STATE_KEY: {**reference, "rng": self.rng.bit_generator.state}}

    def load_state(self, state: Dict) -> None:
        """Takes back `state()`, whose data the start check found to be this one."""
        self.rng.bit_generator.state = state[STATE_KEY]["rng"]
