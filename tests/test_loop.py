"""The environment loop: termination vs truncation, bounds, outputs."""

import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from conftest import REPO_ROOT, docs_example, tiny_config

import tfsac
from tfsac import TfsacError, train
from tfsac.run.progress import long_run_notice


def _config(tmp_path, env_id, **kw):
    return tiny_config(
        tmp_path,
        env_id,
        **{"learning_starts": 40, "eval_episodes": 2, "checkpoint_every": 5000, **kw},
    )


def test_truncation_bootstraps_and_termination_does_not(tmp_path, counter_env_id):
    result = train(_config(tmp_path, counter_env_id), export=False)
    buf = result.buffer
    obs = buf.observation[: len(buf), 0]
    next_obs = buf.next_observation[: len(buf), 0]
    terminated = buf.terminated[: len(buf)]
    # next_observation is always the true successor, never the next episode's reset.
    np.testing.assert_array_equal(next_obs, obs + 1)
    episode, t_next = np.divmod(next_obs, 10)
    # Even episodes terminate at t=3; odd ones are truncated by the TimeLimit at t=4.
    np.testing.assert_array_equal(terminated, ((episode % 2 == 0) & (t_next == 3)).astype(float))
    truncated_rows = (episode % 2 == 1) & (t_next == 4)
    assert truncated_rows.sum() >= 5 and not terminated[truncated_rows].any()
    # Random actions were mapped into the asymmetric bounds (the env asserts it too).
    assert np.all(np.abs(buf.action[: len(buf)]) <= 1.0)


def test_learning_phase_updates_and_writes_summary(tmp_path, counter_env_id, monkeypatch, capfd):
    import tfsac.run.progress

    records = []
    cfg = _config(tmp_path, counter_env_id, total_steps=60, learning_starts=20, eval_every=30)
    # Any run is "long" with a limit of 0 s: the notice comes once, at the first speed.
    notice = lambda left, speed: long_run_notice(left, speed, limit_s=0)  # noqa: E731
    monkeypatch.setattr(tfsac.run.progress, "long_run_notice", notice)
    result = train(cfg, on_log=records.append)
    assert capfd.readouterr().err.count("env steps/s, the 20 steps left take about") == 1
    assert os.path.isabs(result.run_dir)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary == json.loads(json.dumps(result.summary))
    assert [e["step"] for e in summary["evaluations"]] == [30, 60]
    times = [e["wall_time_s"] for e in summary["evaluations"]]  # the run's time so far
    assert 0 < times[0] < times[1] <= summary["wall_time_s"]
    assert summary["eval_return_mean"] == summary["evaluations"][-1]["return_mean"]
    assert os.path.isfile(os.path.join(summary["saved_model_path"], "saved_model.pb"))
    assert int(result.learner.sac.critic_optimizer.iterations.numpy()) == 40
    assert [r["step"] for r in records] == [20, 40, 60]
    assert "critic_loss" in records[-1] and "critic_loss" not in records[0]


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(env_id="NoSuchEnv-v0"), "NoSuchEnv-v0"),
        (dict(env_id="CartPole-v1"), "continuous"),
        (dict(batch_size=0), "batch_size"),
        (dict(learning_starts=100, total_steps=50), "learning_starts"),
        (dict(hidden_sizes=(0,)), "hidden_sizes"),
    ],
)
def test_bad_config_raises_before_training(tmp_path, counter_env_id, kw, message):
    with pytest.raises(TfsacError, match=message):
        train(_config(tmp_path, kw.pop("env_id", counter_env_id), **kw))
    assert not (tmp_path / "export").exists() or not any((tmp_path / "export").rglob("*.pb"))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_envs_keep_true_successors_and_update_ratio(tmp_path, counter_env_id, mode):
    cfg = _config(
        tmp_path,
        counter_env_id,
        num_envs=2,
        vector_mode=mode,
        total_steps=60,
        learning_starts=20,
        eval_every=60,
    )
    result = train(cfg, export=False)
    buf = result.buffer
    obs = buf.observation[: len(buf), 0]
    next_obs = buf.next_observation[: len(buf), 0]
    terminated = buf.terminated[: len(buf)]
    assert len(buf) == 60
    np.testing.assert_array_equal(next_obs, obs + 1)  # never a reset observation
    episode, t_next = np.divmod(next_obs, 10)
    np.testing.assert_array_equal(terminated, ((episode % 2 == 0) & (t_next == 3)).astype(float))
    # One gradient step per env step after learning_starts, whatever num_envs is.
    assert int(result.learner.sac.critic_optimizer.iterations.numpy()) == 40
    assert result.summary["episodes"] >= 14


