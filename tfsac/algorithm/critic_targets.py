"""What the critics learn against, and so how the critic and the actor losses read: soft
clipped double-Q from target critics (v2, the default), the target V network of the original
SAC (v1, arXiv:1801.01290), which also trains V, TQC's truncated pool of quantile atoms
(arXiv:2005.04269), or CrossQ's own critics on a joint batch (arXiv:1902.05605).
CRITIC_TARGETS holds them by the name `critic_target_name` gives a config; each owns what it
adds and names it for the checkpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List

import keras
import tensorflow as tf

from tfsac.algorithm import losses
from tfsac.algorithm.networks import build_value_networks
from tfsac.algorithm.steps import apply_gradients
from tfsac.config import SACConfig

if TYPE_CHECKING:
    from tfsac.algorithm.sac import SAC

# observation, action, reward, next_observation, terminated, discount (transition_layout)
Batch = Dict[str, tf.Tensor]


class CriticTarget:
    """What every critic target shares: nothing of its own to train or checkpoint, the
    critic loss of Eq. 5 and the actor loss of Eq. 7 (both on the critics' minimum)."""

    metric_names = ()

    def checkpoint_objects(self) -> Dict[str, tf.Module]:
        return {}  # the target critics are SAC's own (the actor's step reads no target)

    def optimizers(self) -> Dict[str, keras.optimizers.Optimizer]:
        return {}

    def trainable_variables(self) -> List[tf.Variable]:
        return []

    def after_critic_step(self, obs, alpha, seeds) -> Dict[str, tf.Tensor]:
        return {}

    def values_and_target(self, batch: Batch, reward, alpha, seed):
        """The critics' values at (s, a), for the gradient, and their TD target."""
        target = self.td_target(batch, reward, alpha, seed)
        return self.sac.critic(batch["observation"], batch["action"], training=True), target

    def actor_q(self, obs, action) -> tf.Tensor:
        """The critics' values the actor's loss reads (dropout on, as in training)."""
        return self.sac.critic(obs, action, training=True)

    def critic_loss(self, q, target) -> tf.Tensor:
        return losses.critic_loss(q, target)

    def actor_loss(self, log_prob, q_pi, alpha) -> tf.Tensor:
        return losses.actor_loss(log_prob, q_pi, alpha)


class SoftDoubleQTarget(CriticTarget):
    """v2: y = r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s')) with
    a' ~ pi(.|s') and Polyak-averaged target critics (Eqs. 2-3)."""

    seeds_needed = 2  # the next action's sample; the actor loss's sample

    def __init__(self, sac: SAC, obs_dim: int):
        self.sac = sac
        self.target_critic = sac.target_critic
        self.online, self.target = sac.critic, sac.target_critic

    def next_values(self, batch: Batch, seed):
        """The target critics' values at (s', a'), a' ~ pi(.|s'), and log pi(a'|s')."""
        next_obs = batch["next_observation"]
        next_action, next_log_prob = self.sac.sample_with_log_prob(next_obs, seed)
        return self.target_critic(next_obs, next_action, training=True), next_log_prob

    def td_target(self, batch: Batch, reward, alpha, seed) -> tf.Tensor:
        next_q, next_log_prob = self.next_values(batch, seed)
        return losses.soft_td_target(
            reward, batch["terminated"], next_q, next_log_prob, alpha, batch["discount"]
        )


class TruncatedQuantileTarget(SoftDoubleQTarget):
    """TQC (Kuznetsov et al. 2020, arXiv:2005.04269): the target critics' atoms at
    a' ~ pi(.|s') pooled, the top `top_quantiles_to_drop_per_net` per critic dropped
    (Eqs. 10-11), the quantile Huber loss (Eq. 12), and the actor on the mean of all
    atoms (Eq. 13). The critics return [n_critics, B, n_quantiles]."""

    def td_target(self, batch: Batch, reward, alpha, seed) -> tf.Tensor:
        next_quantiles, next_log_prob = self.next_values(batch, seed)
        cfg = self.sac.config
        return losses.truncated_quantile_target(
            reward,
            batch["terminated"],
            next_quantiles,
            next_log_prob,
            alpha,
            batch["discount"],
            cfg.top_quantiles_to_drop_per_net,
        )

    def critic_loss(self, q, target) -> tf.Tensor:
        atoms, keep = target
        return losses.quantile_huber_loss(q, atoms, keep)

    def actor_loss(self, log_prob, q_pi, alpha) -> tf.Tensor:
        return losses.tqc_actor_loss(log_prob, q_pi, alpha)


class ValueNetworkTarget(CriticTarget):
    """v1: y = r + gamma (1 - terminated) V'(s') from a Polyak-averaged target V network
    (arXiv:1801.01290, Eq. 8); V itself is trained after each critic step (Eq. 5)."""

    metric_names = ("value_loss",)
    seeds_needed = 3  # as v2, plus the V loss's action sample

    def __init__(self, sac: SAC, obs_dim: int):
        config = sac.config
        self.sac = sac
        self.value, self.target_value = build_value_networks(obs_dim, config)
        self.optimizer = keras.optimizers.Adam(
            config.rate("value"), global_clipnorm=config.max_grad_norm, name="value_adam"
        )
        self.optimizer.build(self.value.trainable_variables)
        self.online, self.target = self.value, self.target_value

    def checkpoint_objects(self) -> Dict[str, tf.Module]:
        return {
            "value": self.value,
            "target_value": self.target_value,
            "value_optimizer": self.optimizer,
        }

    def optimizers(self) -> Dict[str, keras.optimizers.Optimizer]:
        return {"value": self.optimizer}

    def trainable_variables(self) -> List[tf.Variable]:
        return [*self.value.trainable_variables, *self.target_value.trainable_variables]

    def td_target(self, batch: Batch, reward, alpha, seed) -> tf.Tensor:
        next_v = self.target_value(batch["next_observation"])
        return losses.v1_q_target(reward, batch["terminated"], next_v, batch["discount"])

    def after_critic_step(self, obs, alpha, seeds) -> Dict[str, tf.Tensor]:
        """V against min_i Q_i(s, a) - alpha log pi(a|s), a ~ pi(.|s), with the critics just
        updated (Eq. 5 of arXiv:1801.01290)."""
        action, log_prob = self.sac.sample_with_log_prob(obs, seeds[:, 2])
        q_pi = self.sac.critic(obs, action, training=True)
        variables = self.value.trainable_variables
        with tf.GradientTape() as tape:
            loss = losses.value_loss(self.value(obs), q_pi, log_prob, alpha)
        apply_gradients(self.optimizer, tape, loss, variables)
        return {"value_loss": loss}


class CrossQTarget(CriticTarget):
    """CrossQ (Bhatt et al. 2024, arXiv:1902.05605, Section 3): no target networks; the
    critics see (s, a) and (s', a'), a' ~ pi(.|s') from the actor's moving statistics, as
    one batch, so their batch renormalisation's statistics are those of the mixture, and
    y = r + gamma (1 - terminated) (min_i Q_i(s', a') - alpha log pi(a'|s')) without
    gradient. The actor's step reads the critics with their moving statistics."""

    seeds_needed = 2
    online = target = None  # nothing to Polyak-average

    def __init__(self, sac: SAC, obs_dim: int):
        self.sac = sac

    def trainable_variables(self) -> List[tf.Variable]:
        """The batch-norm statistics, which every update moves (for the finite check)."""
        return [
            v
            for model in (self.sac.actor, self.sac.critic)
            for v in model.non_trainable_variables
            if "moving" in v.path
        ]

    def values_and_target(self, batch: Batch, reward, alpha, seed):
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

    def actor_q(self, obs, action) -> tf.Tensor:
        return self.sac.critic(obs, action, training=False)


# By critic_target_name(config).
CRITIC_TARGETS = {
    "v2": SoftDoubleQTarget,
    "v1": ValueNetworkTarget,
    "tqc": TruncatedQuantileTarget,
    "crossq": CrossQTarget,
}


def critic_target_name(config: SACConfig) -> str:
    """TQC's or CrossQ's target for those algorithms (which need v2), else the variant's."""
    return config.variant if config.algorithm == "sac" else config.algorithm
