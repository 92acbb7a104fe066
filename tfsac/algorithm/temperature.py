"""The entropy temperature alpha, learned in log-alpha (the default) or alpha, or fixed
(TEMPERATURES, by `use_log_alpha`); equations of arXiv:1812.05905."""

from __future__ import annotations

import math
from typing import Dict

import keras
import tensorflow as tf

from tfsac.algorithm import losses
from tfsac.config import SACConfig


class Temperature:
    """Alpha learned in log-alpha (Eq. 18) or held fixed, still as exp(log_alpha) (the same
    float32 value); `variable` is what the alpha loss optimises."""

    def __init__(self, config: SACConfig, initial_alpha: float):
        self.learned = config.learned_alpha
        self.log_alpha = tf.Variable(
            math.log(initial_alpha), dtype=tf.float32, trainable=self.learned, name="log_alpha"
        )
        self.variable = self.log_alpha
        self.optimizer = keras.optimizers.Adam(config.rate("alpha"), name="alpha_adam")

    def build(self) -> None:
        """Creates the optimizer's slots (before the first trace and any checkpoint)."""
        self.optimizer.build([self.variable])

    def checkpoint_objects(self) -> Dict[str, tf.Module]:
        return {"alpha_optimizer": self.optimizer, "log_alpha": self.log_alpha}

    def optimizers(self) -> Dict[str, keras.optimizers.Optimizer]:
        return {"alpha": self.optimizer}

    def alpha(self) -> tf.Tensor:
        return tf.exp(self.log_alpha)

    def loss(self, log_prob, target_entropy) -> tf.Tensor:
        return losses.alpha_loss(self.log_alpha, log_prob, target_entropy)

    def step(self, log_prob, target_entropy) -> tf.Tensor:
        """One Adam step on the alpha loss when alpha is learned; returns the loss."""
        with tf.GradientTape() as tape:
            loss = self.loss(log_prob, target_entropy)
        if self.learned:
            self.optimizer.apply_gradients([(tape.gradient(loss, self.variable), self.variable)])
            self.after_step()
        return loss

    def after_step(self) -> None:
        pass


class DirectAlphaTemperature(Temperature):
    """Alpha learned in alpha itself (Eq. 18 as written), kept >= 1e-8 after each step."""

    def __init__(self, config: SACConfig, initial_alpha: float):
        super().__init__(config, initial_alpha)
        self.alpha_value = tf.Variable(
            initial_alpha, dtype=tf.float32, trainable=self.learned, name="alpha"
        )
        self.variable = self.alpha_value

    def checkpoint_objects(self) -> Dict[str, tf.Module]:
        return {**super().checkpoint_objects(), "alpha": self.alpha_value}

    def alpha(self) -> tf.Tensor:
        return self.alpha_value + 0.0  # a tensor, not the variable the step changes

    def loss(self, log_prob, target_entropy) -> tf.Tensor:
        return losses.alpha_loss_direct(self.alpha_value, log_prob, target_entropy)

    def after_step(self) -> None:
        self.alpha_value.assign(tf.maximum(self.alpha_value, 1e-8))


TEMPERATURES = {True: Temperature, False: DirectAlphaTemperature}  # by use_log_alpha
