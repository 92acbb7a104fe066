"""n-step returns from the replay buffer's links (`ReplayBuffer.next_index`): a row links to
the row whose observation is its next observation, so following the links walks an episode
forward. The walk stops at a termination (nothing to bootstrap from), at a row whose next
observation is not the observation of a stored row (a truncation's true final observation,
or the newest step of an env stream), and after `n_steps` steps.

A link is made on bitwise equality of observations, whichever env copy the later row came
from; where two streams reach the same observation, the walk may continue along the other
one, a trajectory from the same state (n-step returns are off-policy either way, as in SBX
and SB3's n-step buffers).
"""

from __future__ import annotations

from typing import Tuple

import numpy as np


def n_step_returns(
    buffer, slots: np.ndarray, n_steps: int, gamma: float
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the transitions in `slots` (any shape) of `buffer` (a ReplayBuffer: its reward,
    terminated and next_index arrays and its capacity, which this module reads without
    importing it, as the buffer calls it): the discounted sum of their next m <= n
    rewards, sum_k gamma^k r_{t+k}, the slot of the m-th transition (its terminated flag and
    next observation close the target), and gamma^m, the discount of that bootstrap."""
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


def _continues(buffer, slots: np.ndarray) -> np.ndarray:
    """Whether the episode goes on past these transitions within the buffer."""
    return (buffer.terminated[slots] == 0.0) & (buffer.next_index[slots] < buffer.capacity)
