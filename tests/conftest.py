import contextlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = os.path.join(REPO_ROOT, "docs", "guide")
CUSTOM_NETWORKS_DOC = os.path.join(GUIDE, "custom-env-and-networks.md")


def docs_example(path=CUSTOM_NETWORKS_DOC, marker="example"):
    """The Python block after `<!-- <marker> -->` in a docs page (exactly one)."""
    import re

    with open(path) as f:
        (code,) = re.findall(rf"<!-- {re.escape(marker)} -->\s*```python\n(.*?)```", f.read(), re.S)
    return code


def random_batch(num_batches, batch_size, obs_dim, action_dim, seed=0, terminated_fraction=0.1):
    """Random transitions by field, shaped [num_batches, batch_size, ...]."""
    rng = np.random.default_rng(seed)
    shape = (num_batches, batch_size)
    return {
        "observation": rng.normal(size=(*shape, obs_dim)).astype(np.float32),
        "action": rng.uniform(-1, 1, (*shape, action_dim)).astype(np.float32),
        "reward": rng.normal(size=shape).astype(np.float32),
        "next_observation": rng.normal(size=(*shape, obs_dim)).astype(np.float32),
        "terminated": (rng.uniform(size=shape) < terminated_fraction).astype(np.float32),
    }


class CounterEnv(gym.Env):
    """Observation [10 * episode + t]. Even episodes terminate after 3 steps; odd ones run
    until the TimeLimit (4 steps) truncates them. Reward 1 per step."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Box(
        np.array([0.0, -10.0], np.float32), np.array([5.0, 2.0], np.float32)
    )

    def __init__(self):
        self.episode = -1
        self.t = 0

    def _obs(self):
        return np.array([10.0 * self.episode + self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, np.float32)), action
        self.t += 1
        terminated = self.episode % 2 == 0 and self.t == 3
        return self._obs(), 1.0, terminated, False, {}


class SpaceEnv(gym.Env):
    """Random observations from a given space; episodes of 10 steps; 2-D actions."""

    action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

    def __init__(self, observation_space, action_space=None):
        self.observation_space = observation_space
        if action_space is not None:
            self.action_space = action_space
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(np.sum(action)), False, self.t >= 10, {}


def run_script(name, args, cwd):
    """scripts/<name>.py with `args` in `cwd`, as a user runs it: the finished process, its
    output captured."""
    import subprocess
    import sys

    script = os.path.join(REPO_ROOT, "scripts", f"{name}.py")
    return subprocess.run(
        [sys.executable, script, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@contextlib.contextmanager
def defined_flags_removed():
    """absl's global FLAGS; every flag defined inside (by `_cli.define_training_flags()` or
    by importing a script) is removed on the way out, so that the next test in the same
    process (one pytest-xdist worker runs many files) can define it again."""
    from absl import flags

    before = set(flags.FLAGS)
    try:
        yield flags.FLAGS
    finally:
        for name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, name)


def script_module(name, monkeypatch):
    """scripts/<name>.py loaded as a module (its folder on sys.path, as when it runs); the
    flags it defines as it loads are removed again."""
    import importlib.util

    path = os.path.join(REPO_ROOT, "scripts", f"{name}.py")
    monkeypatch.syspath_prepend(os.path.dirname(path))
    spec = importlib.util.spec_from_file_location(f"script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    with defined_flags_removed():
        spec.loader.exec_module(module)
    return module


@pytest.fixture
def training_flags(monkeypatch):
    """absl's FLAGS with scripts/train.py's flags defined, as the scripts parse them."""
    monkeypatch.syspath_prepend(os.path.join(REPO_ROOT, "scripts"))
    import _cli

    with defined_flags_removed() as fv:
        _cli.define_training_flags()
        yield fv
        fv.unparse_flags()


def tiny_config(tmp_path, env_id, name="run", **overrides):
    """A SACConfig for runs of a few dozen steps with tiny networks, outputs in tmp_path."""
    from tfsac import SACConfig

    config = dict(
        env_id=env_id,
        total_steps=40,
        learning_starts=20,
        batch_size=8,
        hidden_sizes=(8,),
        eval_every=40,
        eval_episodes=1,
        log_every=20,
        run_dir=str(tmp_path / name),
        export_dir=str(tmp_path / "export"),
        jit_compile=False,
        checkpoint_every=0,
    )
    config.update(overrides)
    return SACConfig(**config)


def tf_runner_policy(algorithm: str):
    """The env runners' policy of a tiny `algorithm` learner (3 observations, 2 actions)
    whose actor has no numpy plan: a TFPolicy holding the learner's actor weights."""
    import gymnasium as gym

    from tfsac.algorithm.learner import SACLearner
    from tfsac.algorithm.resolve import resolve
    from tfsac.config import SACConfig
    from tfsac.data.spaces import EnvSpec, space_to_json
    from tfsac.scale.runners import TFPolicy, runner_policy

    space = space_to_json(gym.spaces.Box(-1.0, 1.0, (3,), np.float32))
    spec = EnvSpec("T-v0", 3, 2, (-1.0, -1.0), (1.0, 1.0), "Box(3)", "Box(2)", "none", space)
    config = resolve(
        SACConfig(
            algorithm=algorithm, hidden_sizes=(8,), critic_hidden_sizes=(8,), num_actors=1,
            envs_per_actor=2, chunk_steps=64, jit_compile=False,
        )
    )  # fmt: skip
    learner = SACLearner(3, 2, config)
    assert learner.actor.numpy_plan() is None
    policy = runner_policy(spec, config, None, 0, plan=learner.actor.numpy_plan())
    assert isinstance(policy, TFPolicy)
    policy.set_weights(learner.actor.get_weights())
    return policy