def test_num_envs_must_divide_total_steps(tmp_path, counter_env_id):
    with pytest.raises(TfsacError, match="multiple of num_envs"):
        train(_config(tmp_path, counter_env_id, num_envs=3, total_steps=40))


class _HalfReward(gym.RewardWrapper):
    def reward(self, reward):
        return 0.5 * reward


def _wrapped_pendulum():
    return _HalfReward(gym.make("Pendulum-v1", max_episode_steps=50))


def test_train_takes_an_env_factory(tmp_path):
    cfg = tiny_config(tmp_path, "ignored-when-env_fn-is-given", total_steps=100, eval_every=100)
    result = train(cfg, env_fn=_wrapped_pendulum)
    # The wrapped env ran: 50-step episodes, halved rewards (Pendulum's are in [-16.3, 0]).
    assert result.summary["episodes"] == 2
    assert -0.5 * 16.3 * 50 <= result.summary["eval_return_mean"] <= 0
    # The run names the env it trained on (config.json, summary, SavedModel metadata).
    assert result.summary["env"] == "Pendulum-v1"
    with open(os.path.join(result.saved_model_path, "tfsac_metadata.json")) as f:
        assert json.load(f)["env_id"] == "Pendulum-v1"


def test_an_env_factory_that_makes_no_env_is_one_clear_error(tmp_path):
    cfg = tiny_config(tmp_path, "Pendulum-v1")
    with pytest.raises(TfsacError, match="env_fn is a str, not a gymnasium.Env"):
        train(cfg, env_fn=lambda: "not an env")
    with pytest.raises(TfsacError, match="cannot make env_fn: ValueError: no simulator"):
        train(cfg, env_fn=lambda: (_ for _ in ()).throw(ValueError("no simulator")))


