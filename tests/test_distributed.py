"""Env runners on Ray (tfsac.scale.runners): sync runs repeat bit for bit, async runs finish,
the update ratio holds for any number of runners, a killed runner is restarted without
lost or doubled steps, a distributed run resumes, and runner failures are one line."""

import csv
import dataclasses
import os
import shutil
import signal
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from conftest import REPO_ROOT, env_without_ray, tiny_config

import tfsac
from tfsac.algorithm.resolve import resolve
from tfsac.errors import TfsacError
from tfsac.run.callbacks import StopTrainingOnRewardThreshold

ray = pytest.importorskip("ray")


def _config(tmp_path, name="run", **overrides):
    settings = dict(
        env_id="Pendulum-v1",
        total_steps=320,
        learning_starts=64,
        batch_size=16,
        hidden_sizes=(16,),
        chunk_steps=32,
        weight_sync_every=32,
        num_actors=2,
        log_every=64,
        eval_every=320,
    )
    settings.update(overrides)
    return tiny_config(tmp_path, name=name, **settings)


def _updates(result) -> int:
    return int(result.learner.sac.critic_optimizer.iterations.numpy())


def _weights(result):
    return [v.numpy() for v in result.learner.sac.trainable_state()]


@pytest.fixture(autouse=True)
def _session_ray(ray_address):
    """Every test here runs its runners in the session's Ray."""
    # Env factories defined in this module travel by value: Ray's workers cannot import it.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield


@pytest.mark.slow
def test_sync_runs_are_identical(tmp_path):
    from tfsac import train

    first, second = (
        train(_config(tmp_path, name, runner_mode="sync", deterministic=True), export=False)
        for name in ("a", "b")
    )
    # The same numbers; their wall-clock times differ.
    numbers = [
        [{k: v for k, v in e.items() if k != "wall_time_s"} for e in r.summary["evaluations"]]
        for r in (first, second)
    ]
    assert numbers[0] == numbers[1]
    for a, b in zip(_weights(first), _weights(second), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(first.buffer.observation, second.buffer.observation)


@pytest.mark.parametrize(
    "num_actors, mode, schedule",
    [
        pytest.param(1, "async", dict(train_freq=1, gradient_steps=1), marks=pytest.mark.slow),
        pytest.param(2, "async", dict(train_freq=4, gradient_steps=1), marks=pytest.mark.slow),
        (2, "sync", dict(train_freq=2, gradient_steps=3)),
    ],
)
def test_update_ratio_holds_for_any_number_of_runners(tmp_path, num_actors, mode, schedule):
    from tfsac import train

    config = _config(tmp_path, num_actors=num_actors, runner_mode=mode, **schedule)
    result = train(config, export=False)
    learning_steps = config.total_steps - config.learning_starts
    expected = learning_steps // schedule["train_freq"] * schedule["gradient_steps"]
    assert _updates(result) == expected
    assert result.buffer.size == config.total_steps
    assert result.summary["total_steps"] == config.total_steps
    assert all(np.all(np.isfinite(w)) for w in _weights(result))
    # Rows come from the env: successors are observations of the same episode's next step.
    assert np.all(np.abs(result.buffer.observation[: config.total_steps, 2]) <= 8.0)
    with open(os.path.join(config.run_dir, "progress.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(f"runner{i}_env_steps_per_s" in rows[-1] for i in range(num_actors))
    assert float(rows[-1]["policy_lag"]) >= 0


def test_a_killed_runner_is_restarted_and_no_step_is_lost_or_doubled(tmp_path):
    from tfsac import Trainer

    config = _config(tmp_path, total_steps=640, runner_mode="async", log_every=128)
    killed = []

    def kill_a_runner(record):
        if not killed:
            pid = trainer.source.pool.pids[1]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    trainer = Trainer(config, export=False, on_log=kill_a_runner)
    result = trainer.run()
    assert killed and trainer.source.pool.restarts >= 1
    assert trainer.source.pool.pids[1] != killed[0]
    assert result.buffer.size == config.total_steps == trainer.loop.step
    assert _updates(result) == config.total_steps - config.learning_starts


def test_runners_collect_the_online_half_beside_recorded_data(tmp_path):
    """RLPD on env runners: the runners' rows fill the online replay, and every update
    samples half its batch from it and half from the recorded data."""
    from tfsac import Trainer
    from tfsac.data.recording import record_episodes, write_dataset

    episodes = record_episodes("Pendulum-v1", 1, seed=7, env_kwargs={"max_episode_steps": 100})
    data = write_dataset(episodes, "Pendulum-v1", str(tmp_path / "data"), "npz")
    config = _config(tmp_path, runner_mode="sync", offline_data=data, offline_ratio=0.5)
    trainer = Trainer(config, export=False)
    drawn = []
    sample = trainer.parts.mixed.sample_packed
    trainer.parts.mixed.sample_packed = lambda *a: drawn.append(sample(*a)) or drawn[-1]
    result = trainer.run()
    assert trainer.parts.mixed.online is result.buffer
    assert result.buffer.size == config.total_steps
    assert _updates(result) == config.total_steps - config.learning_starts
    # Recorded rows are the recorded transitions, online rows the runners' (none recorded).
    recorded = {r.tobytes() for r in trainer.parts.mixed.recorded.packed(np.arange(100))}
    online = {r.tobytes() for r in result.buffer.packed(np.arange(config.total_steps))}
    rows = np.concatenate([d.reshape(-1, d.shape[-1]) for d in drawn])
    half = config.batch_size // 2
    for batch in np.concatenate(drawn):
        assert all(r.tobytes() in recorded for r in batch[:half])
        assert all(r.tobytes() in online for r in batch[half:])
    assert len(rows) == _updates(result) * config.batch_size


def test_a_stop_option_ends_a_run_on_runners_cleanly(tmp_path):
    """A stop at the first evaluation (a chunk boundary) with chunks still in flight: the
    run's files are complete and the runners are gone."""
    from tfsac import Trainer

    config = _config(tmp_path, num_actors=2, total_steps=640, learning_starts=640, eval_every=128)
    trainer = Trainer(config, export=False, callbacks=[StopTrainingOnRewardThreshold(-1e9)])
    result = trainer.run()
    assert result.summary["stop"]["step"] == 128
    assert result.stop_reason.endswith("(StopTrainingOnRewardThreshold)")  # made by hand
    assert [e["step"] for e in result.summary["evaluations"]] == [128]
    assert result.summary["checkpoint"].endswith("ckpt-128")
    assert result.buffer.size == 128 and result.summary["env_steps"] == 128
    assert trainer.source.pool.runners == []  # closed: killed, nothing in flight


class _StopAtFirstEvaluation(Exception):
    pass


@pytest.mark.slow
def test_a_distributed_run_resumes_from_its_checkpoint(tmp_path):
    from tfsac import train

    config = _config(tmp_path, total_steps=640, eval_every=256, checkpoint_every=256)

    def stop(evaluation):
        raise _StopAtFirstEvaluation

    with pytest.raises(_StopAtFirstEvaluation):
        train(config, export=False, on_evaluation=stop)
    # Runners hold no state: a resume may take another number of them, mode or cluster (a
    # tester's: the same cluster's head at a new address could never be resumed), not none.
    with pytest.raises(TfsacError, match="num_actors=0 differs from the resumed run's 2"):
        train(dataclasses.replace(config, num_actors=0), export=False, resume=True)
    fewer = dataclasses.replace(config, num_actors=1, runner_mode="sync")
    result = train(fewer, export=False, resume=True)
    assert result.summary["resumed_from"].endswith("ckpt-256")
    assert [e["step"] for e in result.summary["evaluations"]] == [256, 512, 640]
    assert result.buffer.size == 640
    assert _updates(result) == 640 - config.learning_starts
    with open(os.path.join(config.run_dir, "progress.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert "runner1_env_steps_per_s" not in rows[0] and rows[-1]["policy_lag_max"] != ""
    # A finished run's files stay as they were (its columns were dropped: no runners now).
    before = open(os.path.join(config.run_dir, "progress.csv")).read()
    train(fewer, export=False, resume=True)
    assert open(os.path.join(config.run_dir, "progress.csv")).read() == before


def test_a_signal_while_the_runners_start_stops_them_before_training(tmp_path, monkeypatch):
    """A tester's: SIGINT inside Ray's start-up was a page of traceback or a segfault, and
    left Ray's processes. The signal waits until Ray and the runners are up, then they stop
    in one line."""
    from tfsac import train
    from tfsac.run.signals import StartInterrupted
    from tfsac.scale import runner_source

    real_start = runner_source.start_ray

    def start_with_a_signal(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return real_start(*args, **kwargs)

    monkeypatch.setattr(runner_source, "start_ray", start_with_a_signal)
    config = _config(tmp_path, num_actors=1)
    with pytest.raises(StartInterrupted, match="^SIGINT while the env runners started: stopped"):
        train(config, export=False)
    assert not os.path.exists(config.run_dir)
    assert isinstance(StartInterrupted(2, "x"), tfsac.Interrupted)  # train.py's exit 130

    # The reviewer's: ray.init puts its own SIGTERM handler (sys.exit) in place; the start
    # takes the signal back. A second signal stops at once (a runner may never start).
    def start_like_ray(*args, **kwargs):
        signal.signal(signal.SIGTERM, lambda *a: sys.exit("ray's handler"))
        return real_start(*args, **kwargs)

    real_pool = runner_source.RunnerPool

    def pool_after_signals(*args, signals=(signal.SIGTERM,)):
        for signum in signals:
            os.kill(os.getpid(), signum)
        return real_pool(*args)

    monkeypatch.setattr(runner_source, "start_ray", start_like_ray)
    monkeypatch.setattr(runner_source, "RunnerPool", pool_after_signals)
    with pytest.raises(StartInterrupted, match="^SIGTERM while the env runners started"):
        train(config, export=False)
    twice = lambda *args: pool_after_signals(*args, signals=(signal.SIGINT, signal.SIGINT))  # noqa: E731
    monkeypatch.setattr(runner_source, "RunnerPool", twice)
    with pytest.raises(KeyboardInterrupt):
        train(config, export=False)
    assert not os.path.exists(config.run_dir)


def test_a_sigterm_inside_ray_init_is_a_stop_by_signal(monkeypatch):
    """A tester's: a SIGTERM after ray.init put in its own handler (sys.exit(15)) and
    before it returned exited with status 15 and said nothing."""
    import ray

    from tfsac.run.signals import StartInterrupted
    from tfsac.scale.ray_cluster import start_ray

    def init_cut_by_sigterm(*args, **kwargs):
        sys.exit(signal.SIGTERM)  # what Ray's handler does

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init_cut_by_sigterm)
    with pytest.raises(StartInterrupted, match="^SIGTERM while Ray started: stopped") as e:
        start_ray(None, num_cpus=1)
    assert e.value.signum == signal.SIGTERM


def test_a_runner_that_ray_gives_up_on_is_one_line_with_its_cause():
    """A tester's: an env_fn whose module Ray's workers cannot import gave Ray's message
    with terminal colours and '5 restarts', not the missing module."""
    from tfsac.scale.runners import _actor_failure

    created = (
        "The actor died because of an error raised in its creation task, \x1b[36mray::"
        'EnvRunner.__init__()\x1b[39m (pid=1, ip=1.2.3.4)\n  File "x.py", line 1\n'
        "ModuleNotFoundError: No module named 'hiddenenvs'"
    )
    message = _actor_failure(RuntimeError(created), "start", None)
    assert message.startswith(
        "an env runner could not start: ModuleNotFoundError: No module named 'hiddenenvs' ("
    )
    assert "\x1b" not in message and "PYTHONPATH" in message
    chained = created + (
        "\n\nThe above exception was the direct cause of the following exception:\n\n"
        "gymnasium.error.DependencyNotInstalled: Could not import x: pip install gymnasium[x]"
    )
    assert _actor_failure(RuntimeError(chained), "start", None) == (
        "an env runner could not start: gymnasium.error.DependencyNotInstalled: Could not "
        "import x: pip install gymnasium[x]"
    )
    died = _actor_failure(RuntimeError("The actor died unexpectedly."), "collect", 1)
    assert died == (
        "env runner 1 could not collect: its process died more than 5 times (The actor died "
        "unexpectedly.); the run stops here: --resume continues it from its last checkpoint"
    )


class _FailingEnv(gym.Wrapper):
    def __init__(self):
        super().__init__(gym.make("Pendulum-v1"))
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 100:
            raise ValueError("simulator lost its state")
        return super().step(action)


def test_an_env_error_in_a_runner_stops_the_run_with_one_line(tmp_path):
    from tfsac import train

    with pytest.raises(TfsacError) as error:
        train(_config(tmp_path, num_actors=1), export=False, env_fn=_FailingEnv)
    message = str(error.value)
    assert message.startswith("env runner 0 stopped: its env raised: ValueError: ")
    assert "simulator lost its state" in message and "\n" not in message


def test_more_runners_than_the_cluster_has_cpus_is_refused_before_writing(tmp_path):
    from tfsac import train

    config = _config(tmp_path, num_actors=3)
    with pytest.raises(TfsacError, match="3 env runners need 3 free CPUs"):
        train(config)
    assert not os.path.exists(config.run_dir)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(num_envs=2, total_steps=320), "num_envs must be 1 with env runners"),
        (dict(use_sde=True), "use_sde \\(gSDE\\) does not work with env runners"),
        (dict(chunk_steps=30, envs_per_actor=4), "chunk_steps \\(30\\) must be a multiple"),
        (dict(chunk_steps=30, train_freq=4), "multiple of train_freq"),
        (dict(runner_mode="lockstep"), "runner_mode must be 'sync' or 'async'"),
        (dict(num_actors=-1), "num_actors must be >= 0"),
        (dict(weight_sync_every=0), "weight_sync_every must be a positive integer"),
    ],
)
def test_bad_runner_settings_are_one_line(tmp_path, overrides, message):
    with pytest.raises(TfsacError, match=message):
        resolve(_config(tmp_path, **overrides))


# A second Ray's start is 12 s of the default suite's 8 minutes; its refusal of connections
# without its token is checked there (test_the_local_ray_tfsac_starts_refuses_...).
@pytest.mark.slow
def test_train_script_with_runners_starts_its_own_ray_beside_a_foreign_one(tmp_path, ray_address):
    # The session's Ray stands for one that runs on the machine, announced by RAY_ADDRESS
    # as `ray start` does: without --ray_address the script leaves it alone. (Sweeps join
    # a cluster by address: tests/test_sweep.py.)
    nodes_before = [n["NodeID"] for n in ray.nodes()]
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        os.path.join(REPO_ROOT, "scripts", "train.py"),
        "--env=Pendulum-v1",
        "--total_steps=256",
        "--learning_starts=64",
        "--hidden_sizes=16",
        "--batch_size=16",
        "--log_every=128",
        "--eval_every=256",
        "--eval_episodes=1",
        "--jit_compile=false",
        "--num_actors=1",
        "--chunk_steps=32",
        f"--run_dir={run_dir}",
        f"--export_dir={tmp_path / 'export'}",
    ]
    env = {**os.environ, "RAY_ADDRESS": ray_address}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 env runner started (async" in done.stderr
    assert "| policy lag " in done.stderr and "| runners " in done.stderr
    assert (run_dir / "summary.json").exists()
    assert [n["NodeID"] for n in ray.nodes()] == nodes_before
    assert ray.available_resources().get("CPU") == 2  # nothing of the script's left here


_DRIVER_PID = os.getpid()


def _env_of_the_driver_only():
    if os.getpid() != _DRIVER_PID:
        raise RuntimeError("no simulator licence on this node")
    return gym.make("Pendulum-v1")


def test_a_runner_that_cannot_make_its_env_is_one_line(tmp_path):
    from tfsac import train

    config = _config(tmp_path, num_actors=1)
    with pytest.raises(TfsacError) as error:
        train(config, export=False, env_fn=_env_of_the_driver_only)
    assert str(error.value) == (
        "env runner 0: cannot make the env factory's env: RuntimeError: no simulator licence "
        "on this node"
    )
    assert not os.path.exists(config.run_dir)


def test_without_ray_runners_say_which_extra_to_install(tmp_path):
    env = env_without_ray(tmp_path)
    script = os.path.join(REPO_ROOT, "scripts", "train.py")
    proc = subprocess.run(
        [sys.executable, script, "--num_actors=2", f"--run_dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == ['error: env runners (num_actors > 0) need Ray: pip install -e ".[ray]"']
    assert not os.path.exists(tmp_path / "run")


_OUTSIDER = """
import os, subprocess, sys
from tfsac.scale.ray_cluster import require_ray, start_ray
require_ray("a test")
start_ray(None, num_cpus=1)
import ray
env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
join = "import ray; ray.init(address=sys.argv[1]); print('joined')"
outsider = subprocess.run(
    [sys.executable, "-c", "import sys; " + join, ray.get_runtime_context().gcs_address],
    env={**env, "RAY_gcs_server_port_wait_time_s": "1"}, capture_output=True, text=True,
)
print("outsider joined" if "joined" in outsider.stdout else "outsider refused")
print("token" if "InvalidAuthToken" in outsider.stderr else "no token error")
"""


def test_the_local_ray_tfsac_starts_refuses_connections_without_its_token(tmp_path):
    # Ray's servers listen on every interface: a random token, known to this process and
    # its children only, keeps anyone else on the network out.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    done = subprocess.run(
        [sys.executable, "-c", _OUTSIDER],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "outsider refused" in done.stdout and "token" in done.stdout, done.stdout


@pytest.mark.slow  # the runners' other tests cover them in the default run
def test_tqc_with_n_step_returns_and_simba_on_runners_exports_every_format(tmp_path):
    """The newer algorithm options go through the runners and every export format; SimBa's
    runners act in numpy, with the normaliser's statistics among the synced weights."""
    from tfsac import train

    config = _config(
        tmp_path,
        algorithm="tqc",
        n_quantiles=5,
        n_steps=3,
        network="simba",
        export_formats="saved_model,onnx",
    )
    result = train(config)
    assert result.summary["total_steps"] == 320 and _updates(result) > 0
    assert result.learner.sac.obs_normalizer.count.numpy() == 320
    assert os.path.isfile(os.path.join(result.saved_model_path, "policy.onnx"))


_FOUND_BY_WORKERS = """
import sys
sys.path.insert(0, sys.argv[1])  # a tfsac that only this process's sys.path edit finds
import tfsac
from tfsac.scale.ray_cluster import ray_options, workers_import_this_tfsac
assert tfsac.__file__.startswith(sys.argv[1]), tfsac.__file__
print(workers_import_this_tfsac(), "runtime_env" in ray_options(ship_tfsac=False))
"""


def test_a_local_ray_ships_tfsac_only_where_its_workers_would_not_import_it(tmp_path):
    # Workers with a runtime env are started one by one for it (16 runners ready in 10.4 s
    # against 6.4 s): the installed tfsac needs none, a copy found through sys.path does.
    from tfsac.scale.ray_cluster import ray_options, workers_import_this_tfsac

    assert workers_import_this_tfsac()
    assert "py_modules" in ray_options()["runtime_env"]
    shutil.copytree(os.path.dirname(tfsac.__file__), tmp_path / "copy" / "tfsac")
    proc = subprocess.run(
        [sys.executable, "-c", _FOUND_BY_WORKERS, str(tmp_path / "copy")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout.split() == ["False", "False"], proc.stderr[-2000:]
