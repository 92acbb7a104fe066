"""A new algorithm is one class, written and registered here without touching tfsac/: a SAC
whose critic rule averages its critics instead of taking their minimum. It trains, its
target is the one it declares (checked by hand), it checkpoints and resumes, exports every
format, acts through env runners, and refuses what it does not read."""

import ast
import dataclasses
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from conftest import random_batch, tiny_config

from tfsac import Policy, SACLearner, TfsacError, train
from tfsac.algorithm import losses
from tfsac.algorithm.distributions import tanh_normal
from tfsac.algorithm.network_checks import unsaved_variables
from tfsac.algorithm.resolve import resolve
from tfsac.algorithm.variants import VARIANTS, register
from tfsac.algorithm.variants.sac import SoftDoubleQ


class MeanQ(SoftDoubleQ):
    """y = r + gamma (1 - terminated) (mean_i Q'_i(s', a') - alpha log pi(a'|s')); the actor
    maximises the critics' mean."""

    name = "mean_q"
    summary = "SAC on the mean of its critics"
    peer = None

    def td_target(self, batch, reward, alpha, seed):
        next_q, next_log_prob = self.next_values(batch, seed)
        mean = tf.reduce_mean(next_q, axis=0, keepdims=True)  # one 'critic': min is itself
        return losses.soft_td_target(
            reward, batch["terminated"], mean, next_log_prob, alpha, batch["discount"]
        )

    def actor_loss(self, log_prob, q_pi, alpha):
        return losses.actor_loss(log_prob, tf.reduce_mean(q_pi, axis=0, keepdims=True), alpha)


@pytest.fixture(autouse=True, scope="module")
def _registered():
    """MeanQ is selectable while this module's tests run (`register` is what a user's
    module calls, usually as a class decorator); other modules see the built-ins only."""
    register(MeanQ)
    yield
    del VARIANTS[MeanQ.name]


def _config(tmp_path, **overrides):
    settings = dict(
        algorithm="mean_q",
        total_steps=200,
        learning_starts=100,
        batch_size=32,
        hidden_sizes=(16,),
        eval_every=100,
        checkpoint_every=100,
        log_every=100,
    )
    return tiny_config(tmp_path, "Pendulum-v1", **{**settings, **overrides})


def test_the_registered_variant_is_selectable_and_its_target_is_the_mean(tmp_path):
    assert VARIANTS["mean_q"] is MeanQ
    config = resolve(_config(tmp_path))
    learner = SACLearner(3, 1, config)
    assert isinstance(learner.sac.variant, MeanQ)
    # Constant target critics (zero kernels, head biases 3 and 5): the mean is 4, not 3.
    for v in learner.target_critic.variables:
        v.assign(tf.zeros_like(v))
    learner.target_critic.head.bias.assign([[[3.0]], [[5.0]]])
    batch = {
        "next_observation": tf.zeros([2, 3]),
        "terminated": tf.constant([0.0, 1.0]),
        "discount": tf.constant([0.5, 0.5]),
    }
    alpha = tf.constant(0.0)
    seed = tf.constant([0, 0])
    target = learner.sac.variant.td_target(batch, tf.constant([1.0, 2.0]), alpha, seed)
    np.testing.assert_allclose(target.numpy(), [1.0 + 0.5 * 4.0, 2.0])


def test_a_new_variant_trains_checkpoints_resumes_and_exports_every_format(tmp_path):
    first = train(_config(tmp_path, export=False), quiet=True)
    assert first.summary["total_steps"] == 200
    assert first.learner.update_count == 100
    resumed = train(
        _config(tmp_path, total_steps=300, export_formats="saved_model,tflite,onnx"),
        resume=True,
        quiet=True,
    )
    assert resumed.summary["resumed_from"].endswith("ckpt-200")
    assert resumed.learner.update_count == 200  # 100 before the checkpoint, 100 after
    assert np.isfinite(resumed.summary["eval_return_mean"])
    files = set(os.listdir(resumed.saved_model_path))
    assert {"saved_model.pb", "policy.tflite", "policy.onnx"} <= files
    for path in (resumed.saved_model_path, resumed.run_dir):  # the export, the checkpoint
        action = Policy.load(path).predict(np.zeros(3, np.float32))
        assert action.shape == (1,) and -2.0 <= action[0] <= 2.0
    # Another algorithm may not resume its checkpoints.
    with pytest.raises(TfsacError, match="algorithm='sac' differs from the resumed run's"):
        train(_config(tmp_path, algorithm="sac", total_steps=400), resume=True, quiet=True)