def test_a_window_on_a_machine_without_a_display_is_refused_before_the_run(tmp_path, monkeypatch):
    """Found by an independent tester: pygame ended the run with a segmentation fault at its
    first frame, and left a half-made run directory."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    cfg = tiny_config(tmp_path, "Pendulum-v1", env_kwargs={"render_mode": "human"})
    with pytest.raises(TfsacError, match="render_mode='human' opens a window, and this machine"):
        train(cfg)
    assert not os.path.exists(cfg.run_dir)


class _FailingEnv(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def __init__(self):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t == 90:
            raise RuntimeError("simulator diverged")
        return np.zeros(2, np.float32), 0.0, False, False, {}


gym.register("tfsac-test/Failing-v0", entry_point=_FailingEnv, max_episode_steps=1000)


def test_an_env_error_is_raised_as_itself(tmp_path):
    cfg = tiny_config(tmp_path, "tfsac-test/Failing-v0", total_steps=200, learning_starts=20)
    with pytest.raises(RuntimeError, match="^simulator diverged$"):
        train(cfg, export=False)


@pytest.mark.slow
def test_guide_env_factory_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # it writes runs/ under the current directory
    namespace = {}
    page = os.path.join(REPO_ROOT, "docs", "guide", "custom-env-and-networks.md")
    exec(docs_example(page, "env_fn example"), namespace)
    summary = namespace["result"].summary
    assert summary["env"] == "Pendulum-v1" and summary["episodes"] == 10  # 100-step episodes
    # The default run directory is named for the env the factory made.
    assert os.path.basename(namespace["result"].run_dir).startswith("pendulum_v1-seed0-")
    assert -0.1 * 16.3 * 100 <= summary["eval_return_mean"] <= 0  # rewards scaled by 0.1


@contextlib.contextmanager
def absltest_warnings():
    """The absl warning lines logged inside the block."""
    lines = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: lines.append(record.getMessage())
    logging.getLogger("absl").addHandler(handler)
    try:
        yield lines
    finally:
        logging.getLogger("absl").removeHandler(handler)


def test_a_snapshot_continues_the_episodes_where_the_envs_pickle_with_their_state():
    from tfsac.data.collector import Collector
    from tfsac.data.envs import env_factory, env_spec, make_env

    def collector(env_id):
        spec = env_spec(env_id, make_env(env_id))
        return Collector(env_factory(env_id), spec, 2, "sync", seed=0)

    actions = np.random.default_rng(0).uniform(-1, 1, (30, 2, 1)).astype(np.float32)
    running = collector("Pendulum-v1")
    running.reset(seed=3)
    for action in actions[:10]:
        running.step(action)
    snapshot, state = running.snapshot(), running.state()
    resumed = collector("Pendulum-v1")
    resumed.load_state(state, snapshot)
    assert resumed.start(seed=99)  # continued, not reset with seed 99
    for action in actions[10:]:
        a, b = running.step(action), resumed.step(action)
        np.testing.assert_array_equal(a.next_observation, b.next_observation)
        assert a.finished_episodes == b.finished_episodes
    # A snapshot that does not load (damaged, or made by other code) is a warning line,
    # then new episodes.
    damaged = collector("Pendulum-v1")
    damaged.load_state(state, b"not a pickle")
    with absltest_warnings() as lines:
        assert not damaged.start(seed=99)
    assert any("the checkpoint's env state does not load here" in line for line in lines)
    # MuJoCo envs pickle their constructor arguments only: no snapshot, new episodes.
    mujoco = collector("InvertedPendulum-v5")
    mujoco.reset(seed=0)
    assert mujoco.snapshot() is None


def test_train_prints_the_scripts_progress_lines_unless_quiet_and_calls_callbacks(
    tmp_path, counter_env_id, capfd
):
    train(tiny_config(tmp_path, counter_env_id, name="a"), export=False)
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if " step 40/40 | " in line]
    assert len(lines) == 1 and lines[0][:9].count(":") == 2, err  # '20:31:07 step 40/40 | ...'
    assert "Sharding callback" not in err  # other libraries' INFO lines stay hidden
    # Quiet, with callback objects beside the functions: each gets every record and
    # evaluation, in order.
    from tfsac import Callback

    calls = []

    class Recorder(Callback):
        def on_log(self, record):
            calls.append(("log", record["step"]))

        def on_evaluation(self, evaluation):
            calls.append(("eval", evaluation["step"]))

    config = tiny_config(tmp_path, counter_env_id, name="b", eval_every=20, log_every=20)
    on_evaluation = lambda e: calls.append(("fn", e["step"]))  # noqa: E731
    train(config, export=False, quiet=True, on_evaluation=on_evaluation, callbacks=[Recorder()])
    assert " step 40/40 | " not in capfd.readouterr().err
    assert calls == [("log", 20), ("fn", 20), ("eval", 20), ("log", 40), ("fn", 40), ("eval", 40)]


def test_info_lines_pass_from_every_tfsac_subpackage_and_not_from_libraries():
    import logging

    from tfsac.logs import OwnInfoOnly

    def passes(path, level=logging.INFO):
        return OwnInfoOnly().filter(logging.LogRecord("absl", level, path, 1, "m", (), None))

    for module in ("scale/runner_source.py", "deploy/export.py", "run/trainer.py", "data/envs.py"):
        assert passes(os.path.join(REPO_ROOT, "tfsac", module)), module
    assert not passes("/usr/lib/python3/site-packages/tensorflow/python/saver.py")
    assert passes("/usr/lib/python3/site-packages/tensorflow/python/saver.py", logging.WARNING)


class SeedEchoEnv(gym.Env):
    """Observation [seed % 1000] throughout; episodes of 1 + seed % 4 steps; reward
    observation + action: a return is computable from the reset's seed."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        self.value, self.left = float(seed % 1000), 1 + seed % 4
        return np.array([self.value], np.float32), {}

    def step(self, action):
        self.left -= 1
        reward = self.value + float(action[0])
        return np.array([self.value], np.float32), reward, self.left == 0, False, {}


