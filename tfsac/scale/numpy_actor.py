"""The built-in actors' forward pass in numpy: env runners act without importing TF (seconds and
hundreds of MB) or its per-call cost. A `numpy_plan()` lists layers in `get_weights()` order."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

# Weight arrays each layer of a plan takes, in get_weights() order.
ARRAYS = {
    "dense": 2,  # kernel, bias
    "dense_relu": 2,
    "batch_renorm": 5,  # gamma, beta, moving mean, moving variance, steps
    "layer_norm": 2,  # gamma, beta
    "normalize": 3,  # mean, variance, count
    "block:layer_norm": 2 + 4,  # the block's norm, then its two dense layers
    "block:batch_renorm": 5 + 4,
}


def _layer(kind: str, w: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
    if kind == "dense":
        return x @ w[0] + w[1]
    if kind == "dense_relu":
        return np.maximum(x @ w[0] + w[1], 0.0)
    if kind == "batch_renorm":  # BatchRenorm outside training: the moving statistics
        return (x - w[2]) / np.sqrt(w[3] + 1e-3) * w[0] + w[1]
    if kind == "layer_norm":
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w[0] + w[1]
    if kind == "normalize":  # tfsac.algorithm.layers.ObservationNormalizer, clipped as there
        return np.clip((x - w[0]) / np.sqrt(w[1] + 1e-8), -10.0, 10.0)
    norm = kind.split(":")[1]  # a residual block: x + Dense(ReLU(Dense(Norm(x))))
    k = ARRAYS[norm]
    hidden = _layer("dense_relu", w[k : k + 2], _layer(norm, w[:k], x))
    return x + _layer("dense", w[k + 2 : k + 4], hidden)


class NumpyActor:
    """The layers of `plan` -> (mean, log_std) heads, log_std clipped to `log_std_bounds`;
    samples tanh(mean + exp(log_std) * eps), eps ~ N(0, I), from its own numpy generator.
    `plan` may be the number of ReLU layers of the plain MLP."""

    def __init__(self, plan, log_std_bounds: Tuple[float, float], seed: int):
        self.plan = ["dense_relu"] * plan if isinstance(plan, int) else list(plan)
        self.log_std_bounds = log_std_bounds
        self.rng = np.random.default_rng(seed)
        self.weights: Optional[List[np.ndarray]] = None

    def set_weights(self, weights: Sequence[np.ndarray]) -> None:
        expected = sum(ARRAYS[kind] for kind in self.plan) + 4
        if len(weights) != expected:
            raise ValueError(f"expected {expected} weight arrays, got {len(weights)}")
        self.weights = [np.asarray(w, np.float32) for w in weights]

    def params(self, observation: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(mean, log_std) of the pre-tanh Gaussian for observations [B, obs_dim]."""
        w, at = self.weights, 0
        x = np.asarray(observation, np.float32)
        for kind in self.plan:
            x = _layer(kind, w[at : at + ARRAYS[kind]], x)
            at += ARRAYS[kind]
        mean = x @ w[at] + w[at + 1]
        low, high = self.log_std_bounds
        log_std = np.minimum(np.maximum(x @ w[at + 2] + w[at + 3], low), high)
        return mean, log_std

    def sample(self, observation: np.ndarray) -> np.ndarray:
        """Exploration actions in [-1, 1]^d, as the learner's GaussianExploration draws them."""
        mean, log_std = self.params(observation)
        eps = self.rng.standard_normal(mean.shape, dtype=np.float32)
        return np.tanh(mean + np.exp(log_std) * eps)