@pytest.mark.slow
def test_a_new_variant_acts_through_env_runners(tmp_path, ray_address):
    config = _config(
        tmp_path, num_actors=2, chunk_steps=32, total_steps=320, learning_starts=64, export=False
    )
    result = train(config, quiet=True)
    assert result.summary["total_steps"] == 320
    assert result.learner.update_count == 320 - 64
    assert isinstance(result.learner.sac.variant, MeanQ)


def test_a_new_variant_refuses_the_options_of_others(tmp_path):
    with pytest.raises(TfsacError, match="algorithm mean_q does not read n_quantiles"):
        resolve(_config(tmp_path, n_quantiles=7))


def test_a_variant_that_replaces_what_reads_sacs_options_refuses_them(tmp_path):
    """MeanQ replaces td_target and actor_loss, which read target_subset, backup_entropy and
    actor_q: set, they would change nothing. Declared again in its reads, they pass."""
    refused = dict(target_subset=1, backup_entropy=False, actor_q="mean")
    for name, value in refused.items():
        with pytest.raises(TfsacError, match=f"algorithm mean_q does not read {name}"):
            resolve(_config(tmp_path, **{name: value}))

    class MeanQSubset(MeanQ):
        name = "mean_q_subset"
        reads = {"target_subset": ("td_target",)}  # its td_target reads it (here: pretends to)

    register(MeanQSubset)
    try:
        assert resolve(_config(tmp_path, algorithm="mean_q_subset", target_subset=1))
        with pytest.raises(TfsacError, match="mean_q_subset does not read actor_q"):
            resolve(_config(tmp_path, algorithm="mean_q_subset", actor_q="mean"))
    finally:
        del VARIANTS[MeanQSubset.name]


def test_the_polyak_options_are_read_where_there_are_targets_to_average(tmp_path):
    """Without target critics nothing is Polyak-averaged (tau refused), unless the variant
    averages targets of its own (v1's V'); its subclass reads them as it does."""

    class NoTargets(MeanQ):
        name = "no_targets"
        has_target_critic = False

    class OwnTargets(NoTargets):
        name = "own_targets"

        def polyak_pairs(self):
            return []  # here: pretends to average targets of its own

    for cls in (NoTargets, OwnTargets):
        register(cls)
    try:
        for name, value in (("tau", 0.01), ("target_update_interval", 2)):
            with pytest.raises(TfsacError, match=f"algorithm no_targets does not read {name}"):
                resolve(_config(tmp_path, algorithm="no_targets", **{name: value}))
            assert resolve(_config(tmp_path, algorithm="own_targets", **{name: value}))
            assert resolve(_config(tmp_path, algorithm="sac_v1", **{name: value}))
    finally:
        for cls in (NoTargets, OwnTargets):
            del VARIANTS[cls.name]


class ScaledQ(SoftDoubleQ):
    """SAC with the TD target's rewards scaled by its own hyperparameter, and a metric of its
    own: what a variant in a user's file declares without any config field."""

    name = "scaled_q"
    peer = None
    hyperparameters = {"scale": 1.0, "report": True}
    metric_names = ("scale",)

    def td_target(self, batch, reward, alpha, seed):
        return super().td_target(batch, self.kwargs["scale"] * reward, alpha, seed)

    def after_critic_step(self, obs, alpha, seeds):
        return {"scale": tf.constant(self.kwargs["scale"], tf.float32)}


@pytest.fixture
def scaled_q():
    register(ScaledQ)
    yield ScaledQ
    del VARIANTS[ScaledQ.name]


