"""A run constructs each of its envs once: num_envs training copies and the evaluation env
(eval_episodes=1: no evaluation copies beside it), which the start checks probe, not an
env of their own. Counted by a user module's env (`--env=countenv:CountingPendulum-v0`)
that adds a line to a file each time it is constructed (conftest's counting_env):
through scripts/train.py, its resume and tfsac.train; a sweep's trial in test_sweep.py."""

import dataclasses

import pytest
from conftest import COUNTING_ENV_ID, run_script, tiny_config

SHORT = [
    f"--env={COUNTING_ENV_ID}",
    "--total_steps=40",
    "--learning_starts=20",
    "--batch_size=8",
    "--hidden_sizes=8",
    "--eval_every=40",
    "--eval_episodes=1",
    "--log_every=20",
    "--jit_compile=false",
]


@pytest.mark.slow
def test_the_script_and_its_resume_construct_each_env_once(tmp_path, counting_env):
    args = [*SHORT, "--run_dir=run", "--export=false"]
    done = run_script("train", args, cwd=tmp_path)  # finds countenv in its folder
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(counting_env()) == 2
    done = run_script("train", [*args, "--total_steps=80", "--resume"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(counting_env()) == 2


def test_train_and_its_resume_construct_num_envs_plus_one(tmp_path, counting_env):
    """A bare config, which train checks itself (the script hands it a checked run)."""
    from tfsac import train

    config = tiny_config(tmp_path, COUNTING_ENV_ID, num_envs=2, export=False)
    train(config, quiet=True)
    assert len(counting_env()) == 3
    train(dataclasses.replace(config, total_steps=80), resume=True, quiet=True)
    assert len(counting_env()) == 3


def test_a_checked_run_is_taken_as_it_is(tmp_path, counting_env):
    """check_run's result, resolved and probed, goes to train unchanged; the options it
    holds are not given twice."""
    from tfsac.algorithm.resolve import is_resolved
    from tfsac.errors import TfsacError
    from tfsac.run.preflight import check_run

    checked = check_run(tiny_config(tmp_path, COUNTING_ENV_ID, algorithm="crossq"))
    assert is_resolved(checked.config) and checked.config.policy_delay == 3  # crossq's
    assert check_run(checked) is checked and len(counting_env()) == 1
    with pytest.raises(TfsacError, match="a checked run holds its export, resume and env_fn"):
        check_run(checked, resume=True)
    checked.eval_env.close()