def test_evaluation_episodes_side_by_side_on_copies_return_what_one_env_returns():
    from tfsac.run.evaluation import episode_seeds, run_episodes

    seeds = episode_seeds(7, 5)
    assert len(set(seeds)) == 5 and seeds == episode_seeds(7, 5) != episode_seeds(8, 5)
    expected = [(1 + s % 4) * 1.5 * (s % 1000) for s in seeds]  # action = obs / 2
    for copies in (1, 2, 3, 8):
        widths = []

        def policy(obs, widths=widths):
            widths.append(len(obs))
            return obs * 0.5

        returns = run_episodes([SeedEchoEnv() for _ in range(copies)], policy, 5, seed=7)
        assert returns == pytest.approx(expected), copies
        # One call per step for all running episodes, always padded to one batch size.
        assert set(widths) == {min(copies, 5)}
        assert len(widths) <= sum(1 + s % 4 for s in seeds)
    assert len(widths) == max(1 + s % 4 for s in seeds)  # five copies' worth: the longest


def test_the_long_run_notice_says_the_hours_left_past_an_hour_only():
    assert long_run_notice(3600 * 50, 50.0) is None  # exactly an hour
    notice = long_run_notice(900_000, 50.0)
    assert notice.startswith("at 50 env steps/s, the 900,000 steps left take about 5.0 hours")


def test_an_out_of_date_env_version_is_one_warning_line_once(caplog, recwarn, monkeypatch):
    """gymnasium warns through Python's warnings, in colour codes, at each env made (twice
    before the first step: the start checks' env and the run's)."""
    from tfsac.data import envs
    from tfsac.data.envs import make_env

    monkeypatch.setattr(envs, "_SAID", set())  # what this process said before
    caplog.set_level(logging.WARNING, logger="absl")
    for _ in range(2):
        make_env("HalfCheetah-v4").close()
    said = [r.getMessage() for r in caplog.records if "out of date" in r.getMessage()]
    assert said == [
        "The environment HalfCheetah-v4 is out of date. You should consider upgrading to "
        "version `v5`."
    ]
    assert not [w for w in recwarn if "out of date" in str(w.message)]


class _OldGymEnv(gym.Env):
    """The old gym API: step returns 4 values."""

    observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def __init__(self, step_result=None, reset_result=None):
        self.step_result, self.reset_result = step_result, reset_result

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.reset_result is not None:
            return self.reset_result
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return self.step_result


@pytest.mark.parametrize(
    "env, message",
    [
        (_OldGymEnv((np.zeros(3), 0.0, False, {})), r"old gym API's 4: split done"),
        # Registered with a time limit (gym.make): the wrapper's unpacking fails first.
        (
            gym.wrappers.TimeLimit(_OldGymEnv((np.zeros(3), 0.0, False, {})), 10),
            r"raised ValueError: .*\(expected 5, got 4\) \(the old gym API's 4",
        ),
        (_OldGymEnv(reset_result=np.zeros(3)), r"reset\(\) must return \(observation, info\)"),
        (_OldGymEnv((np.zeros(4), 0.0, False, False, {})), r"observation of shape \(4,\), and"),
        (_OldGymEnv((np.zeros(3), np.zeros(2), False, False, {})), "not one number"),
        (_OldGymEnv(), r"step\(\) must return .* it returned NoneType$"),
    ],
)
def test_an_env_that_breaks_the_gymnasium_api_is_one_line_before_anything_is_written(
    tmp_path, env, message
):
    config = tiny_config(tmp_path, "Pendulum-v1")
    with pytest.raises(TfsacError, match=message):
        train(config, env_fn=lambda: env)
    assert not os.path.exists(config.run_dir)


