"""The built-in actor's forward pass in numpy, for env runners: a runner then acts without
importing TensorFlow (seconds and hundreds of MB per process) and without TF's per-call cost
(~100 µs a call against ~15 µs here at batch 1).

It takes the weights in the order `tfsac.Actor.get_weights()` gives them (each hidden
layer's kernel and bias, then the mean head's, then the log-std head's), which is what the
learner sends the runners. tests/test_runners_numpy.py checks it against the Keras actor to
1e-5 for every hidden-layer shape. A custom `actor_fn` has no numpy twin: its runners act
with TensorFlow.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np


class NumpyActor:
    """Relu MLP trunk -> (mean, log_std) heads, log_std clipped to `log_std_bounds`; samples
    tanh(mean + exp(log_std) * eps), eps ~ N(0, I), from its own numpy generator."""

    def __init__(self, hidden_layers: int, log_std_bounds: Tuple[float, float], seed: int):
        self.hidden_layers = hidden_layers
        self.log_std_bounds = log_std_bounds
        self.rng = np.random.default_rng(seed)
        self.weights: Optional[List[np.ndarray]] = None

    def set_weights(self, weights: Sequence[np.ndarray]) -> None:
        expected = 2 * self.hidden_layers + 4
        if len(weights) != expected:
            raise ValueError(f"expected {expected} weight arrays, got {len(weights)}")
        self.weights = [np.asarray(w, np.float32) for w in weights]

    def params(self, observation: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(mean, log_std) of the pre-tanh Gaussian for observations [B, obs_dim]."""
        w = self.weights
        x = np.asarray(observation, np.float32)
        for i in range(self.hidden_layers):
            x = np.maximum(x @ w[2 * i] + w[2 * i + 1], 0.0)
        k = 2 * self.hidden_layers
        mean = x @ w[k] + w[k + 1]
        log_std = np.clip(x @ w[k + 2] + w[k + 3], *self.log_std_bounds)
        return mean, log_std

    def sample(self, observation: np.ndarray) -> np.ndarray:
        """Exploration actions in [-1, 1]^d, as the learner's GaussianExploration draws them."""
        mean, log_std = self.params(observation)
        eps = self.rng.standard_normal(mean.shape, dtype=np.float32)
        return np.tanh(mean + np.exp(log_std) * eps)