def test_a_variants_hyperparameters_are_set_by_algorithm_kwargs_and_checked(tmp_path, scaled_q):
    config = resolve(_config(tmp_path, algorithm="scaled_q", algorithm_kwargs='{"scale": 3}'))
    assert config.algorithm_kwargs == {"scale": 3, "report": True}  # defaults filled in
    assert resolve(config) == config
    learner = SACLearner(3, 1, config)
    assert learner.sac.variant.kwargs["scale"] == 3
    for v in learner.target_critic.variables:  # Q' = 0: the target is the scaled reward
        v.assign(tf.zeros_like(v))
    batch = {
        "next_observation": tf.zeros([2, 3]),
        "terminated": tf.constant([1.0, 1.0]),
        "discount": tf.constant([0.5, 0.5]),
    }
    target = learner.sac.variant.td_target(batch, tf.constant([1.0, 2.0]), 0.0, tf.constant([0, 0]))
    np.testing.assert_allclose(target.numpy(), [3.0, 6.0])
    bad = {
        '{"scales": 2}': "algorithm scaled_q has no hyperparameter 'scales' .its "
        "hyperparameters: report, scale.",
        '{"scale": "2"}': "scale of algorithm scaled_q must be a number like its default 1.0",
        '{"report": 1}': "report of algorithm scaled_q must be true or false",
        '{"scale": true}': "scale of algorithm scaled_q must be a number",
        '{"scale": NaN}': r"must be a number like its default 1.0 .finite., got nan",
        '{"scale": 1, "scale": 2}': "is not valid JSON .the key 'scale' appears twice",
        "[1]": "algorithm_kwargs must be a JSON object",
    }
    for text, message in bad.items():
        with pytest.raises(TfsacError, match=message):
            resolve(_config(tmp_path, algorithm="scaled_q", algorithm_kwargs=text))
    with pytest.raises(TfsacError, match="algorithm sac has no hyperparameter 'scale' .its "):
        resolve(_config(tmp_path, algorithm="sac", algorithm_kwargs={"scale": 2.0}))


def test_a_run_resumes_after_its_variant_declares_another_hyperparameter(tmp_path, scaled_q):
    """A tester's: a hyperparameter added to the class (its default filled in) made the
    saved run's algorithm_kwargs differ, and no resume could continue it."""
    import glob
    import json

    config = _config(tmp_path, algorithm="scaled_q", algorithm_kwargs={"scale": 2.0})
    train(dataclasses.replace(config, export=False), quiet=True)
    saved = [os.path.join(config.run_dir, "config.json")]
    saved += glob.glob(os.path.join(config.run_dir, "checkpoints", "*.extra", "state.json"))
    for path in saved:  # as the run was saved before the class declared 'report'
        with open(path) as f:
            data = json.load(f)
        (data.get("config") or data)["algorithm_kwargs"] = {"scale": 2.0}
        with open(path, "w") as f:
            json.dump(data, f)
    longer = dataclasses.replace(config, total_steps=300, export=False)
    assert train(longer, resume=True, quiet=True).summary["total_steps"] == 300
    with pytest.raises(TfsacError, match="algorithm_kwargs=.* differs from the resumed run"):
        train(
            dataclasses.replace(longer, total_steps=400, algorithm_kwargs={"scale": 3.0}),
            resume=True,
            quiet=True,
        )


def test_a_variants_metric_is_reported_and_one_it_does_not_declare_is_refused(tmp_path, scaled_q):
    result = train(_config(tmp_path, algorithm="scaled_q", export=False), quiet=True)
    with open(os.path.join(result.run_dir, "progress.csv")) as f:
        assert "scale" in f.readline().strip().split(",")

    class Undeclared(ScaledQ):
        name = "undeclared"
        metric_names = ()

    register(Undeclared)
    try:
        learner = SACLearner(3, 1, resolve(_config(tmp_path, algorithm="undeclared")))
        with pytest.raises(TfsacError, match=r"returns metrics \['scale'\], its metric_names") as e:
            learner.update(random_batch(1, 32, 3, 1))  # traced at the first call
        assert "\n" not in str(e.value)  # not AutoGraph's frames of "user code" too
    finally:
        del VARIANTS[Undeclared.name]


class BehaviourCloned(SoftDoubleQ):
    """SAC whose actor loss adds a behaviour-cloning term on the batch's actions (as TD3+BC,
    arXiv:2106.06860, adds one to TD3's) and reports it: a loss that reads the batch."""

    name = "sac_bc"
    peer = None
    hyperparameters = {"bc_weight": 2.0}
    actor_metric_names = ("bc_loss",)

    def actor_objective(self, batch, action, log_prob, alpha, seeds):
        loss, _ = super().actor_objective(batch, action, log_prob, alpha, seeds)
        bc = tf.reduce_mean(tf.reduce_sum(tf.square(action - batch["action"]), axis=-1))
        return loss + self.kwargs["bc_weight"] * bc, {"bc_loss": bc}