def test_min_evaluations_without_its_stop_is_a_new_runs_mistake(tmp_path):
    """Refused where a run starts afresh (check_new_run), not by SACConfig: a resume that
    turns the stop off keeps its saved value (tests/test_callbacks.py)."""
    config = tiny_config(tmp_path, "Pendulum-v1", min_evaluations=3)
    with pytest.raises(TfsacError, match="min_evaluations needs stop_after_no_improvement"):
        train(config)
    assert not os.path.exists(config.run_dir)


def test_an_env_instance_given_as_env_fn_is_one_line_naming_a_factory(tmp_path):
    """An SB3 user's habit (SAC(policy, env)): the error said 'TimeLimit' is not callable."""
    config = tiny_config(tmp_path, "Pendulum-v1")
    with pytest.raises(TfsacError, match="env_fn takes a factory .* got a TimeLimit env"):
        train(config, env_fn=gym.make("Pendulum-v1"))
    assert not os.path.exists(config.run_dir)


def test_a_run_named_by_its_id_before_wrappers_were_told_apart_resumes(tmp_path):
    """An earlier tfsac named an env_fn env in frame-stacking wrappers by its id alone; its
    runs resume under today's name (custom:<id>+<wrappers>)."""
    import glob

    def env_fn():
        return gym.wrappers.FrameStackObservation(gym.make("Pendulum-v1"), 2)

    config = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=40, export=False)
    first = train(config, env_fn=env_fn)
    assert first.spec.env_id == "custom:Pendulum-v1+FrameStackObservation"
    for path in [
        os.path.join(config.run_dir, "config.json"),
        *glob.glob(os.path.join(config.run_dir, "checkpoints", "*.extra", "state.json")),
    ]:
        with open(path) as f:
            data = json.load(f)
        (data.get("config") or data)["env_id"] = "Pendulum-v1"  # as the earlier tfsac wrote
        with open(path, "w") as f:
            json.dump(data, f)
    longer = dataclasses.replace(config, total_steps=80)
    result = train(longer, env_fn=env_fn, resume=True)
    assert result.summary["total_steps"] == 80
    assert result.summary["resumed_from"].endswith("ckpt-40")


def _scaled_rewards():  # a module-level factory: its name is recorded
    env = gym.make("Pendulum-v1", max_episode_steps=30)
    return gym.wrappers.TransformReward(env, lambda r: 0.1 * r)


def _renamed_factory():
    return _scaled_rewards()


