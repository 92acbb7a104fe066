"""Reward normalisation by the running standard deviation of the discounted return (as
SB3's VecNormalize `norm_reward` and SimbaV2's reward scaling): the replay keeps raw
rewards, and the update divides each batch's rewards by the current `divisor`.

The divisor is (1 - gamma) std(G), not SB3's std(G): the returns then spread over the
effective horizon 1 / (1 - gamma) and a step's reward is of order 1, the scale that SAC's
temperature defaults (alpha from 1, target entropy -dim(A)) are made for. SB3's returns of
std 1 leave rewards of order 1 - gamma, against which alpha has to fall by about 1 / (1 -
gamma) before the rewards count: on Pendulum-v1 that did not happen within 20,000 steps
(docs/options.md). SB3's scale is this one with reward_scale = 1 - gamma. Scaling rewards
by a positive constant leaves the optimal policy unchanged. Returns are always logged and
evaluated raw."""

from __future__ import annotations

from typing import Dict

import numpy as np

from tfsac.data.running_moments import combine_moments


class ReturnNormalizer:
    """Running (count, mean, variance) of the discounted returns G_t = gamma G_{t-1} + r_t
    of every collected step (each env copy's own, reset when its episode ends), as the
    collectors report them (`Transitions.discounted_return`)."""

    epsilon = 1e-8  # as SB3's VecNormalize

    def __init__(self, gamma: float, bound: float = 0.0):
        self.horizon_factor = 1.0 - gamma  # 0 < 1 - gamma: the config's start checks
        self.bound = bound  # return_bound: 0 for tfsac's divisor
        self.count, self.mean, self.variance = 0.0, 0.0, 1.0
        self.max_abs = 0.0  # the largest |G| seen

    def update(self, discounted_returns: np.ndarray) -> None:
        """Folds a batch of discounted returns into the statistics."""
        batch = np.asarray(discounted_returns, np.float64).reshape(-1)
        if len(batch):
            old = (self.count, self.mean, self.variance)
            self.count, self.mean, self.variance = (
                float(x) for x in combine_moments(*old, len(batch), batch.mean(), batch.var())
            )
            self.max_abs = max(self.max_abs, float(np.abs(batch).max()))

    @property
    def divisor(self) -> float:
        """What the update divides rewards by (1 before any data): (1 - gamma) sqrt(Var[G] +
        epsilon), or with a `bound` FlashSAC's max(sqrt(Var[G] + epsilon), max|G| / bound)
        (arXiv:2604.04539), which keeps every return seen within [-bound, bound]: the range
        of a categorical critic's bins."""
        if not self.count:
            return 1.0
        std = float(np.sqrt(self.variance + self.epsilon))
        if self.bound:
            return max(std, self.max_abs / self.bound)
        return self.horizon_factor * std

    def state(self) -> Dict[str, float]:
        return {
            "count": self.count,
            "mean": self.mean,
            "variance": self.variance,
            "max_abs": self.max_abs,
        }

    def load_state(self, state: Dict[str, float]) -> None:
        self.count, self.mean, self.variance = state["count"], state["mean"], state["variance"]
        self.max_abs = state.get("max_abs", 0.0)  # absent in checkpoints without return_bound