def test_an_actor_loss_reads_the_batch_and_reports_a_metric_held_between_actor_steps(tmp_path):
    register(BehaviourCloned)
    try:
        config = resolve(_config(tmp_path, algorithm="sac_bc", policy_delay=2))
        learner = SACLearner(3, 1, config)
        for v in learner.critic.variables:  # Q = 0: the loss is alpha log pi + 2 * BC
            v.assign(tf.zeros_like(v))
        batch = {"observation": tf.zeros([2, 3]), "action": tf.constant([[0.5], [-1.0]])}
        loss, metrics = learner.sac.variant.actor_objective(
            batch,
            tf.constant([[0.0], [0.0]]),
            tf.constant([1.0, 3.0]),
            tf.constant(0.5),
            tf.zeros([2, 2], tf.int32),
        )
        # BC: mean(0.25, 1.0) = 0.625; alpha log pi: 0.5 * mean(1, 3) = 1.0.
        np.testing.assert_allclose(metrics["bc_loss"].numpy(), 0.625)
        np.testing.assert_allclose(loss.numpy(), 1.0 + 2.0 * 0.625)
        assert learner.metric_names[-1] == "bc_loss"
        reported = [learner.update(random_batch(1, 32, 3, 1, seed=i))["bc_loss"] for i in range(4)]
        # The actor steps after critic steps 2 and 4; the others report the last one's
        # BC loss again (none yet: 0).
        assert reported[0] == 0 < reported[1] == reported[2] != reported[3] and reported[1] < 4
        # It wraps SAC's objective (super()): it reads actor_q still (a reviewer's).
        assert resolve(_config(tmp_path, algorithm="sac_bc", actor_q="mean")).actor_q == "mean"
    finally:
        del VARIANTS[BehaviourCloned.name]

    class Undeclared(BehaviourCloned):
        name = "undeclared_actor_metric"
        actor_metric_names = ()

    register(Undeclared)
    try:
        learner = SACLearner(3, 1, resolve(_config(tmp_path, algorithm=Undeclared.name)))
        message = r"actor_objective returns metrics \['bc_loss'\], its actor_metric_names"
        with pytest.raises(TfsacError, match=message) as e:
            learner.update(random_batch(1, 32, 3, 1))
        assert "\n" not in str(e.value)
    finally:
        del VARIANTS[Undeclared.name]

    class Shaped(BehaviourCloned):  # a metric per row, not reduced
        name = "shaped_actor_metric"

        def actor_objective(self, batch, action, log_prob, alpha, seeds):
            loss, metrics = super().actor_objective(batch, action, log_prob, alpha, seeds)
            return loss, {"bc_loss": tf.square(action - batch["action"])}

    class Unreduced(BehaviourCloned):  # a loss per row (a reviewer's: 6-14 lines of TF)
        name = "unreduced_actor_loss"

        def actor_objective(self, batch, action, log_prob, alpha, seeds):
            loss, metrics = super().actor_objective(batch, action, log_prob, alpha, seeds)
            return loss + tf.square(action[:, 0] - batch["action"][:, 0]), metrics

    for cls, message in (
        (Shaped, r"metric 'bc_loss' has shape \(None, 1\): a metric"),
        (Unreduced, r"actor_objective's loss has shape \(None,\): a loss is a scalar"),
    ):
        register(cls)
        try:
            learner = SACLearner(3, 1, resolve(_config(tmp_path, algorithm=cls.name)))
            with pytest.raises(TfsacError, match=message):
                learner.update(random_batch(1, 32, 3, 1))
        finally:
            del VARIANTS[cls.name]
    with pytest.raises(ValueError, match="the metric 'actor_loss' is named twice"):
        register(
            type(
                "Twice",
                (BehaviourCloned,),
                {"name": "twice", "actor_metric_names": ("actor_loss",)},
            )
        )


