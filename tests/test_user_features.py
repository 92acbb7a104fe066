"""What users get around training: observation spaces, env arguments and modules,
TensorBoard, the progress bar, videos, plots, presets and scripts/evaluate.py."""

import glob
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from conftest import REPO_ROOT, SpaceEnv, tiny_config

from tfsac import TfsacError, train
from tfsac.algorithm.resolve import resolve
from tfsac.run.plotting import plot_runs
from tfsac.run.run_groups import RunGroup

_config = tiny_config


SPACES = {
    "box2d": gym.spaces.Box(-1, 1, (2, 3), np.float32),
    "discrete": gym.spaces.Discrete(5),
    "multidiscrete": gym.spaces.MultiDiscrete([3, 4]),
    "multibinary": gym.spaces.MultiBinary(4),
    "dict": gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "mode": gym.spaces.Discrete(3)}),
    "tuple": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (3,)))),
}
for _name, _space in SPACES.items():
    gym.register(
        f"tfsac-test/Space-{_name}-v0", entry_point=SpaceEnv, kwargs={"observation_space": _space}
    )


@pytest.mark.parametrize("name", sorted(SPACES))
def test_observation_spaces_are_flattened_for_training_and_serving(tmp_path, name):
    result = train(_config(tmp_path, f"tfsac-test/Space-{name}-v0"))
    flat = gym.spaces.flatdim(SPACES[name])
    assert result.spec.obs_dim == flat
    model = tf.saved_model.load(result.saved_model_path)
    action = model.signatures["serving_default"](observation=tf.zeros([2, flat]))["action"]
    assert action.shape == (2, 2)
    metadata = json.loads(model.signatures["metadata"]()["metadata"].numpy())
    assert metadata["observation_dim"] == flat
    assert "flatten" in metadata["observation_flattening"]
    # TF Serving's warm-up requests hold observations of the space, flattened.
    from tensorflow_serving.apis import prediction_log_pb2

    warmup = os.path.join(result.saved_model_path, "assets.extra", "tf_serving_warmup_requests")
    for record in tf.data.TFRecordDataset(warmup):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        flat_obs = tf.make_ndarray(request.inputs["observation"])
        assert flat_obs.shape[1] == flat
        assert all(gym.spaces.unflatten(SPACES[name], row) in SPACES[name] for row in flat_obs)


@pytest.mark.parametrize(
    "space, part",
    [
        (gym.spaces.Text(5), "is a Text"),  # it flattens (to character indices) but no JSON
        (gym.spaces.Sequence(gym.spaces.Discrete(2)), "is a Sequence"),
        (
            gym.spaces.Dict(
                {
                    "t": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.MultiDiscrete([2]))),
                    "s": gym.spaces.Sequence(gym.spaces.Discrete(2)),
                }
            ),
            r"\['s'\] is a Sequence",
        ),
        (gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Text(3))), r"\[1\] is a Text"),
    ],
)
def test_an_unsupported_observation_space_is_one_line_naming_its_part(tmp_path, space, part):
    with pytest.raises(
        TfsacError, match=f"unsupported observation space: {part} .tfsac takes"
    ) as e:
        train(_config(tmp_path, "Pendulum-v1"), env_fn=lambda: SpaceEnv(space), export=False)
    assert "\n" not in str(e.value)
    assert not os.path.exists(tmp_path / "run")


def test_discrete_action_space_is_refused_with_a_clear_message(tmp_path):
    with pytest.raises(TfsacError, match="SAC needs continuous actions"):
        train(_config(tmp_path, "CartPole-v1"))


def test_env_kwargs_reach_gymnasium(tmp_path):
    from tfsac import Trainer

    trainer = Trainer(_config(tmp_path, "Pendulum-v1", env_kwargs={"g": 3.5}), export=False)
    assert trainer.evaluator.env.unwrapped.g == 3.5
    assert all(g == 3.5 for g in trainer.source.collector.env.get_attr("g"))
    with pytest.raises(TfsacError, match="rejects its arguments"):
        Trainer(_config(tmp_path, "Pendulum-v1", "bad", env_kwargs={"no_such_arg": 1}))


