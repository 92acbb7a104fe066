"""The original SAC (arXiv:1801.01290, `--variant=v1`): the critics learn against a target
value network V', Polyak-averaged (Eq. 8), and V against the updated critics (Eq. 5)."""

from __future__ import annotations

from tfsac.algorithm.variants.base import lazy_module, register
from tfsac.algorithm.variants.sac import SoftDoubleQ

tf = lazy_module("tensorflow")
losses = lazy_module("tfsac.algorithm.losses")
networks = lazy_module("tfsac.algorithm.networks")
sac_step = lazy_module("tfsac.algorithm.sac")


@register
class SoftValue(SoftDoubleQ):
    """y = r + gamma (1 - terminated) V'(s'); after each critic step, V against
    min_i Q_i(s, a) - alpha log pi(a|s), a ~ pi(.|s)."""

    name = "sac_v1"
    summary = "the original SAC with a state-value network V and its target (arXiv:1801.01290)"
    has_target_critic = False  # its target is V'
    reads = {"value_learning_rate": ()}
    peer = None  # neither SB3 nor SBX has it
    metric_names = ("value_loss",)
    seeds_needed = 3  # as SAC, plus the V loss's action sample

    def __init__(self, sac, obs_dim: int):
        super().__init__(sac, obs_dim)
        sizes, normalizer = sac.config.critic_hidden_sizes, sac.obs_normalizer
        self.value = networks.ValueNetwork(sizes, normalizer, name="value")
        self.target_value = networks.ValueNetwork(sizes, normalizer, name="target_value")
        for model in (self.value, self.target_value):
            model(tf.zeros([3, obs_dim]))
        self.target_value.set_weights(self.value.get_weights())  # V' starts as a copy
        self.optimizer = sac.make_optimizer("value")  # the critics' kind (AdamW, beta_1)
        self.optimizer.build(self.value.trainable_variables)

    def checkpoint_objects(self):
        return {
            "value": self.value,
            "target_value": self.target_value,
            "value_optimizer": self.optimizer,
        }

    def optimizers(self):
        return {"value": self.optimizer}

    def trainable_variables(self):
        return [*self.value.trainable_variables, *self.target_value.trainable_variables]

    def polyak_pairs(self):
        return [(self.target_value, self.value)]

    def td_target(self, batch, reward, alpha, seed):
        next_v = self.target_value(batch["next_observation"])
        return losses.v1_q_target(reward, batch["terminated"], next_v, batch["discount"])

    def after_critic_step(self, obs, alpha, seeds):
        action, log_prob = self.sac.sample_with_log_prob(obs, seeds[:, 2])
        q_pi = self.sac.critic(obs, action, training=True)
        variables = self.value.trainable_variables
        with tf.GradientTape() as tape:
            loss = losses.value_loss(self.value(obs), q_pi, log_prob, alpha)
        sac_step.apply_gradients(self.optimizer, tape, loss, variables)
        return {"value_loss": loss}
