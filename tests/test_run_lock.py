"""One training process per run directory (tfsac/run/run_lock.py): a second is refused in
one line before it touches the run; the lock goes with the run's end, its failure or its
process."""

import glob
import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from conftest import tiny_config

from tfsac import TfsacError, Trainer, train

# Holds a run directory's lock (prints "held" once it does) until its stdin closes; with
# "try", says whether it could take the lock and exits.
HOLDER = """
import sys
from tfsac.errors import TfsacError
from tfsac.run.run_lock import RunLock
lock = RunLock(sys.argv[1])
try:
    lock.hold()
except TfsacError as e:
    print(e, flush=True)
    sys.exit(0)
print("held", flush=True)
if sys.argv[2] == "hold":
    sys.stdin.read()
"""


def _lock(run_dir, mode):
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _another_process_can_take(run_dir) -> bool:
    out, _ = _lock(run_dir, "try").communicate(timeout=60)
    return out.strip() == "held"


def _files(run_dir):
    return {
        os.path.relpath(os.path.join(d, f), run_dir): os.path.getmtime(os.path.join(d, f))
        for d, _, names in os.walk(run_dir)
        for f in names
    }


def test_a_second_process_is_refused_before_it_touches_the_run(tmp_path):
    config = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=20)
    train(config, export=False, quiet=True)
    assert _another_process_can_take(config.run_dir)  # the run's end let it go
    holder = _lock(config.run_dir, "hold")
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _files(config.run_dir)
        more = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=20, total_steps=80)
        message = (
            rf"run directory '.*run' is in use by another training process \(pid {holder.pid} on "
        )
        with pytest.raises(TfsacError, match=message):
            train(more, export=False, quiet=True, resume=True)
        assert _files(config.run_dir) == before  # nothing restored, moved or written
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    # The holder's end let it go: the resume continues.
    assert train(more, export=False, quiet=True, resume=True).summary["env_steps"] == 80


def test_a_new_run_holds_its_directory_while_it_trains_and_lets_go_on_failure(tmp_path):
    config = tiny_config(tmp_path, "Pendulum-v1", total_steps=60)
    seen = []

    def check(record):  # while training: another process is refused
        seen.append(_another_process_can_take(config.run_dir))

    train(config, export=False, quiet=True, on_log=check)
    assert seen and not any(seen)
    assert _another_process_can_take(config.run_dir)

    def broken_actor(*args):
        raise ValueError("no actor today")

    more = tiny_config(tmp_path, "Pendulum-v1", total_steps=80)
    with pytest.raises(ValueError, match="no actor today"):
        train(more, export=False, quiet=True, resume=True, actor_fn=broken_actor)
    assert _another_process_can_take(config.run_dir)  # the failed start let it go


def test_in_one_process_a_trainer_is_refused_while_another_trains_there_not_before(tmp_path):
    """Found by a reviewer (the POSIX lock of the first version): a second Trainer in the same
    process trained beside the first. A built Trainer holds nothing until it runs, so a
    notebook cell that builds one can run again, and a built one keeps no one else out."""
    config = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=20)
    train(config, export=False, quiet=True)
    more = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=20, total_steps=80)
    refused = []

    def build_another(record):
        with pytest.raises(TfsacError, match=r"'.*run' is in use by another Trainer of this pro"):
            Trainer(more, export=False, resume=True)
        refused.append(record["step"])

    first = Trainer(more, export=False, resume=True, on_log=build_another)
    assert _another_process_can_take(config.run_dir)
    Trainer(more, export=False, resume=True)  # the cell run again
    assert first.run().summary["env_steps"] == 80 and refused == [60, 80]
    assert _another_process_can_take(config.run_dir)


@pytest.mark.slow
def test_a_built_trainer_is_refused_once_another_trained_the_run_since(tmp_path):
    """A built Trainer holds the state it restored: run after another Trainer (or process)
    trained the run, it would have trained again from that state over the newer
    checkpoints. Its own checkpoints, and a run again after its own run, are not refused."""
    config = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=20)
    train(config, export=False, quiet=True)
    more = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=20, total_steps=80)
    stale, current = (Trainer(more, export=False, resume=True) for _ in range(2))
    assert current.run().summary["env_steps"] == 80
    before = _files(config.run_dir)
    before.pop("run.lock")  # the holder's pid, written when it takes the lock
    with pytest.raises(
        TfsacError,
        match=r"changed since this Trainer was built \(its newest "
        r"checkpoint is ckpt-80, this Trainer's ckpt-40\): build the Trainer",
    ):
        stale.run()
    assert {k: v for k, v in _files(config.run_dir).items() if k != "run.lock"} == before
    assert current.run().summary["env_steps"] == 80  # its own run: the finished one