class Penalised(SoftDoubleQ):
    """A critic loss with a term of its own on the critics at random actions (CQL's kind,
    arXiv:2006.04779, without its log-sum-exp), from a random draw of its own, reported."""

    name = "penalised"
    peer = None
    seeds_needed = 3
    metric_names = ("penalty",)

    def critic_objective(self, batch, reward, alpha, seeds):
        loss, q, _ = super().critic_objective(batch, reward, alpha, seeds)
        obs = batch["observation"]
        shape = [tf.shape(obs)[0], self.sac.action_dim]
        actions = tf.random.stateless_uniform(shape, seeds[:, 2], -1.0, 1.0)
        penalty = tf.reduce_mean(self.sac.critic(obs, actions, training=True))
        return loss + penalty, q, {"penalty": penalty}


def test_a_critic_loss_of_its_own_reads_the_batch_its_seeds_and_reports(tmp_path):
    register(Penalised)
    try:
        learner = SACLearner(3, 1, resolve(_config(tmp_path, algorithm="penalised")))
        for v in learner.critic.variables:  # constant critics: Q_1 = 3, Q_2 = 5
            v.assign(tf.zeros_like(v))
        learner.critic.head.bias.assign([[[3.0]], [[5.0]]])
        metrics = learner.update(random_batch(1, 32, 3, 1))
        assert metrics["penalty"] == 4.0  # their mean, before the step changed them
        assert learner.metric_names[-1] == "penalty"
        # The policy's log-density of given (recorded) actions, finite at the bounds, and
        # its deterministic action (what AWAC- and IQL-style losses read).
        obs = tf.constant(random_batch(1, 3, 3, 1)["observation"][0])
        log_prob = learner.sac.log_prob(obs, tf.constant([[1.0], [-1.0], [0.25]])).numpy()
        assert np.isfinite(log_prob).all()
        loc, log_std = learner.actor(obs)
        expected = tanh_normal(loc, tf.exp(log_std)).log_prob(tf.constant([[0.25]] * 3))
        np.testing.assert_allclose(log_prob[2], expected.numpy()[2], rtol=1e-5)
        mean = learner.sac.mean_action(obs).numpy()
        np.testing.assert_allclose(mean, learner.act(obs.numpy(), deterministic=True), atol=1e-6)
    finally:
        del VARIANTS[Penalised.name]


def test_init_from_carries_a_variants_networks_not_its_optimizers_or_random_streams(tmp_path):
    """What a run learned is told from its course by what the objects are, not by their
    names: a variant's optimizer and random stream under names of its own stay behind."""

    class OwnState(MeanQ):
        name = "own_state"

        def __init__(self, sac, obs_dim):
            super().__init__(sac, obs_dim)
            self.net = tf.keras.Sequential([tf.keras.layers.Dense(1)])
            self.net.build((None, obs_dim))
            self.adam = tf.keras.optimizers.Adam()
            self.adam.build(self.net.trainable_variables)
            self.rng = tf.random.Generator.from_seed(1)

        def checkpoint_objects(self):
            return {"my_net": self.net, "my_adam": self.adam, "my_rng": self.rng}

        def optimizers(self):
            return {"own": self.adam}

    register(OwnState)
    try:
        learner = SACLearner(3, 1, resolve(_config(tmp_path, algorithm="own_state")))
        learned = learner.learned_objects()
        assert "my_net" in learned and "actor" in learned and "critic" in learned
        assert not {"my_adam", "my_rng", "update_rng", "actor_optimizer"} & set(learned)
    finally:
        del VARIANTS[OwnState.name]


class AuxModel(MeanQ):
    """A network and an optimizer of its own beside the critics (a reward model trained
    each update at its own rate), a metric, and a third random draw."""

    name = "aux_model"
    metric_names = ("reward_model_loss",)
    seeds_needed = 3
    hyperparameters = {"model_rate": 0.003}

    def __init__(self, sac, obs_dim):
        super().__init__(sac, obs_dim)
        self.model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        self.model.build((None, obs_dim))
        self.adam = tf.keras.optimizers.Adam(self.kwargs["model_rate"])
        self.adam.build(self.model.trainable_variables)

    def checkpoint_objects(self):
        return {"reward_model": self.model, "reward_model_adam": self.adam}

    def optimizers(self):
        return {"reward_model": self.adam}

    def trainable_variables(self):
        return self.model.trainable_variables

    def after_critic_step(self, obs, alpha, seeds):
        noise = tf.random.stateless_normal(tf.shape(obs), seeds[:, 2], stddev=0.01)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.model(obs + noise)))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.adam.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
        return {"reward_model_loss": loss}


