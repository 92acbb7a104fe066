"""SAC (arXiv:1812.05905), the default: twin critics with Polyak-averaged targets, the soft
clipped double-Q target and losses. RLPD's and REDQ's large-ensemble changes are options of
this rule: `target_subset`, `actor_q` (the critics' mean) and `backup_entropy`."""

from __future__ import annotations

from tfsac.algorithm.variants.base import Variant, lazy_module, register

losses = lazy_module("tfsac.algorithm.losses")


@register
class SoftDoubleQ(Variant):
    """y = r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s')), a' ~ pi(.|s')."""

    name = "sac"
    summary = "SAC: twin critics with target critics (arXiv:1812.05905)"
    peer = "sac"
    reads = {
        "target_subset": ("values_and_target", "td_target"),
        "backup_entropy": ("values_and_target", "td_target"),
        "actor_q": ("actor_loss",),
    }

    @classmethod
    def check(cls, config):
        if config.target_subset > config.num_critics:
            return (
                f"target_subset ({config.target_subset}) is larger than num_critics "
                f"({config.num_critics})"
            )

    def next_values(self, batch, seed, members=None):
        """The target critics' (or `members`') values at (s', a' ~ pi(.|s')), and log pi(a'|s')."""
        next_obs = batch["next_observation"]
        next_action, next_log_prob = self.sac.sample_with_log_prob(next_obs, seed)
        subset = {} if members is None else {"members": members}  # custom critics need not
        next_q = self.sac.target_critic(next_obs, next_action, training=True, **subset)
        return next_q, next_log_prob

    def td_target(self, batch, reward, alpha, seed):
        cfg = self.sac.config
        members = None
        if cfg.target_subset and cfg.target_subset < cfg.num_critics:
            # RLPD's code evaluates only the drawn target critics: a fifth of an update's
            # work at 2 of 10.
            members = losses.random_subset(cfg.num_critics, cfg.target_subset, seed)
        next_q, next_log_prob = self.next_values(batch, seed, members)
        if not cfg.backup_entropy:
            alpha = 0.0  # RLPD (arXiv:2302.02948) on sparse tasks: no entropy in the target
        return losses.soft_td_target(
            reward, batch["terminated"], next_q, next_log_prob, alpha, batch["discount"]
        )

    def values_and_target(self, batch, reward, alpha, seed):
        target = self.td_target(batch, reward, alpha, seed)
        return self.sac.critic(batch["observation"], batch["action"], training=True), target

    def critic_loss(self, q, target):
        return losses.critic_loss(q, target)

    def actor_loss(self, log_prob, q_pi, alpha):
        if self.sac.config.actor_q == "mean":
            return losses.actor_loss_on_mean(log_prob, q_pi, alpha)
        return losses.actor_loss(log_prob, q_pi, alpha)
