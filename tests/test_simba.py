"""SimBa networks (Lee et al. 2025): the running observation normaliser on hand-computed
statistics, shared by the actor and the critics, fed by the collected observations only,
restored from checkpoints and inside the export (a served model takes raw observations)."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import random_batch

from tfsac import SACConfig, SACLearner, TfsacError
from tfsac.algorithm.layers import ObservationNormalizer
from tfsac.algorithm.resolve import resolve


def test_the_normaliser_keeps_the_mean_and_variance_of_everything_it_saw():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (n, 4)) for n in (1, 7, 50)]
    norm = ObservationNormalizer()
    norm(tf.zeros([1, 4]))
    # Before any update the normaliser is the identity.
    np.testing.assert_allclose(norm(tf.ones([2, 4])).numpy(), np.ones([2, 4]), rtol=1e-7)
    for batch in batches:
        norm.update(batch)
    seen = np.concatenate(batches)
    np.testing.assert_allclose(norm.mean.numpy(), seen.mean(0), rtol=1e-5)
    np.testing.assert_allclose(norm.variance.numpy(), seen.var(0), rtol=1e-5)
    assert norm.count.numpy() == 58
    x = rng.normal(size=(3, 4)).astype(np.float32)
    expected = (x - seen.mean(0)) / np.sqrt(seen.var(0) + 1e-8)
    np.testing.assert_allclose(norm(x).numpy(), expected, rtol=1e-4)
    # Hundreds of standard deviations away: clipped to 10 (SB3's clip_obs).
    far = np.array([[1e3, -1e3, 3.0 + 2.0 * 5, 3.0]], np.float32)
    got = norm(far).numpy()[0]
    assert got[0] == 10.0 and got[1] == -10.0 and got[2] < 10.0


def _simba(**kw):
    return SACConfig(network="simba", hidden_sizes=(16, 16), jit_compile=False, **kw)


def test_simba_networks_share_one_normaliser_which_updates_do_not_move():
    learner = SACLearner(3, 2, _simba())
    sac = learner.sac
    norm = sac.obs_normalizer
    assert learner.actor.normalizer is norm and learner.critic.normalizer is norm
    assert learner.target_critic.normalizer is norm
    assert sac.actor_optimizer.weight_decay == pytest.approx(1e-4)  # AdamW, as SBX's SimBa
    trainable = {
        id(v) for v in learner.actor.trainable_variables + learner.critic.trainable_variables
    }
    assert not {id(v) for v in norm.weights} & trainable
    rng = np.random.default_rng(0)
    sac.observe(rng.normal(5.0, 3.0, (100, 3)))
    stats = [v.numpy().copy() for v in norm.weights]
    assert learner.update(random_batch(1, 16, 3, 2))["finite"]
    learner.act(rng.normal(size=(4, 3)))
    for v, s in zip(norm.weights, stats, strict=True):
        np.testing.assert_array_equal(v.numpy(), s)


def test_the_actor_normalises_raw_observations_itself():
    learner = SACLearner(3, 2, _simba())
    rng = np.random.default_rng(1)
    learner.sac.observe(rng.normal([10.0, -4.0, 0.5], [5.0, 0.1, 2.0], (500, 3)))
    norm = learner.sac.obs_normalizer
    raw = rng.normal([10.0, -4.0, 0.5], [5.0, 0.1, 2.0], (6, 3)).astype(np.float32)
    scaled = (raw - norm.mean.numpy()) / np.sqrt(norm.variance.numpy() + 1e-8)
    # The same weights with the identity normaliser, fed the normalised observations.
    twin = SACLearner(3, 2, _simba())
    twin.actor.set_weights(learner.actor.get_weights())
    for v, value in zip(twin.sac.obs_normalizer.weights, (0.0, 1.0, 0.0), strict=True):
        v.assign(tf.fill(v.shape, value))
    np.testing.assert_allclose(
        learner.act(raw, deterministic=True), twin.act(scaled, deterministic=True), atol=1e-5
    )


# Without XLA (a debugging path) with -m slow: the same graph, another 10 s.
@pytest.mark.parametrize("jit", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_an_update_call_folds_new_observations_in_as_observe_does(jit):
    """The training loop hands each chunk's observations to the update call, which merges
    them (in float64, in the compiled call) before its gradient step: the same statistics
    and the same step as `observe` on the host, then the update."""
    rng = np.random.default_rng(3)
    config = SACConfig(network="simba", hidden_sizes=(16, 16), jit_compile=jit)
    host, in_call = SACLearner(3, 2, config), SACLearner(3, 2, config)
    for model in ("actor", "critic", "target_critic"):
        getattr(in_call, model).set_weights(getattr(host, model).get_weights())
    batch, act_obs = random_batch(1, 16, 3, 2), rng.normal(size=(1, 3))
    for new in (rng.normal(4.0, 3.0, (1, 3)), rng.normal(-1.0, 0.5, (5, 3))):
        host.sac.observe(new)
        expected, expected_action = host.update_and_act(batch, act_obs)
        metrics, action = in_call.update_and_act(batch, act_obs, observed=new)
        pairs = zip(
            in_call.sac.obs_normalizer.weights, host.sac.obs_normalizer.weights, strict=True
        )
        for v, w in pairs:
            np.testing.assert_allclose(v.numpy(), w.numpy(), rtol=1e-6)
        assert metrics == pytest.approx(expected, rel=1e-5)
        np.testing.assert_allclose(action, expected_action, atol=1e-5)
    # A call without new observations leaves the statistics as they are (the same
    # compiled call: no third compilation).
    stats = [v.numpy().copy() for v in in_call.sac.obs_normalizer.weights]
    assert in_call.update_and_act(batch, act_obs)[0]["finite"]
    for v, s in zip(in_call.sac.obs_normalizer.weights, stats, strict=True):
        np.testing.assert_array_equal(v.numpy(), s)
    assert in_call.sac.obs_normalizer.count.numpy() == 6


def test_simba_options_are_checked():
    with pytest.raises(TfsacError, match="hidden_sizes needs one width for every block"):
        resolve(SACConfig(network="simba", hidden_sizes=(64, 32)))
    with pytest.raises(TfsacError, match="leave critic_layer_norm and critic_dropout off"):
        resolve(SACConfig(network="simba", critic_dropout=0.01))
    assert SACConfig(network="simba", weight_decay="0").weight_decay == 0.0
