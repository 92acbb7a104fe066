"""FlashSAC's networks (arXiv:2604.04539; the authors'
flash_rl/agents/flashSAC/network.py for the layer order): batch normalisation of the
input, a unit-norm linear embedding, inverted-residual blocks (tfsac.algorithm.unit_layers)
and an RMS normalisation before the heads. The critics' head gives `outputs` values per
member (a categorical critic's logits); the actor's log-std is squashed by tanh into its
bounds."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import keras
import tensorflow as tf

from tfsac.algorithm.layers import ActorFrame, EnsembleCritic
from tfsac.algorithm.unit_layers import InvertedResidualBlock, UnitBatchNorm, UnitDense, UnitRMSNorm


def _trunk(hidden_sizes: Sequence[int], ensemble: int) -> keras.Sequential:
    return keras.Sequential(
        [InvertedResidualBlock(h, ensemble, name=f"block_{i}") for i, h in enumerate(hidden_sizes)],
        name="blocks",
    )


class FlashActor(ActorFrame):
    """Observation -> (mean, log_std): BN, unit embedding of width hidden_sizes[0], one
    block per hidden size, RMSNorm, unit-norm heads with biases; log_std = lo + (hi - lo)
    (1 + tanh(raw)) / 2, FlashSAC's bounds [-10, 2] by default."""

    def __init__(
        self,
        action_dim: int,
        hidden_sizes: Sequence[int],
        log_std_bounds: Tuple[float, float] = (-10.0, 2.0),
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(action_dim, log_std_bounds, normalizer, **kw)
        self.input_norm = UnitBatchNorm(name="input_norm")
        self.embed = UnitDense(hidden_sizes[0], name="embed")
        self.blocks = _trunk(hidden_sizes, 0)
        self.out_norm = UnitRMSNorm(name="out_norm")
        self.mean = UnitDense(action_dim, use_bias=True, name="mean")
        self.log_std = UnitDense(action_dim, use_bias=True, name="log_std")

    def features(self, x, training):
        return self.out_norm(self.blocks(self.embed(x), training=training))

    def bound_log_std(self, log_std):
        low, high = self.log_std_bounds
        return low + (high - low) * 0.5 * (1.0 + tf.tanh(log_std))


class FlashCritic(EnsembleCritic):
    """The critic ensemble of FlashSAC members (EnsembleCritic's frame)."""

    def __init__(
        self,
        num_critics: int,
        hidden_sizes: Sequence[int],
        outputs: int = 1,
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(num_critics, outputs, normalizer, **kw)
        self.input_norm = UnitBatchNorm(name="input_norm")
        self.embed = UnitDense(hidden_sizes[0], num_critics, name="embed")
        self.blocks = _trunk(hidden_sizes, num_critics)
        self.out_norm = UnitRMSNorm(name="out_norm")
        self.head = UnitDense(outputs, num_critics, use_bias=True, name="q")

    def features(self, x, training, members):
        return self.out_norm(self.blocks(self.embed(x), training=training))
