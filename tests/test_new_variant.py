"""A new algorithm is one class, written and registered here without touching tfsac/: a SAC
whose critic rule averages its critics instead of taking their minimum. It trains, its
target is the one it declares (checked by hand), it checkpoints and resumes, exports every
format, acts through env runners, and refuses what it does not read."""

import ast
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from conftest import tiny_config

from tfsac import Policy, SACLearner, TfsacError, train
from tfsac.algorithm import losses
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
