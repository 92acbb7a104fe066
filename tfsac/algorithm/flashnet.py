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

from tfsac.algorithm.layers import check_no_members
from tfsac.algorithm.unit_layers import InvertedResidualBlock, UnitBatchNorm, UnitDense, UnitRMSNorm


def _trunk(hidden_sizes: Sequence[int], ensemble: int) -> keras.Sequential:
    return keras.Sequential(
        [InvertedResidualBlock(h, ensemble, name=f"block_{i}") for i, h in enumerate(hidden_sizes)],
        name="blocks",
    )


class FlashActor(keras.Model):
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
        super().__init__(**kw)
        self.normalizer = normalizer
        self.action_dim, self.log_std_bounds = action_dim, log_std_bounds
        self.input_norm = UnitBatchNorm(name="input_norm")
        self.embed = UnitDense(hidden_sizes[0], name="embed")
        self.blocks = _trunk(hidden_sizes, 0)
        self.out_norm = UnitRMSNorm(name="out_norm")
        self.mean = UnitDense(action_dim, use_bias=True, name="mean")
        self.log_std = UnitDense(action_dim, use_bias=True, name="log_std")

    def numpy_plan(self):
        """None: env runners act with this actor through TF (tfsac.scale.runners)."""
        return None

    def call(self, observations, training=None):
        x = observations if self.normalizer is None else self.normalizer(observations)
        x = self.embed(self.input_norm(x, training=training))
        x = self.out_norm(self.blocks(x, training=training))
        low, high = self.log_std_bounds
        log_std = low + (high - low) * 0.5 * (1.0 + tf.tanh(self.log_std(x)))
        return self.mean(x), log_std


class FlashCritic(keras.Model):
    """The critic ensemble of FlashSAC members: [n, B] values, or [n, B, outputs] (the
    categorical critic's logits). Each member batch-normalises (s, a) on its own."""

    def __init__(
        self,
        num_critics: int,
        hidden_sizes: Sequence[int],
        outputs: int = 1,
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(**kw)
        self.num_critics, self.outputs = num_critics, outputs
        self.normalizer = normalizer
        self.input_norm = UnitBatchNorm(name="input_norm")
        self.embed = UnitDense(hidden_sizes[0], num_critics, name="embed")
        self.blocks = _trunk(hidden_sizes, num_critics)
        self.out_norm = UnitRMSNorm(name="out_norm")
        self.head = UnitDense(outputs, num_critics, use_bias=True, name="q")

    def call(self, observations, actions, training=None, members=None):
        check_no_members(members)
        if self.normalizer is not None:
            observations = self.normalizer(observations)
        x = tf.concat([observations, actions], axis=-1)
        x = self.input_norm(tf.tile(x[None], [self.num_critics, 1, 1]), training=training)
        x = self.out_norm(self.blocks(self.embed(x), training=training))
        q = self.head(x)
        return tf.squeeze(q, axis=-1) if self.outputs == 1 else q
