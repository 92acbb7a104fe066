"""Observation normalisation (normalize_observations, on by default with SimBa): a running
mean and std of the collected observations only, inside the actor and the critics, so in
every export (a served model takes raw observations) and in the env runners' numpy actor;
restored exactly from checkpoints."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import tiny_config

from tfsac import SACConfig, SACLearner, TfsacError, Trainer, train
from tfsac.algorithm.resolve import resolve
from tfsac.deploy.loading import load_policy

NORMALISED = {
    "mlp": dict(normalize_observations=True),
    "simba": dict(network="simba"),
    "crossq": dict(algorithm="crossq", normalize_observations=True, critic_hidden_sizes=(8,)),
}


def test_the_option_is_auto_by_architecture_and_takes_the_words_of_a_flag():
    assert resolve(SACConfig()).normalize_observations is False
    assert resolve(SACConfig(network="simba")).normalize_observations is True
    assert (
        resolve(SACConfig(network="simba", normalize_observations="false")).normalize_observations
        is False
    )
    assert SACConfig(normalize_observations="True").normalize_observations is True
    with pytest.raises(TfsacError, match="normalize_observations must be auto, true or false"):
        SACConfig(normalize_observations="maybe")
    with pytest.raises(TfsacError, match="use_sde has an actor of its own"):
        resolve(SACConfig(use_sde=True, normalize_observations=True))


def test_the_mlp_networks_share_one_normaliser_and_only_without_it_are_unchanged():
    plain = SACLearner(3, 1, SACConfig(hidden_sizes=(8,)))
    assert plain.sac.obs_normalizer is None and plain.actor.numpy_plan() == ["dense_relu"]
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(8,), normalize_observations=True))
    norm = learner.sac.obs_normalizer
    assert learner.actor.normalizer is norm and learner.critic.normalizer is norm
    assert learner.target_critic.normalizer is norm
    assert learner.actor.numpy_plan() == ["normalize", "dense_relu"]
    # Moved statistics change the actor's output for the same raw observation.
    obs = np.full((1, 3), 5.0, np.float32)
    before = learner.act(obs, deterministic=True)
    learner.observe(np.random.default_rng(0).normal(5.0, 2.0, (100, 3)))
    assert norm.count.numpy() == 100
    assert not np.allclose(learner.act(obs, deterministic=True), before)


# CrossQ's with -m slow: its normaliser is the MLP's, ahead of the batch renormalisation
# (whose numpy twin tests/test_numpy_actor.py checks).
@pytest.mark.parametrize(
    "options",
    [pytest.param(n, marks=pytest.mark.slow) if n == "crossq" else n for n in sorted(NORMALISED)],
)
def test_a_run_normalises_what_it_collects_exports_and_resumes_it(tmp_path, options):
    options = NORMALISED[options]
    config = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=20, **options)
    result = train(config)
    norm = result.learner.sac.obs_normalizer
    assert norm.count.numpy() == 40  # every collected step's observation, warm-up included
    seen = result.buffer.next_observation[:40]  # what each env step returned
    np.testing.assert_allclose(norm.mean.numpy(), seen.mean(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(norm.variance.numpy(), seen.var(0), rtol=1e-4, atol=1e-4)
    # The export takes raw observations: the normaliser is inside it.
    obs = np.random.default_rng(2).normal([0.0, 0.0, 0.0], [1.0, 1.0, 4.0], (5, 3))
    served = load_policy(result.saved_model_path).signatures["serving_default"]
    action = served(observation=tf.constant(obs, tf.float32))["action"].numpy()
    np.testing.assert_allclose(action, 2.0 * result.learner.act(obs, deterministic=True), atol=1e-5)
    # A resumed run starts from the checkpointed statistics.
    again = SACConfig.from_dict({**config.to_dict(), "total_steps": 60})
    restored = Trainer(again, resume=True).learner.sac.obs_normalizer
    for v, saved in zip(restored.weights, norm.weights, strict=True):
        np.testing.assert_array_equal(v.numpy(), saved.numpy())