@pytest.mark.slow
def test_a_built_trainer_drops_what_another_run_wrote_since_without_a_checkpoint(tmp_path):
    """A reviewer's: a run between the build and run() that stopped before any checkpoint
    left its rows and scalars, and run() wrote the same steps again."""
    config = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=40)
    train(config, export=False, quiet=True)
    more = tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=40, total_steps=120)
    built = Trainer(more, export=False, resume=True)

    def die(record):
        if record["step"] == 60:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        train(more, export=False, quiet=True, resume=True, on_log=die)
    built.run()
    progress = (tmp_path / "run" / "progress.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[0]) for row in progress] == [20, 40, 60, 80, 100, 120]
    steps = [
        event.step
        for path in sorted(glob.glob(str(tmp_path / "run" / "tensorboard" / "events.*")))
        for event in tf.compat.v1.train.summary_iterator(path)
        if any(v.tag == "learner/critic_loss" for v in event.summary.value)
    ]
    assert steps == [40, 60, 80, 100, 120]  # 20: warm-up


def test_the_lock_outlives_the_users_own_opening_of_its_file_and_forked_children(tmp_path):
    """A callback that backs the run directory up opens and closes run.lock (which let a
    POSIX lock go); a child forked while the run holds the lock does not keep it after."""
    import multiprocessing
    import shutil

    config = tiny_config(tmp_path, "Pendulum-v1", total_steps=60)
    seen, children = [], []

    def back_up_and_fork(record):
        shutil.copytree(config.run_dir, tmp_path / f"backup-{record['step']}")
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
        child.start()
        children.append(child)
        seen.append(_another_process_can_take(config.run_dir))

    try:
        train(config, export=False, quiet=True, on_log=back_up_and_fork)
        assert seen and not any(seen)
        assert all(child.is_alive() for child in children)
        assert _another_process_can_take(config.run_dir)  # the children hold nothing
    finally:
        for child in children:
            child.kill()  # SIGTERM: the run's handler, which the fork copied, takes it
            child.join()


def test_a_run_that_ends_by_an_exception_lets_go(tmp_path):
    config = tiny_config(tmp_path, "Pendulum-v1", total_steps=60)

    def boom(record):
        raise RuntimeError("the user's callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        train(config, export=False, quiet=True, on_log=boom)
    assert _another_process_can_take(config.run_dir)


def test_the_script_refuses_a_run_directory_in_use_in_one_line(tmp_path):
    from test_checkpointing import SCRIPT, SCRIPT_ARGS, _checkpoint_steps

    run_dir = tmp_path / "run"
    args = [sys.executable, SCRIPT, *SCRIPT_ARGS, "--total_steps=100000", f"--run_dir={run_dir}"]
    # Uncompiled updates: the first run may pass learning_starts before its SIGTERM, and the
    # lock and the refusal are all this checks.
    args += ["--export=false", "--jit_compile=false"]
    first = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not _checkpoint_steps(run_dir) and time.time() < deadline:
            time.sleep(0.5)
        second = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert second.stderr.strip().splitlines() == [
            f"error: run directory '{run_dir}' is in use by another training process (pid "
            f"{first.pid} on {os.uname().nodename}): wait for it to end, or stop it (SIGINT or "
            "SIGTERM saves a checkpoint) and continue it with --resume"
        ]
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=120)
    assert first.returncode == 128 + signal.SIGTERM  # the first run was left alone
    assert _another_process_can_take(run_dir)


def test_a_second_sweep_driver_on_a_sweep_directory_in_use_is_one_line(tmp_path):
    """Found by an independent tester: two drivers on one sweep folder each marked the
    other's trials as failed. The second is refused before it starts Ray."""
    from test_sweep import GRID, _command

    (tmp_path / "sweep").mkdir()
    holder = _lock(tmp_path / "sweep", "hold")
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = subprocess.run(
            _command([*GRID, "--sweep_dir=sweep", "--resume"]),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"error: sweep directory '{tmp_path / 'sweep'}' is in use by another training process (pid "
        f"{holder.pid} on {os.uname().nodename}): wait for it to end, or stop it (SIGINT or "
        "SIGTERM saves a checkpoint) and continue it with --resume"
    ]
    assert os.listdir(tmp_path / "sweep") == ["run.lock"]  # no sweep.json, no trials
