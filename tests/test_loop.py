"""The environment loop: termination vs truncation, bounds, outputs."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest
from conftest import tiny_config

from tfsac import TfsacError, train


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


def test_learning_phase_updates_and_writes_summary(tmp_path, counter_env_id):
    records = []
    cfg = _config(tmp_path, counter_env_id, total_steps=60, learning_starts=20, eval_every=30)
    result = train(cfg, on_log=records.append)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary == json.loads(json.dumps(result.summary))
    assert [e["step"] for e in summary["evaluations"]] == [30, 60]
    assert summary["eval_return_mean"] == summary["evaluations"][-1]["return_mean"]
    assert os.path.isfile(os.path.join(summary["saved_model_path"], "saved_model.pb"))
    assert int(result.learner.critic_optimizer.iterations.numpy()) == 40
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
    assert int(result.learner.critic_optimizer.iterations.numpy()) == 40
    assert result.summary["episodes"] >= 14


def test_num_envs_must_divide_total_steps(tmp_path, counter_env_id):
    with pytest.raises(TfsacError, match="multiple of num_envs"):
        train(_config(tmp_path, counter_env_id, num_envs=3, total_steps=40))


def _run_state(trainer):
    """Everything a run leaves behind: variables, optimizer slots, replay rows, evals."""
    result = trainer.run()
    learner, buf = trainer.learner, result.buffer
    arrays = [v.numpy() for v in learner.trainable_state()]
    arrays += [v.numpy() for v in learner.critic_optimizer.variables]
    arrays += [v.numpy() for v in learner.actor_optimizer.variables]
    arrays.append(buf.storage[: len(buf)].copy())
    return arrays, result.summary["evaluations"], trainer.lr_factor


@pytest.mark.parametrize(
    "kw",
    [
        # Several env copies, a learning-rate schedule (new rates in the graph), episodes
        # ending at the 200-step time limit.
        dict(num_envs=2, lr_schedule="linear"),
        # gSDE: new noise without an update (warm-up and mid-phase), updates every 4 steps.
        dict(use_sde=True, sde_sample_freq=6, train_freq=4, gradient_steps=2),
    ],
    ids=["envs2-linear-rates", "gsde"],
)
def test_graph_loop_runs_exactly_the_eager_loop(tmp_path, kw):
    from tfsac import Trainer

    def trainer(graph_loop, name):
        cfg = tiny_config(
            tmp_path,
            "Pendulum-v1",
            name=name,
            total_steps=300,
            learning_starts=60,
            eval_every=150,
            log_every=70,
            checkpoint_every=100,
            deterministic=True,
            graph_loop=graph_loop,
            **kw,
        )
        return Trainer(cfg, export=False)

    (graph, graph_evals, graph_rates), (eager, eager_evals, eager_rates) = (
        _run_state(trainer(True, "graph")),
        _run_state(trainer(False, "eager")),
    )
    assert len(graph) == len(eager)
    for x, y in zip(graph, eager, strict=True):
        np.testing.assert_array_equal(x, y)
    assert graph_evals == eager_evals and graph_rates == eager_rates
    if "lr_schedule" in kw:  # the rates moved inside the graph, as in the eager loop
        assert graph_rates < 0.9


@pytest.mark.parametrize("seconds, stretches", [(1e9, 3), (0.0, 400)])
def test_graph_loop_runs_many_steps_per_call(tmp_path, monkeypatch, seconds, stretches):
    from tfsac import Trainer, loop

    calls = {"stretches": 0, "steps": 0}
    run_stretch, env_step = loop.Trainer._run_stretch, loop.Trainer._graph_env_step

    def counted(name, fn):
        def wrapper(*args):
            calls[name] += 1
            return fn(*args)

        return wrapper

    monkeypatch.setattr(loop.Trainer, "_run_stretch", counted("stretches", run_stretch))
    monkeypatch.setattr(loop.Trainer, "_graph_env_step", counted("steps", env_step))
    monkeypatch.setattr(loop, "STRETCH_SECONDS", seconds)
    cfg = tiny_config(
        tmp_path, "Pendulum-v1", total_steps=400, learning_starts=50, log_every=200, eval_every=400
    )
    Trainer(cfg, export=False).run()
    # Every env step went through the graph. Stretches end after the session's first update
    # (step 51, the throughput clock starts there), at the log lines (200 and 400) and at
    # the evaluation and the end (400), and after STRETCH_SECONDS.
    assert calls["steps"] == 400
    assert calls["stretches"] == stretches


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


def test_env_error_inside_the_graph_loop_is_raised_as_itself(tmp_path):
    cfg = tiny_config(tmp_path, "tfsac-test/Failing-v0", total_steps=200, learning_starts=20)
    with pytest.raises(RuntimeError, match="^simulator diverged$"):
        train(cfg, export=False)
