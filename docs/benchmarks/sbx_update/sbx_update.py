"""One SBX SAC update (critic, Polyak, actor, temperature, in SBX's order) on
make_inputs.py's arrays, its two noise draws fixed. Runs in ../shared/peers' SBX venv.

python sbx_update.py <inputs.npz> <out.npz> <optax Adam epsilon>
"""

import sys

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from sbx import SAC
from sbx.common.distributions import TanhTransformedDistribution

inputs = dict(np.load(sys.argv[1]))
draws = [jnp.asarray(inputs["eps_next"]), jnp.asarray(inputs["eps_pi"])]
ACTOR = ("a0", "a1", "mean", "log_std")
CRITIC = ("q0", "q1", "q2")


def fixed_sample(self, seed=None, **kw):
    """loc + scale * eps, the reparameterised draw TFP makes, with eps given."""
    base = self.distribution
    return self.bijector.forward(base.loc + base.scale.diag * draws.pop(0))


def dense(names, prefix=""):
    return {
        f"Dense_{i}": {
            "kernel": jnp.asarray(inputs[f"{prefix}{n}_k"]),
            "bias": jnp.asarray(inputs[f"{prefix}{n}_b"]),
        }
        for i, n in enumerate(names)
    }


def critic(prefix):
    return {"params": {"VmapContinuousCritic_0": dense(CRITIC, prefix)}}


TanhTransformedDistribution.sample = fixed_sample
kwargs = {"optimizer_kwargs": {"eps": float(sys.argv[3])}}
model = SAC("MlpPolicy", gym.make("Walker2d-v5"), learning_rate=3e-4, policy_kwargs=kwargs)
policy = model.policy
actor = {"params": dense(ACTOR)}
actor_state = policy.actor_state.replace(params=actor, opt_state=policy.actor_state.tx.init(actor))
qf = critic("")
qf_state = policy.qf_state.replace(
    params=qf, target_params=critic("t"), opt_state=policy.qf_state.tx.init(qf)
)
ent = {"log_ent_coef": jnp.asarray(inputs["log_alpha"])}
ent_state = model.ent_coef_state.replace(params=ent, opt_state=model.ent_coef_state.tx.init(ent))
discounts = np.full(len(inputs["obs"]), 0.99, np.float32)
qf_state, (critic_loss, _), key = SAC.update_critic(
    actor_state,
    qf_state,
    ent_state,
    inputs["obs"],
    inputs["action"],
    inputs["next_obs"],
    inputs["reward"],
    inputs["terminated"],
    discounts,
    jax.random.PRNGKey(0),
)
qf_state = SAC.soft_update(0.005, qf_state)
target_entropy = jnp.float32(model.target_entropy)
actor_state, qf_state, ent_state, actor_loss, alpha_loss, _ = SAC.update_actor_and_temperature(
    actor_state, qf_state, ent_state, inputs["obs"], target_entropy, key
)
assert not draws
out = {
    "critic_loss": critic_loss,
    "actor_loss": actor_loss,
    "alpha_loss": alpha_loss,
    "log_alpha": ent_state.params["log_ent_coef"],
}
trees = [("", actor_state.params["params"], ACTOR)]
for prefix, params in (("", qf_state.params), ("t", qf_state.target_params)):
    trees.append((prefix, params["params"]["VmapContinuousCritic_0"], CRITIC))
for prefix, tree, names in trees:
    for i, name in enumerate(names):
        out[f"{prefix}{name}_k"] = tree[f"Dense_{i}"]["kernel"]
        out[f"{prefix}{name}_b"] = tree[f"Dense_{i}"]["bias"]
np.savez(sys.argv[2], **{k: np.asarray(v) for k, v in out.items()})
