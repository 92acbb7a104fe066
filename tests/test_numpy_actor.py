"""Env runners act with the built-in actor's forward pass in numpy (tfsac.scale.numpy_actor):
the same (mean, log_std) as the Keras actor to 1e-5 for every actor tfsac ships (MLPs of
several shapes, CrossQ's, SimBa's), actions in
bounds from the right distribution, and a runner that never imports TensorFlow."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import REPO_ROOT

from tfsac import SACConfig
from tfsac.algorithm.networks import build_actor
from tfsac.scale.numpy_actor import NumpyActor

ACTORS = {
    "mlp 8": dict(hidden_sizes=(8,)),
    "mlp 256,256": dict(hidden_sizes=(256, 256)),
    "mlp 64,32,16": dict(hidden_sizes=(64, 32, 16)),
    "crossq": dict(algorithm="crossq", hidden_sizes=(64, 32)),
    "simba": dict(network="simba", hidden_sizes=(32, 32)),
    "simba crossq": dict(network="simba", algorithm="crossq", hidden_sizes=(32,)),
    "mlp normalized": dict(hidden_sizes=(32, 16), normalize_observations=True),
    "crossq normalized": dict(algorithm="crossq", hidden_sizes=(16,), normalize_observations=True),
    "simba unnormalized": dict(network="simba", hidden_sizes=(32,), normalize_observations=False),
}


@pytest.mark.parametrize("network", ["mlp", "simba"])
def test_an_actor_subclass_with_a_call_of_its_own_has_no_numpy_plan(network):
    """Env runners would run the base class's layers in numpy on the subclass's weights:
    the plan is None, so they act through TF (an actor that only adds to __init__ keeps it)."""
    base = type(build_actor(3, 1, SACConfig(network=network, hidden_sizes=(8,))))

    class Doubled(base):
        def call(self, observations, training=None):
            mean, log_std = super().call(observations, training=training)
            return 2.0 * mean, log_std

    class Squashed(base):  # its own hidden features, through the built-in frame's call
        def features(self, x, training):
            return tf.tanh(super().features(x, training))

    class Named(base):
        pass

    kwargs = dict(action_dim=1, hidden_sizes=(8,))
    if network == "simba":
        kwargs["normalizer"] = None
    assert Doubled(**kwargs).numpy_plan() is None
    assert Squashed(**kwargs).numpy_plan() is None
    assert Named(**kwargs).numpy_plan() == base(**kwargs).numpy_plan() is not None


def _moved_statistics(actor, rng):
    """Non-trivial normaliser and batch-renorm statistics (as after training), so that the
    twin is checked with the moving statistics, not the initial identity."""
    for v in actor.non_trainable_variables:
        name = v.path.split("/")[-1]
        if name in ("mean", "moving_mean"):
            v.assign(rng.normal(0, 2, v.shape).astype(np.float32))
        elif name in ("variance", "moving_variance"):
            v.assign(rng.uniform(0.1, 4.0, v.shape).astype(np.float32))
    for v in actor.trainable_variables:  # scales and offsets away from 1 and 0 too
        if v.path.split("/")[-1] in ("gamma", "beta"):
            v.assign(v + rng.normal(0, 0.3, v.shape).astype(np.float32))


@pytest.mark.parametrize("name", sorted(ACTORS))
def test_numpy_actor_gives_the_keras_actors_mean_and_log_std(name):
    config = SACConfig(**ACTORS[name], log_std_min=-5.0, log_std_max=1.0)
    actor = build_actor(17, 6, config)
    rng = np.random.default_rng(0)
    obs = rng.normal(0, 3, (1000, 17)).astype(np.float32)
    actor(obs[:1])
    _moved_statistics(actor, rng)
    # Large log-std head weights, so that both clip bounds are reached on these inputs.
    actor.log_std.kernel.assign(actor.log_std.kernel * 50.0)
    bounds = (config.log_std_min, config.log_std_max)
    twin = NumpyActor(actor.numpy_plan(), bounds, seed=0)
    twin.set_weights(actor.get_weights())
    mean, log_std = (t.numpy() for t in actor(obs))
    got_mean, got_log_std = twin.params(obs)
    # To 1e-5, relative where the moved statistics make the means large (float32 sums in
    # another order); the log-std head's factor of 50 scales its rounding by 50 too.
    np.testing.assert_allclose(got_mean, mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_log_std, log_std, rtol=1e-5, atol=50 * 1e-5)
    assert got_log_std.min() == -5.0 and got_log_std.max() == 1.0
    for batch in (obs[:1], obs):  # a runner's one env copy, or several
        action = twin.sample(batch)
        assert action.shape == (len(batch), 6) and action.dtype == np.float32
        assert np.all(np.abs(action) <= 1.0)


def test_numpy_actor_samples_the_tanh_normal_policy():
    twin = NumpyActor(0, (-20.0, 2.0), seed=1)
    # No hidden layer: mean = obs @ Wm + bm, log_std = obs @ Ws + bs.
    twin.set_weights([np.zeros((1, 1)), np.array([0.5]), np.zeros((1, 1)), np.array([np.log(0.3)])])
    samples = twin.sample(np.zeros((200_000, 1), np.float32))[:, 0]
    pre_squash = np.arctanh(np.clip(samples, -1 + 1e-7, 1 - 1e-7))
    assert pre_squash.mean() == pytest.approx(0.5, abs=0.005)
    assert pre_squash.std() == pytest.approx(0.3, abs=0.005)
    with pytest.raises(ValueError, match="expected 4 weight arrays, got 2"):
        twin.set_weights([np.zeros((1, 1)), np.zeros(1)])


def test_a_runner_of_the_built_in_actor_never_imports_tensorflow(tmp_path):
    """One EnvRunner (plain Python, as Ray runs it) collecting policy steps."""
    actor = build_actor(3, 1, SACConfig(hidden_sizes=(16,)))
    actor(tf.zeros([1, 3]))
    np.savez(tmp_path / "weights.npz", *actor.get_weights())
    code = f"""
import sys
import numpy as np
from unittest import mock
from tfsac.config import SACConfig
from tfsac.data.envs import env_factory, env_spec, make_env
from tfsac.scale.runners import EnvRunner
spec = env_spec("Pendulum-v1", make_env("Pendulum-v1"))
config = SACConfig(hidden_sizes=(16,)).to_dict()
runner = EnvRunner(0, env_factory("Pendulum-v1"), spec, config, plan={actor.numpy_plan()!r})
weights = np.load({str(tmp_path / "weights.npz")!r})
weights = [weights[f"arr_{{i}}"] for i in range(len(weights.files))]
with mock.patch.dict(sys.modules, ray=mock.Mock(get=lambda ref: ref)):
    chunk = runner.collect([weights, 0], num_steps=50, warmup_steps=10)
assert chunk.steps == 50 and len(chunk.transitions.reward) == 50
assert np.all(np.abs(chunk.transitions.action) <= 2.0)
print("tensorflow" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
