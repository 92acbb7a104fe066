"""Reward normalisation by (1 - gamma) std(discounted return), rewards of order 1 as SAC's
temperature defaults want (docs/options.md); and the running moments both normalisers use."""

from __future__ import annotations

from typing import Dict

import numpy as np


def combine_moments(count, mean, variance, n, batch_mean, batch_var):
    """The running (count, mean, variance) with a batch's (n, mean, variance) folded in (Chan
    et al.), numpy or TF alike; with count 0 the batch's own (the initial 1 is no data)."""
    total = count + n
    delta = batch_mean - mean
    new_mean = mean + delta * n / total
    new_var = (count * variance + n * batch_var + delta**2 * count * n / total) / total
    return total, new_mean, new_var


class ReturnNormalizer:
    """Running moments of each env copy's discounted return G_t = gamma G_{t-1} + r_t."""

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
        """(1 - gamma) std(G), or with a `bound` FlashSAC's max(std(G), max|G| / bound)
        (arXiv:2604.04539): every return within a categorical critic's bins."""
        if not self.count:
            return 1.0
        std = float(np.sqrt(self.variance + self.epsilon))
        if self.bound:
            return max(std, self.max_abs / self.bound)
        return self.horizon_factor * std

    def state(self) -> Dict[str, float]:
        return {name: getattr(self, name) for name in ("count", "mean", "variance", "max_abs")}

    def load_state(self, state: Dict[str, float]) -> None:
        self.count, self.mean, self.variance = state["count"], state["mean"], state["variance"]
        self.max_abs = state.get("max_abs", 0.0)  # absent in checkpoints without return_bound
