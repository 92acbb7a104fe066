"""n-step returns walked along the replay's links (`ReplayBuffer.next_index`), stopping at
a termination, at a next observation no stored row holds, and after n steps. Where two
streams reach the same observation the walk may go on along the other: off-policy either
way, as in SBX and SB3."""

from __future__ import annotations

from typing import Protocol, Tuple

import numpy as np


class EpisodeLinks(Protocol):
    """What the walk reads of a replay buffer (tfsac.data.replay.ReplayBuffer)."""

    reward: np.ndarray
    terminated: np.ndarray
    next_index: np.ndarray  # the row whose observation is this row's next one; capacity: none
    capacity: int


def n_step_returns(
    buffer: EpisodeLinks, slots: np.ndarray, n_steps: int, gamma: float
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the transitions in `slots`: sum_k gamma^k r_{t+k} over their next m <= n rewards,
    the slot of the m-th transition (whose flag and next observation close the target), and
    gamma^m."""
    slots = np.asarray(slots)
    total = buffer.reward[slots].astype(np.float64)
    last = slots.copy()
    discount = np.full(slots.shape, gamma)
    going = _continues(buffer, last)
    for k in range(1, n_steps):
        if not going.any():
            break
        following = np.where(going, buffer.next_index[last], last)
        total += np.where(going, gamma**k * buffer.reward[following], 0.0)
        discount = np.where(going, gamma ** (k + 1), discount)
        last = following
        going &= _continues(buffer, last)
    return total.astype(np.float32), last, discount.astype(np.float32)


def _continues(buffer: EpisodeLinks, slots: np.ndarray) -> np.ndarray:
    """Whether the episode goes on past these transitions within the buffer."""
    return (buffer.terminated[slots] == 0.0) & (buffer.next_index[slots] < buffer.capacity)
