"""scripts/train.py end to end, and its answers to bad input."""

import json
import os
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
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "step 300/300" in proc.stderr and "steps/s" in proc.stderr  # progress shown
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
    assert -2000 < summary["eval_return_mean"] <= 0
    assert summary["saved_model_path"] == str(tmp_path / "exports" / "pendulum_v1" / "1")

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
    "args, message",
    [
        (["--env=NoSuchEnv-v0"], "NoSuchEnv-v0"),
        (["--env=CartPole-v1"], "continuous actions"),
        (["--batch_size=0"], "batch_size"),
        (["--buffer_size=-5"], "buffer_size"),
        (["--total_steps=100", "--learning_starts=500"], "learning_starts"),
        (["--total_steps=abc"], "total_steps"),
        (["--alpha=often"], "--alpha"),
        (["--hidden_sizes=64,x"], "hidden_sizes"),
        (["--export_dir=blocker/sub"], "cannot write"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, args, message):
    (tmp_path / "blocker").write_text("a file where a directory should be")
    proc = _run([*args, "--run_dir=run"], cwd=tmp_path, timeout=120)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]
    assert not list(tmp_path.rglob("saved_model.pb"))
