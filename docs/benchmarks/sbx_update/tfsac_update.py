"""One tfsac SAC update on make_inputs.py's arrays, its two noise draws fixed to theirs.

python tfsac_update.py <inputs.npz> <out.npz> <Keras Adam epsilon>
"""

import sys

import keras
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

import tfsac.algorithm.sac as sac_module
from tfsac.algorithm.distributions import squash_bijector
from tfsac.config import SACConfig

tfd, tfb = tfp.distributions, tfp.bijectors
inputs = dict(np.load(sys.argv[1]))
adam_epsilon = float(sys.argv[3])
draws = [inputs["eps_next"], inputs["eps_pi"]]  # the critic step draws first


class FixedNormal(tfd.Normal):
    def _sample_n(self, n, seed=None):
        return tf.constant(draws.pop(0))[None]


def fixed_tanh_normal(loc, scale, low=None, high=None):
    """tfsac's tanh_normal with its standard-normal draw given."""
    base = tfd.Independent(FixedNormal(tf.zeros_like(loc), tf.ones_like(scale)), 1)
    move = tfb.Chain([tfb.Shift(loc), tfb.Scale(scale)])
    return tfd.TransformedDistribution(base, tfb.Chain([squash_bijector(low, high), move]))


def adam(*_):
    return keras.optimizers.Adam(3e-4, epsilon=adam_epsilon)


sac_module.tanh_normal = fixed_tanh_normal
sac_module.SAC.make_optimizer = adam
agent = sac_module.SAC(17, 6, SACConfig(learning_rate=3e-4, initial_alpha=0.3, seed=0))
agent.temperature.optimizer = adam()
agent.temperature.build()
layers = {
    "a0": agent.actor.trunk.layers[0],
    "a1": agent.actor.trunk.layers[1],
    "mean": agent.actor.mean,
    "log_std": agent.actor.log_std,
}
for prefix, critic in (("", agent.critic), ("t", agent.target_critic)):
    names = (f"{prefix}q0", f"{prefix}q1", f"{prefix}q2")
    layers.update(zip(names, [*critic.trunk.layers, critic.head], strict=True))
for name, layer in layers.items():
    layer.kernel.assign(inputs[f"{name}_k"])
    layer.bias.assign(inputs[f"{name}_b"].reshape(layer.bias.shape))
agent.temperature.log_alpha.assign(inputs["log_alpha"])
batch = {
    "observation": inputs["obs"],
    "action": inputs["action"],
    "reward": inputs["reward"],
    "next_observation": inputs["next_obs"],
    "terminated": inputs["terminated"],
    "discount": np.full(len(inputs["obs"]), 0.99, np.float32),
}
metrics = agent.update({k: tf.constant(v) for k, v in batch.items()})
assert not draws
out = {k: metrics[k].numpy() for k in ("critic_loss", "actor_loss", "alpha_loss")}
out["log_alpha"] = agent.temperature.log_alpha.numpy()
for name, layer in layers.items():
    out[f"{name}_k"] = layer.kernel.numpy()
    out[f"{name}_b"] = layer.bias.numpy().reshape(inputs[f"{name}_b"].shape)
np.savez(sys.argv[2], **out)