@pytest.fixture
def aux_model():
    register(AuxModel)
    yield AuxModel
    del VARIANTS[AuxModel.name]


def test_a_variants_own_optimizer_keeps_its_rate_under_a_schedule_and_resumes(
    tmp_path, aux_model, capfd
):
    config = dict(algorithm="aux_model", lr_schedule="linear", export=False)
    first = train(_config(tmp_path, **config), quiet=False)
    adam = first.learner.sac.variant.adam
    # Its own rate, scaled as SAC's are: at step 200 of 200, linear's factor is 0.
    assert first.learner.sac.base_rates["reward_model"] == pytest.approx(0.003)
    assert float(adam.learning_rate) == 0.0 and int(adam.iterations) == 100
    kernel = first.learner.sac.variant.model.get_weights()[0]
    line = next(x for x in capfd.readouterr().err.splitlines() if " step 200/200 " in x)
    assert " | critic_loss " in line and " | reward_model_loss " in line  # its metric shown
    resumed = train(_config(tmp_path, **dict(config, total_steps=300)), resume=True, quiet=True)
    variant = resumed.learner.sac.variant
    assert int(variant.adam.iterations) == 200  # restored, then 100 more
    assert not np.array_equal(variant.model.get_weights()[0], kernel)
    assert float(variant.adam.learning_rate) == 0.0  # 0.003 x linear's 0 at the end


def test_a_variants_optimizers_keep_their_rates_and_checkpoint_objects_may_be_nested(
    tmp_path, aux_model
):
    """A reviewer's: an optimizer named 'value' (not v1's) took the config's rate; one made
    with a Keras schedule failed at every resume; lists and Keras variables among the
    checkpoint objects (as tf.train.Checkpoint takes them) crashed the completeness check."""

    class Named(AuxModel):
        name = "named_value"

        def __init__(self, sac, obs_dim):
            super().__init__(sac, obs_dim)
            decay = tf.keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
            self.scheduled = tf.keras.optimizers.Adam(decay)
            self.scheduled.build([])
            self.scale = tf.keras.Variable(1.0)
            self.holder = tf.Module()
            self.holder.offset = tf.keras.Variable(0.0)  # not in the module's `variables`

        def checkpoint_objects(self):
            adams = {"a": self.adam, "s": self.scheduled}
            objects = {"models": [self.model], "adams": adams, "scale": self.scale}
            return {**objects, "holder": self.holder}

        def trainable_variables(self):
            return [*super().trainable_variables(), self.scale, self.holder.offset]

        def optimizers(self):
            return {"value": self.adam, "scheduled": self.scheduled}

    register(Named)
    try:
        config = resolve(
            _config(tmp_path, algorithm="named_value", algorithm_kwargs='{"model_rate": 1}')
        )
        assert config.algorithm_kwargs == {"model_rate": 1.0}  # a float, as its default
        assert isinstance(config.algorithm_kwargs["model_rate"], float)
        learner = SACLearner(3, 1, config)
        assert learner.sac.base_rates["value"] == 1.0 and "scheduled" not in learner.sac.base_rates
        learner.set_learning_rate_factor(0.5)  # what a resume and --lr_schedule call
        assert float(learner.sac.variant.adam.learning_rate) == 0.5
        assert unsaved_variables(learner) == []
    finally:
        del VARIANTS[Named.name]


