"""CrossQ (Bhatt et al. 2024, arXiv:1902.05605, Section 3): no target networks; batch
renormalisation in the critics and actor; the critics see (s, a) and (s', a') as one batch
(their statistics the mixture's); the paper's policy delay 3, Adam beta_1 0.5, 2048 units."""

from __future__ import annotations

from tfsac.algorithm.variants.base import lazy_module, register
from tfsac.algorithm.variants.sac import SoftDoubleQ

tf = lazy_module("tensorflow")
losses = lazy_module("tfsac.algorithm.losses")


@register
class CrossQ(SoftDoubleQ):
    """The soft clipped double-Q target from the critics themselves, without gradient; the
    actor's step reads them with their moving statistics."""

    name = "crossq"
    summary = "CrossQ: batch-renormalised critics without target networks"
    has_target_critic = False
    reads = {"batch_norm_momentum": (), "renorm_warmup_steps": ()}
    peer = "crossq"

    @classmethod
    def defaults(cls, config):
        paper = {"policy_delay": 3, "adam_beta1": 0.5, "critic_hidden_sizes": (2048, 2048)}
        return {**super().defaults(config), **paper}

    @classmethod
    def check(cls, config):
        if config.use_sde:
            return "algorithm crossq does not take use_sde (its actor is batch-normed)"
        return None

    @classmethod
    def batch_norm(cls, config):
        return {"momentum": config.batch_norm_momentum, "warmup_steps": config.renorm_warmup_steps}

    @classmethod
    def peer_kwargs(cls, config):
        policy = {"batch_norm_momentum": config.batch_norm_momentum}
        return policy, {"policy_delay": config.policy_delay}

    def values_and_target(self, batch, reward, alpha, seed):
        obs, next_obs = batch["observation"], batch["next_observation"]
        next_action, next_log_prob = self.sac.sample_with_log_prob(next_obs, seed)
        joint = self.sac.critic(
            tf.concat([obs, next_obs], 0),
            tf.concat([batch["action"], next_action], 0),
            training=True,
        )
        q, next_q = tf.split(joint, 2, axis=1)
        target = losses.soft_td_target(
            reward, batch["terminated"], next_q, next_log_prob, alpha, batch["discount"]
        )
        return q, tf.stop_gradient(target)

    def actor_q(self, obs, action):
        return self.sac.critic(obs, action, training=False)
