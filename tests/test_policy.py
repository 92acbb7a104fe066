"""tfsac.Policy: one raw observation or a batch, from a SavedModel or a run directory,
deterministic or sampled, for every observation space tfsac trains on."""

import os

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from conftest import SpaceEnv, tiny_config

from tfsac import Policy, TfsacError, train
from tfsac.deploy.loading import load_policy
from tfsac.deploy.policy import saved_model_policy

DICT_SPACE = gym.spaces.Dict(
    {"pos": gym.spaces.Box(-1, 1, (2,), np.float32), "mode": gym.spaces.Discrete(3)}
)
BOX2D_SPACE = gym.spaces.Box(-1, 1, (2, 3), np.float32)
ACTION_SPACE = gym.spaces.Box(-2, 2, (2,), np.float32)


for _name, _space in (("dict", DICT_SPACE), ("box2d", BOX2D_SPACE)):
    gym.register(
        f"tfsac-test/Policy-{_name}-v0",
        entry_point=SpaceEnv,
        kwargs={"observation_space": _space, "action_space": ACTION_SPACE},
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("policies")
    results = {}
    for name, env_id in (
        ("pendulum", "Pendulum-v1"),
        ("dict", "tfsac-test/Policy-dict-v0"),
        ("box2d", "tfsac-test/Policy-box2d-v0"),
    ):
        config = tiny_config(tmp, env_id, name=name, checkpoint_every=40)
        results[name] = train(config)
    return results


def test_one_observation_or_a_batch_from_a_saved_model_and_its_run_dir(runs):
    result = runs["pendulum"]
    served = load_policy(result.saved_model_path).signatures["serving_default"]
    batch = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    expected = served(observation=tf.constant(batch))["action"].numpy()
    for policy in (Policy.load(result.saved_model_path), Policy.load(result.run_dir)):
        one = policy.predict(batch[0])  # a 1-D observation: one action
        assert one.shape == (1,) and np.all(np.abs(one) <= 2.0)
        np.testing.assert_allclose(policy.predict(batch), expected, atol=1e-5)
        np.testing.assert_allclose(policy(batch[0]), expected[0], atol=1e-5)  # callable
        sampled = [policy.predict(batch[0], deterministic=False) for _ in range(5)]
        assert len({float(a[0]) for a in sampled}) > 1
        assert np.all(np.abs(sampled) <= 2.0)
    assert Policy.load(result.saved_model_path).metadata["env_id"] == "Pendulum-v1"


def test_a_model_folder_loads_its_highest_version_as_tf_serving_serves_it(runs, tmp_path, caplog):
    """Found by a tester: Policy.load("mybest"), the folder of versions 1 and 2, was refused."""
    import logging
    import shutil

    caplog.set_level(logging.INFO, logger="absl")
    version = runs["pendulum"].saved_model_path
    for name in ("2", "12", "notes"):  # "notes" is no version: TF Serving passes over it
        shutil.copytree(version, tmp_path / "model" / name)
    batch = np.random.default_rng(2).uniform(-1, 1, (4, 3)).astype(np.float32)
    expected = Policy.load(version).predict(batch)
    np.testing.assert_allclose(Policy.load(str(tmp_path / "model")).predict(batch), expected)
    assert f"loading {tmp_path / 'model' / '12'}, the highest version" in caplog.text


def test_a_run_without_env_spec_json_loads_by_making_its_env_again(runs, tmp_path):
    import shutil

    run_dir = tmp_path / "earlier"  # a copy: the module's runs stay as they are
    shutil.copytree(runs["pendulum"].run_dir, run_dir)
    os.remove(run_dir / "env_spec.json")  # as a run of a tfsac that wrote none
    batch = np.random.default_rng(1).uniform(-1, 1, (4, 3)).astype(np.float32)
    expected = Policy.load(runs["pendulum"].run_dir).predict(batch)
    np.testing.assert_allclose(Policy.load(str(run_dir)).predict(batch), expected, atol=1e-6)


def test_raw_observations_of_structured_spaces(runs):
    for name, space in (("dict", DICT_SPACE), ("box2d", BOX2D_SPACE)):
        result = runs[name]
        served = load_policy(result.saved_model_path).signatures["serving_default"]
        space.seed(1)
        observations = [space.sample() for _ in range(4)]
        flat = np.stack([gym.spaces.flatten(space, o) for o in observations]).astype(np.float32)
        expected = served(observation=tf.constant(flat))["action"].numpy()
        for policy in (Policy.load(result.saved_model_path), Policy.load(result.run_dir)):
            assert policy.observation_space == space
            np.testing.assert_allclose(policy.predict(observations[0]), expected[0], atol=1e-5)
            np.testing.assert_allclose(policy.predict(observations), expected, atol=1e-5)
            # A batch as a vector env gives it: one array with a leading axis (per key).
            batched = gym.vector.utils.concatenate(
                space, observations, gym.vector.utils.create_empty_array(space, 4)
            )
            np.testing.assert_allclose(policy.predict(batched), expected, atol=1e-5)


def test_episodes_of_a_dict_env_run_flattened_as_training_saw_them(runs):
    """Found by a tester: README's run_episodes(make_env(), policy, ...) on an env of Dict
    observations failed in float() (a dict is no number)."""
    from tfsac.run.evaluation import run_episodes

    policy, metadata = saved_model_policy(runs["dict"].saved_model_path)
    env_id, seed = "tfsac-test/Policy-dict-v0", metadata["eval_seed"]
    returns = run_episodes(gym.make(env_id), policy, 2, seed)
    flat = run_episodes(gym.wrappers.FlattenObservation(gym.make(env_id)), policy, 2, seed)
    assert returns == flat and np.all(np.isfinite(returns))


def test_what_a_policy_refuses_is_one_line(runs, tmp_path):
    policy = Policy.load(runs["pendulum"].saved_model_path)
    with pytest.raises(TfsacError, match=r"shape \(3,\) or a batch of shape \(N, 3\)"):
        policy.predict(np.zeros(4))
    with pytest.raises(TfsacError, match="neither a SavedModel version folder"):
        Policy.load(str(tmp_path))
    with pytest.raises(TfsacError, match="observation keys: missing .'mode'."):
        Policy.load(runs["dict"].saved_model_path).predict({"pos": [0.0, 0.0]})


@pytest.mark.parametrize("space", [None, BOX2D_SPACE], ids=["flat", "box2d"])
@pytest.mark.parametrize("observation", [["a", "b", "c"], "abc", [[0.0, "x", 1.0]], {"x": 1}])
def test_an_observation_that_is_not_numbers_is_a_tfsac_error_naming_it(space, observation):
    dim = 3 if space is None else 6
    policy = Policy(lambda batch, deterministic: np.zeros((len(batch), 2)), dim, space, {})
    with pytest.raises(TfsacError, match="observation") as error:
        policy.predict(observation)
    assert repr(observation)[:20] in str(error.value)
    assert policy.predict(np.zeros(dim) if space is None else np.zeros((2, 3))).shape == (2,)


@pytest.mark.parametrize("both", [False, True], ids=["saved_model", "run_dir"])
def test_values_a_space_does_not_hold_and_bad_arguments_are_tfsac_errors(runs, both):
    """Found by an independent tester: each was an IndexError, UFuncTypeError, ValueError or
    KeyError from numpy, gymnasium or TF."""
    which = (lambda r: r.run_dir) if both else (lambda r: r.saved_model_path)
    policy = Policy.load(which(runs["dict"]))
    for mode in (1.5, "1", 3, [1], True):  # Discrete(3) takes the integers 0, 1, 2, not bools
        with pytest.raises(TfsacError, match="expected an observation of Dict"):
            policy.predict({"pos": [0.1, -0.2], "mode": mode})
    assert policy.predict({"pos": [0.1, -0.2], "mode": np.int8(2)}).shape == (2,)
    for deterministic in ("yes", None, 1):
        with pytest.raises(TfsacError, match="deterministic must be True or False"):
            policy.predict({"pos": [0.1, -0.2], "mode": 1}, deterministic=deterministic)
    box2d = Policy.load(which(runs["box2d"]))
    assert box2d.predict(np.zeros((0, 2, 3))).shape == (0, 2)  # an empty batch, as flat Boxes
    with pytest.raises(TfsacError, match="the observation must be numbers"):
        box2d.predict(np.full((2, 3), "x"))
    with pytest.raises(TfsacError, match=r"infinite values \(as float32"):
        Policy.load(which(runs["pendulum"])).predict(np.array([1e300, 0.0, 0.0]))


def test_a_saved_model_that_is_not_a_tfsac_policy_is_refused_in_one_line(tmp_path):
    class Doubler(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
        def double(self, x):
            return {"y": 2 * x}

    module = Doubler()
    for name, signatures in (
        ("other_input", module.double),
        ("no_default", {"other": module.double}),
    ):
        tf.saved_model.save(module, str(tmp_path / name), signatures=signatures)
        for load in (load_policy, Policy.load):
            with pytest.raises(TfsacError, match="is not a tfsac policy: it has no 'serving_def"):
                load(str(tmp_path / name))


def test_a_run_stopped_between_evaluations_claims_no_evaluation_for_its_weights(tmp_path):
    import os
    import pickle
    import signal

    from tfsac import Interrupted
    from tfsac.data.env_checks import check_env_fits
    from tfsac.data.envs import remade_env_spec
    from tfsac.deploy.loading import checkpoint_learner

    def ctrl_c_at_60(record):  # as Ctrl-C: the run saves a checkpoint at its next step
        if record["step"] == 60:
            os.kill(os.getpid(), signal.SIGINT)

    config = tiny_config(tmp_path, "Pendulum-v1", total_steps=100, eval_every=50)
    with pytest.raises(Interrupted) as raised:
        train(config, export=False, quiet=True, on_log=ctrl_c_at_60)
    again = pickle.loads(pickle.dumps(raised.value))  # as multiprocessing and Ray pass it on
    assert (str(again), again.signum) == (str(raised.value), signal.SIGINT)
    _, _, info = checkpoint_learner(config.run_dir)
    # The evaluation at step 50 is of other weights than those of the checkpoint at 61.
    assert info["checkpoint_step"] == 61 and "eval_return_mean" not in info
    # The observation layout is compared, not only the width: Box(3) against Dict's 3 + ...
    with pytest.raises(TfsacError, match="flatten differently from those the policy was"):
        check_env_fits(
            "tfsac-test/Policy-dict-v0",
            remade_env_spec("tfsac-test/Policy-dict-v0"),
            {**info, "observation_dim": 5},
        )


@pytest.mark.parametrize(
    "name, env_fn, observation",
    [
        # An observation wrapper changes the space: the policy takes the wrapped env's.
        (
            "framestack",
            lambda: gym.wrappers.FrameStackObservation(gym.make("Pendulum-v1"), 2),
            np.ones((2, 3), np.float32),
        ),
        # A user's own flattening of a Dict: the flat vector it gives, not the Dict inside.
        (
            "userflat",
            lambda: gym.wrappers.FlattenObservation(SpaceEnv(DICT_SPACE, ACTION_SPACE)),
            np.ones(5, np.float32),
        ),
        ("scalar", lambda: SpaceEnv(gym.spaces.Box(-1, 1, (), np.float32)), np.float32(0.5)),
    ],
)
def test_an_env_fn_envs_own_observations_are_what_its_exports_take(
    tmp_path, name, env_fn, observation
):
    from tfsac.data.envs import unit_to_bounds

    config = tiny_config(tmp_path, "Pendulum-v1", name=name, checkpoint_every=40)
    result = train(config, env_fn=env_fn)
    flat = np.asarray(observation, np.float32).reshape(1, -1)
    spec = result.spec
    expected = unit_to_bounds(
        result.learner.act(flat, deterministic=True), spec.action_low, spec.action_high
    )
    exported = Policy.load(result.saved_model_path)
    np.testing.assert_allclose(exported.predict(observation), expected[0], rtol=1e-5)
    # Its id alone would remake another env (no wrappers): the run's checkpoints say so.
    names = {"framestack": "custom:Pendulum-v1+FrameStackObservation"}  # not tfsac's wrapper
    assert result.spec.env_id == names.get(name, "custom:SpaceEnv")
    # The run directory's env_spec.json stands in for the env, which no id remakes.
    from_run = Policy.load(result.run_dir)
    np.testing.assert_allclose(from_run.predict(observation), expected[0], rtol=1e-5)
    spec_file = os.path.join(result.run_dir, "env_spec.json")
    with open(spec_file, "w") as f:
        f.write('{"obs_dim": 6}')
    with pytest.raises(TfsacError, match="env_spec.json is not an env spec that tfsac wrote"):
        Policy.load(result.run_dir)
    os.remove(spec_file)  # as an earlier tfsac's run
    with pytest.raises(TfsacError, match=r"made by an env_fn .* no env_spec.json .* SavedModel"):
        Policy.load(result.run_dir)