def test_a_variants_mistakes_are_one_line_each(tmp_path, aux_model):
    class Clash(AuxModel):
        name = "clash"

        def optimizers(self):
            return {"critic": self.adam}

    class Unsaved(AuxModel):
        name = "unsaved"

        def checkpoint_objects(self):
            return {}

    class OptimizerUnsaved(AuxModel):  # an offline-RL tester's: its resume diverged
        name = "optimizer_unsaved"

        def checkpoint_objects(self):
            return {"reward_model": self.model}

    class Unbuilt(AuxModel):  # an offline-RL tester's: every resume failed, misleadingly
        name = "unbuilt"

        def __init__(self, sac, obs_dim):
            super().__init__(sac, obs_dim)
            self.adam = tf.keras.optimizers.Adam(self.kwargs["model_rate"])

    class FewSeeds(AuxModel):
        name = "few_seeds"
        seeds_needed = 2

    class ReadsKwargs(AuxModel):
        name = "reads_kwargs"

        @classmethod
        def check(cls, config):
            cls.kwargs["model_rate"]  # noqa: B018 - an instance's attribute, not the class's

    mistakes = {
        Clash: "algorithm clash: its optimizers.. names 'critic', SAC's own optimizer",
        Unsaved: "cannot checkpoint this run: no checkpoint object holds .*dense.*/kernel",
        OptimizerUnsaved: "no checkpoint object holds .*adam.* list the variant's networks "
        "and optimizers",
        Unbuilt: "algorithm unbuilt: its optimizer 'reward_model' is not built: call its "
        "build.<the variables it trains>. in __init__",
        FewSeeds: r"few_seeds: its update raised .*out of bounds.*: if it reads seeds "
        r"past seeds\[:, 1\], declare a larger seeds_needed .now 2",
        ReadsKwargs: "algorithm reads_kwargs: its check raised AttributeError: .*"
        "kwargs.*test_new_variant.py, line",
    }
    for cls, message in mistakes.items():
        register(cls)
        try:
            config = _config(tmp_path, name=cls.name, algorithm=cls.name)
            with pytest.raises(TfsacError, match=message) as e:
                train(config, export=False)
            assert "\n" not in str(e.value) and "in user code" not in str(e.value)
            # Before anything is written: the update's are found when it is traced at the
            # start (they were at the first update, after learning_starts and config.json).
            assert not os.path.exists(os.path.join(config.run_dir, "config.json")), cls
        finally:
            del VARIANTS[cls.name]


@pytest.mark.parametrize(
    "declaration, message",
    [
        ({"reads": {"beta": ()}}, "reads names 'beta', which is not a config option"),
        ({"reads": ("tau",)}, "reads must be a dict of option names to tuples of method names"),
        ({"reads": {"tau": "td_target"}}, "reads must be a dict of option names to tuples of"),
        ({"resume_keeps": "n_quantiles"}, "resume_keeps must be a tuple of option names"),
        ({"resume_keeps": ("n_quantile",)}, "resume_keeps names 'n_quantile'"),
        ({"hyperparameters": {"beta": object()}}, "hyperparameters must be a dict of names"),
        ({"hyperparameters": {"beta": float("nan")}}, "hyperparameters must be a dict of names"),
        ({"hyperparameters": {"sizes": (32, 32)}}, "JSON values .* not tuples"),
        ({"hyperparameters": {"tau": 0.1}}, "hyperparameter 'tau' is a config option"),
        ({"reads": {"tau": ("td_targt",)}}, "reads names 'td_targt' for tau, which is no method"),
    ],
)
def test_register_refuses_declarations_that_name_no_option(declaration, message):
    cls = type("Bad", (SoftDoubleQ,), {"name": "bad", **declaration})
    with pytest.raises(ValueError, match=message):
        register(cls)
    assert "bad" not in VARIANTS


def test_no_code_outside_the_algorithm_layer_compares_with_a_variant_name():
    """What differs between variants (and architectures) is declared by them: code outside
    tfsac/algorithm/ asks them, never compares an option with their names."""
    from conftest import REPO_ROOT

    from tfsac.algorithm.architectures import ARCHITECTURES
    from tfsac.algorithm.resolve import VARIANT_ALIASES

    names = set(VARIANTS) | set(ARCHITECTURES) | set(VARIANT_ALIASES)
    root = pathlib.Path(REPO_ROOT)
    paths = [*(root / "tfsac").rglob("*.py"), *(root / "scripts").rglob("*.py")]
    found = []
    for path in paths:
        if (root / "tfsac" / "algorithm") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            for side in (node.left, *node.comparators):
                for leaf in ast.walk(side):
                    if isinstance(leaf, ast.Constant) and leaf.value in names:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {leaf.value!r}")
    assert not found, "\n".join(found)
