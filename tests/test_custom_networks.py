"""Custom Keras networks: the docs example trains, bad models are refused clearly."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import CUSTOM_NETWORKS_DOC, docs_example, random_batch

from tfsac import SACConfig, SACLearner, TfsacError, train


def test_docs_example_trains_checkpoints_and_exports(tmp_path, monkeypatch):
    code = docs_example()
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, CUSTOM_NETWORKS_DOC, "exec"), namespace)
    result = namespace["result"]
    assert result.summary["total_steps"] == 1000
    assert np.isfinite(result.summary["eval_return_mean"])
    assert result.learner.critic.q1.trainable_variables  # the user's model was used
    served = tf.saved_model.load(result.saved_model_path).signatures["serving_default"]
    action = served(observation=tf.zeros([4, 3]))["action"].numpy()
    assert action.shape == (4, 1) and np.all(np.abs(action) <= 2.0)
    assert os.listdir(tmp_path / "runs" / "custom" / "checkpoints")


def test_bad_actor_is_refused():
    def actor_fn(obs_dim, action_dim):
        return keras.Sequential([keras.layers.Dense(action_dim)])  # one output, not two

    with pytest.raises(TfsacError, match=r"actor must return \(mean, log_std\)"):
        SACLearner(3, 1, SACConfig(), actor_fn=actor_fn)


def test_a_custom_actor_with_simba_networks_is_refused_before_anything_is_written(tmp_path):
    def actor_fn(obs_dim, action_dim):
        raise AssertionError("never called: SimBa builds its own actor")

    run_dir = str(tmp_path / "run")
    config = SACConfig(network="simba", run_dir=run_dir, total_steps=10, learning_starts=5)
    with pytest.raises(TfsacError, match="network simba builds its own actor and critics"):
        train(config, actor_fn=actor_fn, quiet=True)
    assert not os.path.exists(tmp_path / "run")


def test_single_critic_is_refused():
    class One(keras.Model):
        def __init__(self):
            super().__init__()
            self.q = keras.layers.Dense(1)

        def call(self, observations, actions, training=None):
            return tf.transpose(self.q(tf.concat([observations, actions], -1)))  # [1, B]

    with pytest.raises(TfsacError, match=r"n_critics >= 2"):
        SACLearner(3, 1, SACConfig(), critic_fn=lambda o, a: One())


class _Critics(keras.Model):
    """`n` Q heads over [obs, action]: [n, batch]."""

    def __init__(self, n=2, dtype=None):
        super().__init__(dtype=dtype)
        self.q = keras.layers.Dense(n, dtype=dtype)

    def call(self, observations, actions, training=None):
        return tf.transpose(self.q(tf.concat([observations, actions], -1)))


def _actor(width=None, dtype=None):
    def actor_fn(obs_dim, action_dim):
        obs = keras.Input((width or obs_dim,))
        outputs = [keras.layers.Dense(action_dim, dtype=dtype)(obs) for _ in range(2)]
        return keras.Model(obs, outputs)

    return actor_fn


@pytest.mark.parametrize(
    "actor_fn, critic_fn, config, message",
    [
        # A closure over one model: the target would be the critic itself, tau a no-op.
        (None, "shared", {}, "returned the same model for the critic and its target"),
        (lambda o, a: lambda x: x, None, {}, "the actor must be a keras.Model, got function"),
        (None, lambda: lambda o, a: None, {}, "the critic must be a keras.Model, got NoneType"),
        (_actor(width=4), None, {}, r"the actor does not take inputs \[batch, 3\]: "),
        (_actor(dtype="float64"), None, {}, "the actor must compute in float32 .* float64"),
        (None, lambda: lambda o, a: _Critics(dtype="float64"), {}, "critic must compute in f"),
        (None, lambda: lambda o, a: _Critics(2), {"num_critics": 4}, "set num_critics=2"),
    ],
)
def test_custom_models_that_break_a_contract_are_refused_when_the_learner_is_made(
    actor_fn, critic_fn, config, message
):
    if critic_fn == "shared":
        shared = _Critics()
        critic_fn = lambda: lambda o, a: shared  # noqa: E731
    critic_fn = critic_fn and critic_fn()
    with pytest.raises(TfsacError, match=message):
        SACLearner(3, 1, SACConfig(**config), actor_fn=actor_fn, critic_fn=critic_fn)


def test_export_clips_a_custom_actors_log_std(tmp_path):
    from tfsac import EnvSpec, export_policy

    def actor_fn(obs_dim, action_dim):
        obs = keras.Input((obs_dim,))
        mean = keras.layers.Dense(action_dim)(obs)
        log_std = keras.layers.Lambda(lambda m: 0.0 * m + 200.0)(mean)  # exp overflows
        return keras.Model(obs, [mean, log_std])

    learner = SACLearner(3, 1, SACConfig(), actor_fn=actor_fn)
    spec = EnvSpec("Pendulum-v1", 3, 1, (-2.0,), (2.0,), "Box(3)", "Box(1)", "none")
    path = export_policy(learner.actor, spec, str(tmp_path), "m", {}, (-20.0, 2.0))
    sample = tf.saved_model.load(path).signatures["sample"]
    action = sample(observation=tf.ones([64, 3]))["action"].numpy()
    assert np.all(np.isfinite(action)) and np.all(np.abs(action) <= 2.0)
    # Unclipped, std = exp(200) = inf would pin every sample to a bound.
    assert np.mean(np.abs(action) < 2.0) > 0.3
    assert np.all(np.isfinite(learner.act(np.ones((64, 3), np.float32))))


def test_subclassed_actor_and_critic_overrides_are_what_trains():
    """lightning_baselines3's forward_actor/forward_critics overrides: subclass tfsac.Actor
    or tfsac.Critic, override `call`, and the learner uses the override."""
    from tfsac import Actor, Critic

    class BoundedMeanActor(Actor):
        def call(self, observations):
            mean, log_std = super().call(observations)
            return 0.5 * tf.tanh(mean), log_std

    class ShiftedCritic(Critic):
        def call(self, observations, actions, training=None):
            return super().call(observations, actions, training=training) - 1.0

    config = SACConfig(hidden_sizes=(16, 16), batch_size=8, jit_compile=False)
    learner = SACLearner(
        3,
        1,
        config,
        actor_fn=lambda o, a: BoundedMeanActor(a, config.hidden_sizes, name="actor"),
        critic_fn=lambda o, a: ShiftedCritic(2, config.hidden_sizes),
    )
    batch = random_batch(1, 8, 3, 1)
    obs, act = batch["observation"][0], batch["action"][0]
    q = learner.critic(obs, act).numpy()
    np.testing.assert_allclose(q, Critic.call(learner.critic, obs, act).numpy() - 1.0)
    # The squashed mean tanh(0.5 tanh(.)) stays inside tanh(0.5).
    assert np.all(np.abs(learner.act(100 * obs, deterministic=True)) <= np.tanh(0.5) + 1e-6)
    before = [v.numpy().copy() for v in learner.critic.trainable_variables]
    assert learner.update(batch)["finite"]
    after = [v.numpy() for v in learner.critic.trainable_variables]
    assert any(not np.allclose(b, a) for b, a in zip(before, after, strict=True))


def test_a_custom_critics_batch_norm_statistics_reach_its_target():
    """A reviewer's: the Polyak step averaged trainable variables only, so a custom critic's
    batch-norm moving statistics stayed at their initial values in its target (SB3 copies
    them, `batch_norm_stats`)."""

    class NormedCritics(keras.Model):
        def __init__(self):
            super().__init__()
            self.norm = keras.layers.BatchNormalization(momentum=0.5)
            self.q = keras.layers.Dense(2)

        def call(self, observations, actions, training=None):
            x = self.norm(tf.concat([observations, actions], -1), training=training)
            return tf.transpose(self.q(x))

    config = SACConfig(hidden_sizes=(8,), batch_size=8, jit_compile=False, tau=0.5)
    learner = SACLearner(3, 1, config, critic_fn=lambda o, a: NormedCritics())
    batch = random_batch(1, 8, 3, 1)
    batch["observation"] = batch["observation"] + 50.0  # statistics far from the initial 0, 1
    assert learner.update(batch)["finite"]
    online, target = learner.critic.norm, learner.target_critic.norm
    assert float(online.moving_mean[0]) > 10.0  # the critic's step moved them
    np.testing.assert_array_equal(target.moving_mean.numpy(), online.moving_mean.numpy())
    np.testing.assert_array_equal(target.moving_variance.numpy(), online.moving_variance.numpy())
    # Its parameters are averaged, as before: tau 0.5 of the way.
    assert not np.array_equal(learner.target_critic.q.kernel, learner.critic.q.kernel)
