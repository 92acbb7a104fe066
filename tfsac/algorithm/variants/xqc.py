"""XQC (Palenicek et al., ICLR 2026; the authors' xqc/agents/xqc/{critic,actor}.py): FlashSAC's
categorical critics and update on `network=xqc`. Unlike FlashSAC: rewards divided by std(G)
alone (the authors' RewardNormalizer), the entropy target -dim(A)/2, the critics'
cross-entropies summed, a policy delay of 3, no repeated exploration noise."""

from __future__ import annotations

import math

from tfsac.algorithm.variants.base import lazy_module, register
from tfsac.algorithm.variants.flashsac import FlashSAC

losses = lazy_module("tfsac.algorithm.losses")

# The std whose Gaussian has the entropy -1/2 per action dimension: log(2 pi e s^2) = -1,
# so target_std gives XQC's target -dim(A)/2.
HALF_NAT_STD = math.exp(-1.0) / math.sqrt(2.0 * math.pi)


@register
class XQC(FlashSAC):
    """FlashSAC's categorical twin critics and target critics, XQC's settings."""

    name = "xqc"
    summary = "XQC: categorical critics, batch norm before each ReLU, unit-norm layers (ICLR 2026)"

    @classmethod
    def defaults(cls, config):
        paper = {
            "policy_delay": 3,
            "critic_hidden_sizes": (512, 512, 512, 512),
            "network": "xqc",
            "normalize_rewards": True,
            "return_bound": 0.0,
            "target_std": HALF_NAT_STD if config.target_entropy is None else 0.0,
            "exploration_zeta": 0.0,
        }
        return {**super().defaults(config), **paper}

    @staticmethod
    def reward_factor(config) -> float:
        """Makes tfsac's division by (1 - gamma) std(G) (without `return_bound`) XQC's by std(G)."""
        return 1.0 - config.gamma if config.normalize_rewards and not config.return_bound else 1.0

    def critic_objective(self, batch, reward, alpha, seeds):
        reward = reward * self.reward_factor(self.sac.config)
        return super().critic_objective(batch, reward, alpha, seeds)

    def critic_loss(self, q, target):
        """Each critic's cross-entropy, summed over the critics (the authors' `loss.sum()`)."""
        return self.sac.config.num_critics * losses.categorical_loss(q, target)