@pytest.mark.slow
def test_an_env_fn_run_records_its_factory_and_resumes_only_with_it(tmp_path, caplog):
    """A tester's: a run trained through an env_fn of reward and time-limit wrappers (named
    by the plain id) resumed from the command line on the plain env's evaluations, and
    evaluate.py said it repeated the run's. The factory is recorded in env_spec.json, the
    checkpoint's info and the export's metadata; a resume without it is refused."""
    from tfsac.deploy.loading import checkpoint_learner

    config = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=40)
    first = train(config, env_fn=_scaled_rewards)
    name = f"{__name__}._scaled_rewards"
    assert first.spec.env_id == "Pendulum-v1" and first.spec.env_fn == name
    with open(os.path.join(config.run_dir, "env_spec.json")) as f:
        assert json.load(f)["env_fn"] == name
    assert checkpoint_learner(config.run_dir)[2]["env_fn"] == name
    assert tfsac.Policy.load(first.saved_model_path).metadata["env_fn"] == name
    files = sorted(os.listdir(config.run_dir))
    longer = dataclasses.replace(config, total_steps=80, export=False)
    with pytest.raises(TfsacError, match=f"env_fn {name} made: resumed without it"):
        train(longer, resume=True)
    assert sorted(os.listdir(config.run_dir)) == files
    assert train(longer, env_fn=_scaled_rewards, resume=True).summary["env_steps"] == 80
    # evaluate.py by id: said to leave the factory's wrappers out, whatever its seed.
    script = os.path.join(REPO_ROOT, "scripts", "evaluate.py")
    for extra in ([], ["--seed=5"]):
        done = subprocess.run(
            [sys.executable, script, f"--run_dir={config.run_dir}", *extra],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"made by env_fn {name} around Pendulum-v1, whose wrappers" in done.stdout
        assert "(same seed, episodes and env)" not in done.stdout
    caplog.set_level(logging.WARNING, logger="absl")  # another factory: said, not refused
    more = dataclasses.replace(longer, total_steps=120)
    assert train(more, env_fn=_renamed_factory, resume=True, quiet=True).summary["env_steps"] == 120
    assert any(
        f"env_fn {__name__}._renamed_factory resumes a run that env_fn {name} trained"
        in r.getMessage()
        for r in caplog.records
    )


def test_an_env_in_wrappers_that_change_its_values_but_not_its_spaces_is_named_custom(tmp_path):
    """A tester's: a transform that keeps the observation space was named by the id alone,
    so evaluate.py remade the plain env and said it repeated the run's evaluation. Reward
    and time-limit wrappers still leave the id, which remakes what the policy saw."""
    from tfsac.run.preflight import _env_name

    def scaled():
        env = gym.make("Pendulum-v1")
        return gym.wrappers.TransformObservation(env, lambda o: o * 2, env.observation_space)

    def halved():
        env = gym.make("Pendulum-v1")
        return gym.wrappers.TransformAction(env, lambda a: 0.5 * a, env.action_space)

    def rewards():
        return gym.wrappers.TransformReward(gym.make("Pendulum-v1"), lambda r: 0.1 * r)

    assert _env_name(scaled()) == "custom:Pendulum-v1+TransformObservation"
    assert _env_name(halved()) == "custom:Pendulum-v1+TransformAction"
    assert _env_name(rewards()) == _env_name(gym.make("Pendulum-v1")) == "Pendulum-v1"
    flat = gym.wrappers.TimeLimit(gym.wrappers.FlattenObservation(gym.make("Pendulum-v1")), 50)
    assert _env_name(flat) == "Pendulum-v1"  # the vector tfsac's own flattening gives
    # Under a time limit of the user's too (a reviewer's: a count of layers stopped early).
    limited = gym.wrappers.TimeLimit(scaled(), 100)
    assert _env_name(limited) == "custom:Pendulum-v1+TransformObservation"
    # An observation wrapper the registration's entry point adds: the id remakes it.
    from gymnasium.envs.classic_control.pendulum import PendulumEnv

    def entry_point(**kwargs):
        env = PendulumEnv(**kwargs)
        return gym.wrappers.TransformObservation(env, lambda o: o, env.observation_space)

    gym.register("tfsac-test/PendulumInside-v0", entry_point=entry_point, max_episode_steps=50)
    inside = gym.wrappers.RecordEpisodeStatistics(gym.make("tfsac-test/PendulumInside-v0"))
    assert _env_name(inside) == "tfsac-test/PendulumInside-v0"
    from tfsac.config.resume import env_renamed  # a run named custom:... before resumes

    assert env_renamed("custom:tfsac-test/PendulumInside-v0+TransformObservation", inside.spec.id)
    for env_fn, wrapper in ((scaled, "TransformObservation"), (halved, "TransformAction")):
        config = tiny_config(tmp_path, "Pendulum-v1", name=wrapper, export=False)
        assert train(config, env_fn=env_fn).spec.env_id == f"custom:Pendulum-v1+{wrapper}"


def test_a_progress_line_after_updates_without_timed_steps_is_not_called_warm_up(tmp_path, caplog):
    """A tester's: a line right after learning_starts (no learning-phase steps timed since
    the last) read 'warm-up' beside the losses of the updates that had run."""
    from tfsac.files import RunDir
    from tfsac.run.loop_state import LoopState
    from tfsac.run.progress import ProgressLog

    caplog.set_level(logging.INFO, logger="absl")
    names = ("critic_loss", "value_loss")  # v1's V loss on the line too (a tester's)
    progress = ProgressLog(RunDir(str(tmp_path)), names, 300, tensorboard=False)
    loop = LoopState()
    loop.step = 100
    progress.log(loop, None, None, 1.0)
    loop.step = 150
    progress.log(loop, {"critic_loss": 3.0, "value_loss": 0.5}, None, 1.0)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert "| warm-up" in lines[0] and lines[1].endswith(
        "| - steps/s | critic_loss 3 | value_loss 0.5"
    ), lines
