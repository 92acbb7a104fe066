"""TQC (Kuznetsov et al. 2020, arXiv:2005.04269): `n_quantiles` atoms per critic; the target
pools the target critics' atoms and drops the top `top_quantiles_to_drop_per_net` per
critic; the quantile Huber loss; the actor on the mean of all atoms."""

from __future__ import annotations

from tfsac.algorithm.variants.base import lazy_module, register
from tfsac.algorithm.variants.sac import SoftDoubleQ

losses = lazy_module("tfsac.algorithm.losses")


@register
class TQC(SoftDoubleQ):
    """Truncated quantile critics: [n_critics, B, n_quantiles] atoms per critic call."""

    name = "tqc"
    summary = "TQC: distributional critics with the top atoms dropped from the target"
    resume_keeps = ("n_quantiles",)
    reads = {"n_quantiles": (), "top_quantiles_to_drop_per_net": ()}
    peer = "tqc"

    @classmethod
    def check(cls, config):
        if config.top_quantiles_to_drop_per_net >= config.n_quantiles:
            return (
                f"top_quantiles_to_drop_per_net ({config.top_quantiles_to_drop_per_net}) must "
                f"be smaller than n_quantiles ({config.n_quantiles}): no atom would be left"
            )

    @classmethod
    def critic_outputs(cls, config) -> int:
        return config.n_quantiles

    @classmethod
    def peer_kwargs(cls, config):
        policy = {"n_quantiles": config.n_quantiles}
        return policy, {"top_quantiles_to_drop_per_net": config.top_quantiles_to_drop_per_net}

    def td_target(self, batch, reward, alpha, seed):
        next_quantiles, next_log_prob = self.next_values(batch, seed)
        return losses.truncated_quantile_target(
            reward,
            batch["terminated"],
            next_quantiles,
            next_log_prob,
            alpha,
            batch["discount"],
            self.sac.config.top_quantiles_to_drop_per_net,
        )

    def critic_loss(self, q, target):
        atoms, keep = target
        return losses.quantile_huber_loss(q, atoms, keep)

    def actor_loss(self, log_prob, q_pi, alpha):
        return losses.tqc_actor_loss(log_prob, q_pi, alpha)