def test_env_from_a_user_module(tmp_path, monkeypatch):
    (tmp_path / "my_envs.py").write_text(
        textwrap.dedent("""
        import gymnasium as gym
        gym.register("MyPendulum-v0", entry_point="gymnasium.envs.classic_control:PendulumEnv",
                     max_episode_steps=20)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = train(_config(tmp_path, "my_envs:MyPendulum-v0"), export=False)
    assert result.summary["episodes"] == 2
    with pytest.raises(TfsacError, match="missing module"):
        train(_config(tmp_path, "not_a_module_xyz:Env-v0", "bad"))
    # A failed start leaves no run directory and no model folder under export_dir.
    assert not (tmp_path / "bad").exists() and not (tmp_path / "export").exists()


def test_a_script_run_by_its_path_finds_an_env_module_in_the_current_directory(tmp_path):
    """As `python -m` does: scripts/train.py puts its own folder on sys.path, not the
    current directory; the module is found there all the same (and nowhere else first)."""
    (tmp_path / "here_envs.py").write_text(
        'import gymnasium as gym\ngym.register("HerePendulum-v0", '
        'entry_point="gymnasium.envs.classic_control:PendulumEnv")\n'
    )
    (tmp_path / "elsewhere").mkdir()
    script = tmp_path / "elsewhere" / "make.py"  # sys.path[0] is its folder, as for train.py
    script.write_text(
        "import sys\nfrom tfsac.data.envs import make_env\n"
        "print(make_env('here_envs:HerePendulum-v0').spec.id)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.strip() == "HerePendulum-v0"


def _scalar_tags(run_dir):
    tags = set()
    for path in glob.glob(os.path.join(run_dir, "tensorboard", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(v.tag for v in event.summary.value)
    return tags


def test_tensorboard_and_progress_csv(tmp_path):
    # 450 is no multiple of log_every: the last row is the run's last step's.
    train(
        _config(tmp_path, "Pendulum-v1", total_steps=450, log_every=200, eval_every=200),
        export=False,
    )
    tags = _scalar_tags(str(tmp_path / "run"))
    for tag in (
        "learner/critic_loss",
        "learner/actor_loss",
        "learner/alpha",
        "learner/entropy",
        "learner/q_mean",
        "train/episode_return",
        "train/episode_length",
        "train/env_steps_per_s",
        "eval/return_mean",
    ):
        assert tag in tags, tags
    rows = (tmp_path / "run" / "progress.csv").read_text().splitlines()
    assert rows[0].startswith("step,episodes,episode_return,episode_length,env_steps_per_s")
    assert [r.split(",")[0] for r in rows[1:]] == ["200", "400", "450"]


@pytest.mark.slow  # a display option; the default run keeps the default suite under 8 minutes
def test_progress_bar_on_request(tmp_path, capsys):
    # tqdm's bar: '100%|██████████| 40/40 [00:02<00:00, 19.1step/s]'
    bar = re.compile(r"\| 40/40 \[[^\]]*step/s")
    train(_config(tmp_path, "Pendulum-v1", progress_bar=True), export=False)
    assert bar.search(capsys.readouterr().err)
    train(_config(tmp_path, "Pendulum-v1", name="off", progress_bar=False), export=False)
    err = capsys.readouterr().err
    assert " step 40/40 | " in err and not bar.search(err), err  # the lines, not the bar


def test_video_of_a_mujoco_evaluation(tmp_path):
    """MuJoCo renders headless through EGL (.ci/run installs libegl1 + Mesa)."""
    cfg = _config(tmp_path, "HalfCheetah-v5", video_every=1, env_kwargs={"max_episode_steps": 15})
    train(cfg, export=False)
    videos = glob.glob(str(tmp_path / "run" / "videos" / "step-40*.mp4"))
    assert len(videos) == 1 and os.path.getsize(videos[0]) > 1000


# Unset on a headless machine (where SDL's Wayland probe printed an `error:` line).
DISPLAY_VARIABLES = ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR")


def _without_display():
    return {k: v for k, v in os.environ.items() if k not in DISPLAY_VARIABLES}


def test_video_progress_and_log_lines(tmp_path, capfd, caplog, monkeypatch):
    from tfsac.run.evaluation import record_video

    for name in DISPLAY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.INFO, logger="absl")
    returns = record_video(
        "Pendulum-v1",
        lambda obs: np.zeros((1, 1), np.float32),
        str(tmp_path / "videos"),
        "zero",
        episodes=2,
        seed=0,
        env_kwargs={"max_episode_steps": 12},
        progress=True,
    )
    assert len(returns) == 2
    for i in range(2):
        assert os.path.getsize(tmp_path / "videos" / f"zero-episode-{i}.mp4") > 1000
    err = capfd.readouterr().err  # the render worker's and ffmpeg's stderr too
    assert "/13" in err and "frame" in err, err  # the bar: the reset's frame + 12 steps
    assert not [line for line in err.splitlines() if line.startswith("error:")], err
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("recording Pendulum-v1 episode 1 to ") for m in logged), logged
    assert any(m.startswith("wrote ") and ": 13 frames in " in m for m in logged), logged


def test_a_stop_request_ends_a_video_at_once_and_removes_it(tmp_path, monkeypatch, caplog):
    """Found by an independent tester: Ctrl-C waited for the evaluation's video (about a
    minute for MuJoCo) before the checkpoint and the exit."""
    from tfsac.run.evaluation import record_video

    for name in DISPLAY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.INFO, logger="absl")
    calls = []

    def policy(obs):
        calls.append(1)
        return np.zeros((1, 1), np.float32)

    record_video(
        "Pendulum-v1",
        policy,
        str(tmp_path / "videos"),
        "stopped",
        episodes=2,
        env_kwargs={"max_episode_steps": 50},
        stop=lambda: len(calls) >= 5,  # as the trainer's flag after a SIGINT at frame 6
    )
    assert len(calls) == 5 and os.listdir(tmp_path / "videos") == []  # no second episode
    logged = [r.getMessage() for r in caplog.records]
    assert any("stopped-episode-0.mp4 at a stop request; removed it" in m for m in logged)


def _plot_cli(run_dirs, out):
    return subprocess.run(
        [
            sys.executable,
            os.path.join(REPO_ROOT, "scripts", "plot.py"),
            f"--run_dirs={','.join(run_dirs)}",
            f"--out={out}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_plot_from_several_seeds(tmp_path):
    runs = []
    for seed in (0, 1):
        cfg = _config(
            tmp_path,
            "Pendulum-v1",
            name=f"seed{seed}",
            seed=seed,
            total_steps=400,
            log_every=100,
            eval_every=200,
        )
        runs.append(train(cfg, export=False).run_dir)
    out = plot_runs(runs, str(tmp_path / "curves.png"))
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(out) > 20_000
    group = RunGroup("Pendulum-v1", [])
    one, two = [{"finished": True}], [{"finished": True}] * 2
    assert (group.legend(one), group.legend(two)) == (
        "Pendulum-v1 (1 seed)",
        "Pendulum-v1 (2 seeds)",
    )
    cli = _plot_cli(runs, tmp_path / "cli.png")
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert os.path.getsize(tmp_path / "cli.png") > 20_000
    assert not cli.stderr.strip(), cli.stderr  # the seeds cover the same steps: no warning
    # A shorter run beside them (its copy cut at step 200): each run over its own steps,
    # and a warning, instead of curves cut to the common steps and an empty eval panel.
    short = str(tmp_path / "short")
    shutil.copytree(runs[1], short)
    with open(os.path.join(short, "progress.csv")) as f:
        lines = f.read().splitlines()
    with open(os.path.join(short, "progress.csv"), "w") as f:
        f.write("\n".join(lines[:3]) + "\n")  # header, steps 100 and 200
    with open(os.path.join(short, "summary.json")) as f:
        summary = json.load(f)
    summary["evaluations"] = summary["evaluations"][:1]
    with open(os.path.join(short, "summary.json"), "w") as f:
        json.dump(summary, f)
    notes = []
    plot_runs([runs[0], short], str(tmp_path / "mixed.png"), notes=notes)
    assert len(notes) == 1 and notes[0].startswith("Pendulum-v1: the runs cover different")
    assert "ending at 200, 400" in notes[0] and "evaluation return" in notes[0], notes
    cli = _plot_cli([runs[0], short], tmp_path / "mixed_cli.png")
    assert cli.returncode == 0 and cli.stderr.strip() == f"warning: {notes[0]}", cli.stderr
    with pytest.raises(TfsacError, match="not a tfsac run directory"):
        plot_runs([str(tmp_path)], str(tmp_path / "x.png"))
    with pytest.raises(TfsacError, match="unsupported image format 'xyz'"):
        plot_runs(runs, str(tmp_path / "x.xyz"))
    with pytest.raises(TfsacError, match="no run directories"):
        plot_runs([], str(tmp_path / "x.png"))
    # No extension: the PNG matplotlib writes, under the name returned.
    assert plot_runs(runs, str(tmp_path / "noext")) == str(tmp_path / "noext.png")
    assert os.path.isfile(tmp_path / "noext.png")
    # A run without progress rows (shorter than log_every) still plots its evaluations.
    os.remove(os.path.join(runs[0], "progress.csv"))
    assert os.path.isfile(plot_runs(runs[:1], str(tmp_path / "evals_only.png")))
    with open(os.path.join(runs[1], "summary.json"), "w") as f:
        f.write("{ not json")
    with pytest.raises(TfsacError, match="cannot read .*summary.json"):
        plot_runs(runs[1:], str(tmp_path / "y.png"))


def test_presets_parse_into_valid_configs(training_flags):
    import _cli

    import tfsac

    fv = training_flags
    presets = sorted(glob.glob(os.path.join(REPO_ROOT, "scripts", "presets", "*.flags")))
    assert len(presets) == 23
    seen, algorithms = set(), set()
    for path in presets:
        fv.unparse_flags()
        fv(["train.py", f"--flagfile={path}"])
        config = resolve(_cli.config_from_flags(tfsac))
        with open(path) as f:
            text = f.read()
        if config.env_id.startswith("gymnasium_robotics:"):  # the robotics extra's envs
            assert 'pip install -e ".[robotics]"' in text
        else:
            gym.spec(config.env_id)  # the id exists in gymnasium's registry
        seen.add(config.env_id)
        algorithms.add(config.algorithm)
        assert "Source:" in text
        # What it costs on the project's CPU, and the budget's length at that speed.
        assert re.search(r"# Speed: about [\d.]+ env steps/s .*\n.*\n# about [\d.]+ \w+\.", text)
    fv.unparse_flags()
    assert {"Pendulum-v1", "HalfCheetah-v5", "Humanoid-v5", "BipedalWalker-v3"} <= seen
    assert "gymnasium_robotics:FetchReach-v4" in seen
    assert algorithms == {"sac", "tqc", "crossq", "flashsac", "xqc"}


EVALUATE = os.path.join(REPO_ROOT, "scripts", "evaluate.py")


@pytest.mark.slow  # MuJoCo rendering: minutes of the 8 the default run may take
def test_evaluate_script_saved_model_checkpoint_and_video(tmp_path):
    result = train(_config(tmp_path, "Pendulum-v1", checkpoint_every=20))
    out = subprocess.run(
        [
            sys.executable,
            EVALUATE,
            f"--saved_model={result.saved_model_path}",
            "--episodes=2",
            f"--video_dir={tmp_path / 'videos'}",
            '--env_kwargs={"max_episode_steps": 10}',
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_without_display(),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["env"] == "Pendulum-v1" and report["episodes"] == 2
    videos = sorted(glob.glob(str(tmp_path / "videos" / "*.mp4")))
    assert len(videos) == 2 and all(os.path.getsize(v) > 1000 for v in videos)
    # Named by the policy and the starts: other evaluations into the folder sit beside.
    seed = report["seed"]
    expected = [f"pendulum_v1-v1-seed{seed}-episode-{i}.mp4" for i in (0, 1)]
    assert [os.path.basename(v) for v in videos] == expected
    # A run that succeeds prints no `error:` line, from the render worker neither.
    assert not [line for line in out.stderr.splitlines() if line.startswith("error:")], out.stderr
    assert out.stderr.count(": 11 frames in ") == 2, out.stderr
    out = subprocess.run(
        [sys.executable, EVALUATE, f"--run_dir={result.run_dir}", "--episodes=1", "--stochastic"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "over 1 stochastic episodes" in out.stdout
    assert f"checkpoint: {result.run_dir}/checkpoints/ckpt-40 (step 40)" in out.stdout


@pytest.mark.slow
def test_evaluate_script_repeats_the_final_evaluation_and_checks_the_env(tmp_path):
    result = train(_config(tmp_path, "Pendulum-v1", checkpoint_every=20))
    # With no --seed and --episodes, both sources repeat the run's final evaluation.
    final = result.summary["evaluations"][-1]
    for source in (f"--saved_model={result.saved_model_path}", f"--run_dir={result.run_dir}"):
        out = subprocess.run(
            [sys.executable, EVALUATE, source], capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr[-2000:]
        report = json.loads(out.stdout.strip().splitlines()[-1])
        assert (report["seed"], report["episodes"]) == (final["seed"], 1)
        assert report["return_mean"] == pytest.approx(final["return_mean"], rel=1e-4)
        # The weights' own evaluation is named by its step (--step may name an older one).
        assert f"the training run's evaluation at step {final['step']} (same seed" in out.stdout
    other_env = subprocess.run(
        [sys.executable, EVALUATE, f"--run_dir={result.run_dir}", "--env=MountainCarContinuous-v0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in other_env.stderr.splitlines() if line.strip()]
    assert other_env.returncode == 2 and len(lines) == 1, other_env.stderr[-2000:]
    assert "2-dimensional observations; the policy takes 3" in lines[0]


@pytest.mark.slow
def test_evaluate_script_adds_env_kwargs_to_the_runs_and_says_env_errors_in_one_line(tmp_path):
    """A tester's: --env_kwargs replaced the run's (a video size dropped its time limit),
    and arguments the env rejects were a traceback."""
    config = _config(tmp_path, "Pendulum-v1", env_kwargs={"max_episode_steps": 30})
    result = train(config, export=False)

    def evaluate(kwargs):
        args = [EVALUATE, f"--run_dir={result.run_dir}", "--episodes=1", f"--env_kwargs={kwargs}"]
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)

    done = evaluate('{"g": 9.0}')
    assert done.returncode == 0, done.stderr[-2000:]
    assert "env_kwargs: {'max_episode_steps': 30, 'g': 9.0} (the run's: {'max_epi" in done.stdout
    for kwargs, message in [
        ('{"max_episode_steps": -5}', "cannot make environment 'Pendulum-v1': ValueError: "),
        ('{"g": "x"}', "Pendulum-v1 raised: TypeError: "),
    ]:
        done = evaluate(kwargs)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
        assert message in lines[0]


def test_a_video_folder_that_is_a_file_is_refused_before_anything_is_written(tmp_path):
    """A tester's: the first video refused it after config.json and env_spec.json were
    written, and the same command then found a run there."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "videos").write_text("x")
    config = _config(tmp_path, "Pendulum-v1", video_every=1)
    with pytest.raises(TfsacError, match=r"the video folder '.*videos' is a file, not a folder"):
        train(config, export=False)
    assert os.listdir(tmp_path / "run") == ["videos"]


def test_evaluation_checks_the_env_against_the_policy():
    from tfsac.data.env_checks import check_env_fits
    from tfsac.data.envs import remade_env_spec

    pendulum = {"observation_dim": 3, "action_low": [-2.0], "action_high": [2.0]}
    check_env_fits("Pendulum-v1", remade_env_spec("Pendulum-v1"), pendulum)
    check_env_fits(
        "Pendulum-v1", remade_env_spec("Pendulum-v1"), {}
    )  # no metadata: nothing to compare
    with pytest.raises(TfsacError, match="not the policy's"):
        check_env_fits(
            "Pendulum-v1", remade_env_spec("Pendulum-v1"), {**pendulum, "action_low": [-1.0]}
        )
    with pytest.raises(TfsacError, match="17-dimensional observations; the policy takes 3"):
        check_env_fits("HalfCheetah-v5", remade_env_spec("HalfCheetah-v5"), pendulum)


def test_an_env_fn_env_says_how_to_evaluate_it():
    from tfsac.data.envs import make_env

    with pytest.raises(TfsacError) as error:
        make_env("custom:GoToTarget")
    message = str(error.value)
    assert "made by an env_fn (GoToTarget)" in message and "\n" not in message
    assert "--env=<module>:<id>" in message and "run_episodes(env_fn(), policy" in message
    assert "pass the same env_fn= (train, resume)" in message


def _scalar_steps(run_dir, tag):
    paths = sorted(glob.glob(os.path.join(run_dir, "tensorboard", "events.out.tfevents.*")))
    return [
        event.step
        for path in paths
        for event in tf.compat.v1.train.summary_iterator(path)
        if any(v.tag == tag for v in event.summary.value)
    ]


def test_a_resume_drops_the_killed_sessions_tensorboard_scalars(tmp_path):
    """TensorBoard drew both sessions' points between the checkpoint and the interruption
    (a killed session's scalars after the checkpoint stayed in its event file)."""
    config = _config(tmp_path, "Pendulum-v1", total_steps=80, checkpoint_every=40)

    def die(record):
        if record["step"] == 60:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        train(config, export=False, on_log=die)
    run_dir = str(tmp_path / "run")
    assert _scalar_steps(run_dir, "learner/critic_loss") == [40, 60]  # 20: warm-up
    # The kill cut the file's last record short, too: the whole records before it are kept.
    (old,) = glob.glob(os.path.join(run_dir, "tensorboard", "events.out.tfevents.*"))
    with open(old, "ab") as f:
        f.write(b"\x10\x00\x00")
    # Its files' times say nothing (a reviewer's: a run directory copied without them).
    os.utime(old, (0, 0))
    train(config, export=False, resume=True)
    assert all(n.startswith("events") for n in os.listdir(os.path.join(run_dir, "tensorboard")))
    assert _scalar_steps(run_dir, "learner/critic_loss") == [40, 60, 80]
    assert _scalar_steps(run_dir, "eval/return_mean") == [40, 80]
