"""FlashSAC (arXiv:2604.04539; the authors' flash_rl/agents/flashSAC/update.py): categorical
critics (`n_bins` on [-bin_range, bin_range]) trained by cross-entropy to the projected soft
target, on `network=flashsac`. Its other parts are options it turns on when 'auto':
`normalize_rewards`, `return_bound`, `target_std` and `exploration_zeta`. As the authors'
update, the critics see (s, a) and (s', a') as one batch (batch norms on the mixture)."""

from __future__ import annotations

from tfsac.algorithm.variants.base import lazy_module, register
from tfsac.algorithm.variants.sac import SoftDoubleQ

tf = lazy_module("tensorflow")
losses = lazy_module("tfsac.algorithm.losses")


@register
class FlashSAC(SoftDoubleQ):
    """Categorical twin critics with targets: the lowest target critic's distribution at a',
    shifted and projected; the actor on the minimum of the critics' expected values."""

    name = "flashsac"
    summary = "FlashSAC: categorical critics on unit-norm inverted-residual blocks (2604.04539)"
    resume_keeps = ("n_bins", "bin_range")
    reads = {"n_bins": (), "bin_range": ()}

    @classmethod
    def defaults(cls, config):
        paper = {
            "policy_delay": 2,
            "critic_hidden_sizes": (256, 256),
            "network": "flashsac",
            "normalize_rewards": True,
            # The returns are kept within the bins (the authors' normalized_G_max).
            "return_bound": config.bin_range if config.normalize_rewards is not False else 0.0,
            "target_std": 0.15 if config.target_entropy is None else 0.0,
            "exploration_zeta": 0.0 if config.use_sde else 2.0,
        }
        return {**super().defaults(config), **paper}

    @classmethod
    def critic_outputs(cls, config) -> int:
        return config.n_bins

    def __init__(self, sac, obs_dim: int):
        super().__init__(sac, obs_dim)
        self.bins = tf.linspace(-sac.config.bin_range, sac.config.bin_range, sac.config.n_bins)

    def critic_objective(self, batch, reward, alpha, seeds):
        logits, target = self.values_and_target(batch, reward, alpha, seeds[:, 0])
        return self.critic_loss(logits, target), losses.categorical_value(logits, self.bins), {}

    def values_and_target(self, batch, reward, alpha, seed):
        next_obs = batch["next_observation"]
        next_action, next_log_prob = self.sac.sample_with_log_prob(next_obs, seed)
        obs = tf.concat([batch["observation"], next_obs], 0)
        action = tf.concat([batch["action"], next_action], 0)
        _, next_logits = tf.split(self.sac.target_critic(obs, action, training=True), 2, axis=1)
        target = losses.categorical_td_target(
            reward,
            batch["terminated"],
            next_logits,
            next_log_prob,
            alpha,
            batch["discount"],
            self.bins,
        )
        logits, _ = tf.split(self.sac.critic(obs, action, training=True), 2, axis=1)
        return logits, target

    def critic_loss(self, q, target):
        return losses.categorical_loss(q, target)

    def actor_q(self, obs, action):
        return losses.categorical_value(self.sac.critic(obs, action, training=False), self.bins)

    def actor_loss(self, log_prob, q_pi, alpha):
        return losses.actor_loss(log_prob, q_pi, alpha)
