"""Reward normalisation by the running standard deviation of the discounted return (SB3's
VecNormalize `norm_reward`, SimbaV2's reward scaling): the replay keeps raw rewards, and
the update divides each batch's rewards by the current `divisor`. Scaling rewards by a
positive constant leaves the optimal policy unchanged, and keeps the critics' targets in
a similar range from task to task; the entropy term then weighs relatively more or less,
which the learned temperature follows. Returns are always logged and evaluated raw."""

from __future__ import annotations

from typing import Dict

import numpy as np

from tfsac.data.running_moments import combine_moments


class ReturnNormalizer:
    """Running (count, mean, variance) of the discounted returns G_t = gamma G_{t-1} + r_t
    of every collected step (each env copy's own, reset when its episode ends), as the
    collectors report them (`Transitions.discounted_return`)."""

    epsilon = 1e-8  # as SB3's VecNormalize

    def __init__(self):
        self.count, self.mean, self.variance = 0.0, 0.0, 1.0

    def update(self, discounted_returns: np.ndarray) -> None:
        """Folds a batch of discounted returns into the statistics."""
        batch = np.asarray(discounted_returns, np.float64).reshape(-1)
        if len(batch):
            old = (self.count, self.mean, self.variance)
            self.count, self.mean, self.variance = (
                float(x) for x in combine_moments(*old, len(batch), batch.mean(), batch.var())
            )

    @property
    def divisor(self) -> float:
        """sqrt(Var[G] + epsilon): what the update divides rewards by (1 before any data)."""
        return float(np.sqrt(self.variance + self.epsilon)) if self.count else 1.0

    def state(self) -> Dict[str, float]:
        return {"count": self.count, "mean": self.mean, "variance": self.variance}

    def load_state(self, state: Dict[str, float]) -> None:
        self.count, self.mean, self.variance = state["count"], state["mean"], state["variance"]
