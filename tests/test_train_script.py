"""scripts/train.py end to end, and its answers to bad input."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, "scripts", "train.py")


def _run(args, cwd, timeout=600):
    return subprocess.run(
        [sys.executable, SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_tiny_run_writes_summary_and_servable_export(tmp_path):
    proc = _run(
        [
            "--env=Pendulum-v1",
            "--total_steps=300",
            "--learning_starts=100",
            "--batch_size=32",
            "--hidden_sizes=32,32",
            "--eval_every=300",
            "--eval_episodes=2",
            "--log_every=100",
            "--seed=3",
            "--run_dir=run",
            "--export_dir=exports",
            "--export_formats=saved_model,tflite",
            "--progress_bar=true",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "step 300/300" in proc.stderr and "steps/s" in proc.stderr  # progress shown
    # tfsac's lines only: no TF checkpoint timings, PyOpenGL notices or C++ start-up lines.
    for noise in ("Sharding callback", "OpenGL_accelerate", "cuInit", "cpu_feature_guard"):
        assert noise not in proc.stderr, noise
    # Short lines (time, then the message; absl's prefix only under --verbosity=1) go above
    # the progress bar: each starts a line, none follows the bar's text.
    assert not re.search(r"[IWE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \w+\.py:\d+\]", proc.stderr)
    headers = list(re.finditer(r"\d\d:\d\d:\d\d (step|eval|checkpoint|done)", proc.stderr))
    assert len(headers) >= 3 and "step/s]" in proc.stderr
    # The warm-up's steps/s would be the random policy's: its line says warm-up instead.
    assert re.search(
        r"\d\d:\d\d:\d\d step 100/300 \| episodes 0 \| return - \| warm-up\n", proc.stderr
    )
    for header in headers:
        assert header.start() == 0 or proc.stderr[header.start() - 1] in "\r\n", header
    # The last lines say which version was published and which one TF Serving serves.
    assert "version 1 of" in proc.stdout and "TF Serving serves the highest" in proc.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    for key in (
        "env",
        "seed",
        "total_steps",
        "eval_return_mean",
        "eval_return_std",
        "wall_time_s",
        "env_steps_per_s",
        "saved_model_path",
    ):
        assert key in summary, key
    assert (summary["env"], summary["seed"], summary["total_steps"]) == ("Pendulum-v1", 3, 300)
    # The summary is the last evaluation; Pendulum's reward per step lies in [-16.27, 0].
    final = summary["evaluations"][-1]
    assert (final["step"], summary["eval_return_mean"]) == (300, final["return_mean"])
    assert -16.28 * 200 <= summary["eval_return_mean"] <= 0
    rows = (tmp_path / "run" / "progress.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["100", "200", "300"]
    assert summary["saved_model_path"] == str(tmp_path / "exports" / "pendulum_v1" / "1")
    assert (tmp_path / "exports" / "pendulum_v1" / "1" / "policy.tflite").is_file()
    # Both paths absolute, whichever way --run_dir and --export_dir were given.
    assert summary["checkpoint"] == str(tmp_path / "run" / "checkpoints" / "ckpt-300")

    # The export answers through saved_model_cli (TF Serving's C++ loader), within bounds.
    out = tmp_path / "cli_out"
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "tensorflow.python.tools.saved_model_cli",
            "run",
            "--dir",
            summary["saved_model_path"],
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--input_exprs",
            "observation=[[1.0, 0.0, 0.0], [0.0, 1.0, -8.0]]",
            "--outdir",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    action = np.load(out / "action.npy")
    assert action.shape == (2, 1) and np.all(np.abs(action) <= 2.0)


@pytest.mark.parametrize(
    "script", ["train.py", "evaluate.py", "plot.py", "benchmark.py", "sweep.py"]
)
def test_help_lists_the_scripts_own_flags_and_exits_0(script):
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "scripts", script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    own = {
        "train.py": ["--env=Pendulum-v1", "--total_steps=20000", "--export=true"],
        "evaluate.py": ["--saved_model=", "--episodes=", "--video_dir="],
        "plot.py": ["--run_dirs=", "--out=learning_curves.png"],
        "benchmark.py": ["--steps=3200", "--peers=false", "--total_steps=20000"],
        "sweep.py": ["--sweep_dir=none", "--resume=false: continue the sweep in --sweep_dir"],
    }[script]
    for text in own:
        assert text in proc.stdout, text
    spaced = [line for line in proc.stdout.splitlines() if re.search(r"\S {3,}\S", line)]
    assert not spaced, spaced  # a docstring's line continuation joined into one line
    if script == "sweep.py":  # flags that the sweep sets per trial are not shown
        for hidden in ("--run_dir=", "--export_dir=", "--num_actors="):
            assert hidden not in proc.stdout, hidden
    if script in ("train.py", "benchmark.py"):  # the training flags, grouped
        for group in ("Environment:", "Optimisation:", "Entropy temperature:", "Run:"):
            assert group in proc.stdout, group


@pytest.mark.slow
def test_export_false_trains_without_publishing(tmp_path):
    args = ["--total_steps=200", "--learning_starts=100", "--hidden_sizes=16,16"]
    args += ["--eval_every=200", "--eval_episodes=1", "--run_dir=run", "--export=false"]
    proc = _run(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "saved_model: none (--export=false)" in proc.stdout
    assert not (tmp_path / "saved_models").exists()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["saved_model_path"] is None


@pytest.mark.slow  # the library-quiet and tiny-run output tests cover the default run
def test_a_mujoco_run_prints_tfsac_lines_only(tmp_path):
    """The start checks make the env before TF is imported: MuJoCo's imports and its notices
    about gymnasium's own XML must already be filtered then."""
    proc = _run(
        [
            "--env=HalfCheetah-v5",
            '--env_kwargs={"max_episode_steps": 20}',
            "--total_steps=40",
            "--learning_starts=30",
            "--batch_size=8",
            "--hidden_sizes=8",
            "--eval_every=40",
            "--eval_episodes=1",
            "--run_dir=run",
            "--export=false",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for noise in ("OpenGL_accelerate", "settotalmass", "is deprecated"):
        assert noise not in proc.stderr, noise


@pytest.mark.slow
def test_stop_flags_end_the_run_cleanly_and_keep_the_best(tmp_path):
    args = [
        "--env=Pendulum-v1",
        "--total_steps=400",
        "--learning_starts=400",  # no updates: the stop is all this checks
        "--hidden_sizes=8",
        "--eval_every=100",
        "--eval_episodes=1",
        "--run_dir=run",
        "--export_dir=exports",
        "--stop_at_return=-1e9",
        "--stop_after_no_improvement=1",  # reachable: 3 evaluations before the end's
        "--min_evaluations=1",
        "--keep_best",
    ]
    proc = _run(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        f"stopped at step 100: evaluation return {_summary(tmp_path)['eval_return_mean']:.2f} "
        "reached -1e+09 at step 100 (stop_at_return)"
    )
    # The run directory as TrainResult gives it: absolute (since 3fbc961).
    best = [line[len("best: ") :] for line in lines if line.startswith("best: ")]
    assert [os.path.realpath(b) for b in best] == [os.path.realpath(tmp_path / "run" / "best")]
    assert os.listdir(tmp_path / "run" / "best") == ["1"]
    assert os.path.isfile(tmp_path / "exports" / "pendulum_v1" / "1" / "saved_model.pb")
    # --resume with the same settings: the stopped run is complete.
    again = _run(["--run_dir=run", "--resume"], cwd=tmp_path)
    assert again.returncode == 0 and "already complete" in again.stderr, again.stderr[-3000:]
    assert os.listdir(tmp_path / "exports" / "pendulum_v1") == ["1"]
    # Its export is named as the finished run's, not as a version this call published.
    assert "(exported when the run finished)" in again.stdout and "replaces" not in again.stdout
    # What continues it is the stop option that ended it (a tester took the one hint given
    # for all, --stop_at_return=none, to a run no improvement stopped). Turning the other
    # off too keeps the saved min_evaluations, which refused it.
    hint = "a resume with stop_at_return=None (--stop_at_return=none) continues it"
    assert hint in again.stderr, again.stderr[-3000:]
    off = ["--stop_at_return=none", "--stop_after_no_improvement=0", "--export=false"]
    on = _run(["--run_dir=run", "--resume", *off], cwd=tmp_path)
    assert on.returncode == 0, on.stderr[-3000:]
    assert _summary(tmp_path)["env_steps"] == 400 and _summary(tmp_path)["stop"] is None


def _summary(tmp_path):
    return json.loads((tmp_path / "run" / "summary.json").read_text())


def test_the_starts_warnings_are_said_once(tmp_path):
    """train.py checks the start without TensorFlow, then train() checks it again: the
    first check's warnings came twice (a reviewer's)."""
    args = ["--env=Pendulum-v1", "--alpha=0.2", "--initial_alpha=0.5", "--total_steps=200"]
    args += ["--learning_starts=200", "--eval_episodes=1", "--export=false", "--run_dir=run"]
    proc = _run(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("initial_alpha=0.5 is not read: alpha is fixed at 0.2") == 1