def env_without_ray(tmp_path):
    """Environment variables for a subprocess in which `import ray` fails (a stand-in
    package first on PYTHONPATH), as on a machine without the `ray` extra."""
    fake = tmp_path / "no_ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "no_ray"), env.get("PYTHONPATH", "")])
    return env


COUNTER_ENV_ID = "tfsac-test/Counter-v0"
if COUNTER_ENV_ID not in gym.registry:
    gym.register(COUNTER_ENV_ID, entry_point=CounterEnv, max_episode_steps=4)


@pytest.fixture
def counter_env_id():
    return COUNTER_ENV_ID


@pytest.fixture(scope="session")
def ray_address():
    """One quiet local Ray for the session, which the sweep scripts join by address. Never
    `ray start`/`ray stop`: those act on every Ray process of the machine."""
    import logging

    import ray

    # address="local": a Ray of the session's own, not one that runs on the machine.
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
    )
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def assert_nan_contract(version_dir, finite_obs, raw_bad=None):
    """docs/guide/deploy.md's contract for a bad observation, in every runtime that loads the
    version: a row holding NaN or an infinity gets all-NaN actions from the SavedModel
    (both signatures), LiteRT and ONNX Runtime, the other rows their usual actions; and
    tfsac.Policy refuses it with a TfsacError. `finite_obs` is [N >= 5, obs_dim] float32;
    `raw_bad`, a raw observation of the env's space with a NaN, where rows are not raw."""
    import onnxruntime
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from tfsac import Policy, TfsacError

    obs = np.array(finite_obs[:5], np.float32)
    want = ~np.zeros(len(obs), bool)
    for row, value in zip(range(1, len(obs)), (np.nan, np.inf, -np.inf, np.nan), strict=False):
        obs[row, row % obs.shape[1]] = value
        want[row] = False
    served = tf.saved_model.load(version_dir).signatures
    lite = Interpreter(model_path=os.path.join(version_dir, "policy.tflite"))
    lite = lite.get_signature_runner("serving_default")
    session = onnxruntime.InferenceSession(os.path.join(version_dir, "policy.onnx"))
    clean = served["serving_default"](observation=tf.constant(finite_obs[:5]))["action"].numpy()
    runtimes = {
        "saved_model": lambda x: served["serving_default"](observation=tf.constant(x))["action"],
        "sample": lambda x: served["sample"](observation=tf.constant(x))["action"],
        "litert": lambda x: lite(observation=x)["action"],
        "onnx": lambda x: session.run(["action"], {"observation": x})[0],
    }
    for name, run in runtimes.items():
        for batch in (obs, *(obs[i : i + 1] for i in range(len(obs)))):
            action = np.asarray(run(batch))
            finite_rows = np.isfinite(batch).all(axis=1)
            assert np.isnan(action[~finite_rows]).all(), (name, batch, action)
            assert np.isfinite(action[finite_rows]).all(), (name, batch, action)
        action = np.asarray(run(obs))
        if name != "sample":
            np.testing.assert_allclose(action[want], clean[want], atol=1e-5, err_msg=name)
    policy = Policy.load(version_dir)
    if raw_bad is None:  # flat rows are the env's own observations
        assert policy.predict(obs[0]).shape == clean[0].shape
        with pytest.raises(TfsacError, match=r"NaN or infinite values \(batch rows \[1, 2"):
            policy.predict(obs)
        raw_bad = obs[1]
    with pytest.raises(TfsacError, match="NaN or infinite"):
        policy.predict(raw_bad)


# `pytest -n 2` (pytest-xdist) sends each test file to one worker whole, so a module's shared
# fixture is built once; the files that use the session's Ray go to one worker together, so
# the machine holds one test Ray, never two.
RAY_TEST_FILES = {"test_distributed.py", "test_new_variant.py", "test_sweep.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "ray_address" in item.fixturenames and item.path.name not in RAY_TEST_FILES:
            raise pytest.UsageError(f"{item.path.name} uses Ray: add it to RAY_TEST_FILES")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            return "ray" if os.path.basename(path) in RAY_TEST_FILES else path

    return ByFile(config, log)


COUNTING_ENV_ID = "countenv:CountingPendulum-v0"
COUNTING_ENV = """
import os

import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv

# One line per construction, by any process that imports the module from this folder.
CONSTRUCTIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "constructions.txt")

class CountingPendulum(PendulumEnv):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with open(CONSTRUCTIONS, "a") as f:
            f.write(f"{os.getpid()}\\n")

gym.register("CountingPendulum-v0", entry_point=CountingPendulum, max_episode_steps=200)
"""


@pytest.fixture
def counting_env(tmp_path, monkeypatch):
    """The user module COUNTING_ENV in tmp_path, importable here (as in a new process
    afterwards); gives a function that returns the ids of the processes that constructed
    its env since it was last called, one per construction."""
    (tmp_path / "countenv.py").write_text(COUNTING_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    counted = tmp_path / "constructions.txt"

    def constructions():
        pids = [int(p) for p in counted.read_text().split()] if counted.exists() else []
        counted.unlink(missing_ok=True)
        return pids

    yield constructions
    sys.modules.pop("countenv", None)
    gym.registry.pop("CountingPendulum-v0", None)
