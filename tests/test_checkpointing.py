"""Checkpoints: full round trip, exact resume, determinism, refusals, faults."""

import csv
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from conftest import REPO_ROOT, run_script

import tfsac
from tfsac import SACConfig, TfsacError, Trainer
from tfsac.deploy.policy import checkpoint_policy
from tfsac.run.updates import NonFiniteError

METRICS = ("critic_loss", "actor_loss", "alpha", "alpha_loss", "entropy", "q_mean")


def _config(run_dir, **kw):
    defaults = dict(
        env_id="Pendulum-v1",
        total_steps=300,
        learning_starts=100,
        batch_size=32,
        hidden_sizes=(16, 16),
        eval_every=150,
        eval_episodes=1,
        log_every=50,
        checkpoint_every=100,
        run_dir=str(run_dir),
        deterministic=True,
        buffer_size=10_000,
        # Bookkeeping, not compiled numerics: the tests that compare the XLA-compiled runs
        # (an exact resume, the same seed) ask for jit_compile=True, the default.
        jit_compile=False,
    )
    defaults.update(kw)
    return SACConfig(**defaults)


def _run(run_dir, resume=False, **kw):
    records = []
    trainer = Trainer(_config(run_dir, **kw), export=False, resume=resume, on_log=records.append)
    trainer.run()
    return trainer, [
        {k: r[k] for k in ("step", "episode_return", *METRICS) if k in r} for r in records
    ]


def _all_variables(trainer):
    """Every variable a checkpoint holds (RNGs as their state), in a fixed order."""
    variables = []
    for _, obj in sorted(trainer.learner.checkpoint_objects().items()):
        if isinstance(obj, tf.random.Generator):
            variables.append(obj.state)
        elif isinstance(obj, tf.Variable):
            variables.append(obj)
        else:
            variables.extend(obj.variables)
    return variables


def _assert_same_state(a, b):
    va, vb = _all_variables(a), _all_variables(b)
    assert len(va) == len(vb)
    for x, y in zip(va, vb, strict=True):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.slow  # the golden reference checks the same in the default suite
def test_same_seed_gives_identical_runs(tmp_path):
    _, first = _run(tmp_path / "a", jit_compile=True)
    _, second = _run(tmp_path / "b", jit_compile=True)
    assert first == second and len(first) == 6 and "critic_loss" in first[-1]


@pytest.mark.parametrize(
    "options",
    [
        {},
        pytest.param({"variant": "v1", "use_sde": True}, marks=pytest.mark.slow),
        # Its held exploration noise and reward statistics (max |G|) are a checkpoint's too.
        pytest.param(
            {"algorithm": "flashsac", "critic_hidden_sizes": (16,)}, marks=pytest.mark.slow
        ),
        pytest.param({"algorithm": "xqc", "critic_hidden_sizes": (16,)}, marks=pytest.mark.slow),
    ],
    ids=["default", "v1+gsde", "flashsac", "xqc"],
)
def test_resume_restores_everything_exactly(tmp_path, options):
    options = {"jit_compile": True, **options}  # the default's compiled updates
    full, _ = _run(tmp_path / "full", total_steps=200, **options)
    # A second run stopped at 100 (the checkpoint) and resumed on to 200 ...
    _run(tmp_path / "split", total_steps=100, **options)
    resumed = Trainer(
        _config(tmp_path / "split", total_steps=200, **options), export=False, resume=True
    )
    # ... restores the learner, the optimizers' moments, RNGs and buffer of step 100
    # bit for bit: compare with the uninterrupted run's checkpoint at step 100.
    reference = Trainer(_config(tmp_path / "ref", total_steps=200, **options), export=False)
    reference.checkpointer.restore(
        os.path.join(tmp_path / "full", "checkpoints", "ckpt-100"), reference.buffer
    )
    assert resumed.loop.step == 100 and resumed.resumed_from.endswith("ckpt-100")
    _assert_same_state(resumed, reference)
    for name in ("observation", "action", "reward", "next_observation", "terminated"):
        np.testing.assert_array_equal(
            getattr(resumed.buffer, name)[:100], getattr(reference.buffer, name)[:100]
        )
    assert int(resumed.learner.sac.critic_optimizer.iterations.numpy()) == 0  # 100 <= starts
    resumed.run()
    assert resumed.loop.step == 200
    # The history continues: the split run evaluated at its end (100), then 150 and 200.
    assert [e["step"] for e in resumed.loop.evaluations] == [100, 150, 200]
    times = [e["wall_time_s"] for e in resumed.loop.evaluations]  # on from the first session's
    assert times == sorted(times) and times[1] > times[0] > 0
    assert (
        int(resumed.learner.sac.critic_optimizer.iterations.numpy())
        == int(full.learner.sac.critic_optimizer.iterations.numpy())
        == 100
    )
    progress = (tmp_path / "split" / "progress.csv").read_text().splitlines()
    assert [int(r.split(",")[0]) for r in progress[1:]] == [50, 100, 150, 200]
    # The split run's end evaluated at 100, off the schedule (eval_every=150): it does not
    # shift the later ones' seeds (a tester's: each seed counted the evaluations before).
    scheduled = [e["scheduled"] for e in resumed.loop.evaluations]
    assert scheduled == [False, True, False]  # 200 is the run's end, off it too
    assert resumed.loop.evaluations[1:] == [
        {**e, "wall_time_s": r["wall_time_s"]}
        for e, r in zip(full.loop.evaluations, resumed.loop.evaluations[1:], strict=True)
    ]
    # The envs' episodes continued from the checkpoint (Pendulum's episodes are 200 steps:
    # the stop at 100 fell mid-episode), so the resumed run is the uninterrupted one.
    _assert_same_state(resumed, full)
    np.testing.assert_array_equal(resumed.buffer.observation[:200], full.buffer.observation[:200])


@pytest.mark.slow
def test_progress_rows_before_a_resumed_sessions_first_update_repeat_the_last_ones(tmp_path):
    """A tester's: the rows between two update calls repeat the last call's metrics; a
    resumed session's were empty until its first call."""

    def rows(run_dir):
        with open(os.path.join(run_dir, "progress.csv")) as f:
            return [  # as numbers (a held -0.0 may come back as 0.0)
                {
                    k: float(v) if v else v
                    for k, v in r.items()
                    if "time" not in k and "per_s" not in k
                }
                for r in csv.DictReader(f)
            ]

    # policy_delay=4: every other call skips the actor; its rows report the actor metrics
    # held from the call before, across the resume too (a reviewer's: zeros).
    # Updates 1-2 at 200, 3-4 at 300 (the actor's at 4), 5-6 at 400 (held: 4's).
    options = dict(total_steps=400, train_freq=100, gradient_steps=2, log_every=50, policy_delay=4)
    _run(tmp_path / "full", **options)
    _run(tmp_path / "split", **{**options, "total_steps": 300})
    _run(tmp_path / "split", resume=True, **options)
    full, resumed = rows(tmp_path / "full"), rows(tmp_path / "split")
    assert [r["step"] for r in resumed] == [50.0 * i for i in range(1, 9)]
    assert resumed[7]["actor_loss"] == resumed[5]["actor_loss"] != 0.0
    assert resumed[4]["critic_loss"] == resumed[3]["critic_loss"] != ""  # no update at 250
    assert resumed == full


def test_a_resume_takes_the_settings_of_the_run_not_an_edited_config_json(tmp_path, finished_run):
    """Found by an independent tester: an edited config.json changed the learning rate.
    (Without config.json, train.py refuses to resume: test_bad_inputs.py.)"""
    shutil.copytree(finished_run, tmp_path / "run")
    config_file = tmp_path / "run" / "config.json"
    saved = json.loads(config_file.read_text())
    edited = {**saved, "learning_rate": 1e-3, "run_dir": str(tmp_path / "run")}
    cases = [  # config.json's text, the config resumed with (as train.py builds it), error
        ("[]", _config(tmp_path / "run"), "config.json: not a JSON object"),
        (
            json.dumps(edited),
            SACConfig.from_dict(edited),
            "ckpt-100 was trained with other settings: learning_rate=0.001 differs from",
        ),
    ]
    for text, config, message in cases:
        config_file.write_text(text)
        with pytest.raises(TfsacError, match=message):
            Trainer(config, export=False, resume=True)
    assert "broken" not in os.listdir(tmp_path / "run" / "checkpoints")  # nothing set aside


@pytest.mark.slow
def test_damaged_logs_of_a_run_are_one_line_or_their_cut_rows_dropped(
    tmp_path, two_checkpoints, caplog
):
    """Found by an independent tester: a progress.csv of garbage was a UnicodeDecodeError's
    traceback, a row cut short was kept, a damaged summary.json came after the resume's
    lines."""
    caplog.set_level(logging.INFO, logger="absl")
    shutil.copytree(two_checkpoints, tmp_path / "run")
    progress, summary = tmp_path / "run" / "progress.csv", tmp_path / "run" / "summary.json"
    rows = progress.read_text()
    more = _config(tmp_path / "run", total_steps=300)
    progress.write_bytes(b"\x00\xff garbage\n1,2\n")
    with pytest.raises(TfsacError, match=r"cannot read .*progress.csv: 'utf-8' codec .* move it"):
        Trainer(more, export=False, resume=True)
    progress.write_text(rows)
    summary_text = summary.read_text()
    summary.write_text("{cut")
    caplog.clear()
    with pytest.raises(TfsacError, match=r"cannot read .*summary.json"):
        Trainer(more, export=False, resume=True)
    assert "resume with" not in caplog.text
    summary.write_text(summary_text)
    lines = rows.splitlines()  # the header, then rows at 50, 100, 150, 200
    # 150's row cut short: fields missing, or all there with the last number cut (a reviewer).
    for cut in (lines[3][:20], lines[3][:-3]):
        shutil.rmtree(tmp_path / "run")
        shutil.copytree(two_checkpoints, tmp_path / "run")
        progress.write_text("\n".join(lines[:3]) + "\n" + cut)
        caplog.clear()
        Trainer(more, export=False, resume=True).run()
        steps = [int(line.split(",")[0]) for line in progress.read_text().splitlines()[1:]]
        assert steps == [50, 100, 250, 300]
        assert "progress.csv: 1 incomplete rows dropped" in caplog.text


def test_resume_refuses_incompatible_config(tmp_path):
    _run(tmp_path / "run", total_steps=100)
    with pytest.raises(TfsacError, match=r"hidden_sizes=\[32, 32\] differs .* \[16, 16\]"):
        Trainer(_config(tmp_path / "run", hidden_sizes=(32, 32)), resume=True)
    with pytest.raises(TfsacError, match="env_id"):
        Trainer(_config(tmp_path / "run", env_id="MountainCarContinuous-v0"), resume=True)
    with pytest.raises(TfsacError, match="algorithm='sac_v1' differs from the resumed run's 'sac'"):
        Trainer(_config(tmp_path / "run", variant="v1"), resume=True)
    # Without config.json (removed), the checkpoint's own config is checked.
    (tmp_path / "run" / "config.json").unlink()
    with pytest.raises(TfsacError, match="algorithm='sac'.*algorithm='sac_v1'"):
        Trainer(_config(tmp_path / "run", variant="v1"), resume=True)


def _snapshot(folder):
    """Every path under `folder` with its bytes (None for folders)."""
    return {p: (p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    _run(run_dir, total_steps=100)
    return run_dir


@pytest.mark.parametrize(
    "resume, overrides, damage, message",
    [
        (False, {"total_steps": 200}, None, "already holds a run; continue it with --resume"),
        (True, {"env_id": "MountainCarContinuous-v0"}, None, "env_id"),
        (True, {"hidden_sizes": (32, 32)}, None, "hidden_sizes"),
        (True, {"buffer_size": 20_000}, None, "buffer_size"),
    ],
)
def test_a_refused_start_changes_nothing_in_the_run_dir(
    tmp_path, finished_run, resume, overrides, damage, message
):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    if damage is not None:
        damage(run_dir)
    before = _snapshot(run_dir)
    with pytest.raises(TfsacError, match=message):
        Trainer(_config(run_dir, **overrides), export=False, resume=resume)
    assert _snapshot(run_dir) == before


def test_a_start_refused_for_its_export_dir_leaves_no_run_dir(tmp_path):
    (tmp_path / "blocker").write_text("a file where a folder should be")
    with pytest.raises(TfsacError, match="cannot write"):
        Trainer(_config(tmp_path / "run", export_dir=str(tmp_path / "blocker" / "models")))
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory):
    """A finished 200-step run with checkpoints at 100 and 200, for tests to copy."""
    run_dir = tmp_path_factory.mktemp("two") / "run"
    _run(run_dir, total_steps=200)
    return run_dir


def test_a_lost_or_unreadable_index_resumes_from_the_newest_complete_checkpoint(
    tmp_path, two_checkpoints
):
    shutil.copytree(two_checkpoints, tmp_path / "run")
    checkpoints = tmp_path / "run" / "checkpoints"
    index = checkpoints / "checkpoint"
    for damage in ("garbage {{{", None):  # unreadable, then missing (a kill before it)
        if damage is None:
            index.unlink()
        else:
            index.write_text(damage)
        # Evaluation reads the newest complete checkpoint and changes nothing.
        _, info = checkpoint_policy(str(tmp_path / "run"))
        assert info["checkpoint_step"] == 200 and info["checkpoint"].endswith("ckpt-200")
        trainer = Trainer(_config(tmp_path / "run", total_steps=300), export=False, resume=True)
        assert trainer.loop.step == 200 and trainer.resumed_from.endswith("ckpt-200")
        # The index is rewritten to name it and every complete checkpoint before it.
        state = tf.train.get_checkpoint_state(str(checkpoints))
        assert list(state.all_model_checkpoint_paths) == [
            str(checkpoints / f"ckpt-{s}") for s in (100, 200)
        ]
    assert sorted(p.name for p in checkpoints.glob("*.index")) == [
        "ckpt-100.index",
        "ckpt-200.index",
    ]


def test_a_named_step_loads_that_checkpoint_and_a_missing_one_lists_the_kept(two_checkpoints):
    run_dir = str(two_checkpoints)
    newest, info = checkpoint_policy(run_dir)
    older, older_info = checkpoint_policy(run_dir, step=100)
    assert info["checkpoint_step"] == 200 and older_info["checkpoint_step"] == 100
    assert older_info["checkpoint"].endswith("ckpt-100")
    # The run evaluated at 150 and 200: step 100's weights have no evaluation to repeat.
    assert "eval_return_mean" in info and "eval_return_mean" not in older_info
    obs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    assert not np.allclose(newest(obs), older(obs))
    with pytest.raises(TfsacError, match=r"no checkpoint of step 150 in .*\(steps: 200, 100\)"):
        checkpoint_policy(run_dir, step=150)
    policy = tfsac.Policy.load(run_dir, step=100)
    assert policy.metadata["checkpoint_step"] == 100
    np.testing.assert_array_equal(policy.predict(obs), older(obs))
    assert tfsac.Policy.load(run_dir, step=np.int64(100)).metadata["checkpoint_step"] == 100
    for wrong in ("100", 100.0, True):  # a step named otherwise than as a whole number
        with pytest.raises(TfsacError, match=r"step must be a whole number \(an env step\)"):
            tfsac.Policy.load(run_dir, step=wrong)


def test_a_checkpoint_newer_than_the_index_is_used(tmp_path, two_checkpoints):
    # A kill between the TF files of ckpt-200 and the index leaves the index at ckpt-100.
    shutil.copytree(two_checkpoints, tmp_path / "run")
    checkpoints = str(tmp_path / "run" / "checkpoints")
    index = os.path.join(checkpoints, "checkpoint")
    with open(index, "w") as f:
        f.write('model_checkpoint_path: "ckpt-100"\nall_model_checkpoint_paths: "ckpt-100"\n')
    assert tf.train.latest_checkpoint(checkpoints).endswith("ckpt-100")
    trainer = Trainer(_config(tmp_path / "run", total_steps=300), export=False, resume=True)
    assert trainer.loop.step == 200
    assert tf.train.latest_checkpoint(checkpoints).endswith("ckpt-200")
    trainer.run()  # ckpt-100 stays listed: it is kept (3 checkpoints), with its sidecar
    assert sorted(os.listdir(checkpoints)) == [
        "checkpoint",
        *(
            f"ckpt-{s}.{e}"
            for s in (100, 200, 300)
            for e in ("data-00000-of-00001", "extra", "index")
        ),
    ]


@pytest.mark.parametrize(
    "damage", ["truncated data", pytest.param("missing sidecar state", marks=pytest.mark.slow)]
)
def test_a_damaged_latest_checkpoint_is_set_aside_and_the_one_before_restores(
    tmp_path, two_checkpoints, damage, caplog
):
    shutil.copytree(two_checkpoints, tmp_path / "run")
    checkpoints = tmp_path / "run" / "checkpoints"
    if damage == "truncated data":
        data = checkpoints / "ckpt-200.data-00000-of-00001"
        data.write_bytes(data.read_bytes()[:100])
    else:
        (checkpoints / "ckpt-200.extra" / "state.json").unlink()
    # evaluate.py's path skips it, says so, and moves nothing.
    _, info = checkpoint_policy(str(tmp_path / "run"))
    assert info["checkpoint_step"] == 100
    assert (checkpoints / "ckpt-200.index").exists()
    assert "skipping a damaged checkpoint" in caplog.text and "ckpt-200" in caplog.text
    trainer = Trainer(_config(tmp_path / "run", total_steps=300), export=False, resume=True)
    assert trainer.loop.step == 100 and trainer.resumed_from.endswith("ckpt-100")
    broken = sorted(p.name for p in (checkpoints / "broken").iterdir())
    assert broken == [f"ckpt-200.{e}" for e in ("data-00000-of-00001", "extra", "index")]
    assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-100")
    trainer.run()
    assert trainer.loop.step == 300 and (checkpoints / "broken" / "ckpt-200.index").exists()


def test_checkpoints_of_other_networks_are_refused_in_one_line_and_kept(
    tmp_path, two_checkpoints, caplog
):
    """Networks that changed since the run saved them (a custom actor_fn, a user's network
    or algorithm module edited, config.json edited) do not make whole checkpoints damaged:
    nothing is set aside, nothing restarts from step 0, and TensorFlow adds no warnings."""
    shutil.copytree(two_checkpoints, tmp_path / "run")
    checkpoints = tmp_path / "run" / "checkpoints"
    before = sorted(os.listdir(checkpoints))

    def narrow_actor(obs_dim, action_dim):
        return tfsac.Actor(action_dim, hidden_sizes=(8, 8))

    with pytest.raises(TfsacError, match="ckpt-200' holds other variables than this run's"):
        Trainer(_config(tmp_path / "run"), export=False, resume=True, actor_fn=narrow_actor)
    config_file = tmp_path / "run" / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "hidden_sizes": [8, 8]}))
    with pytest.raises(TfsacError, match="ckpt-200' holds other variables") as raised:
        tfsac.Policy.load(str(tmp_path / "run"))
    assert "\n" not in str(raised.value)
    assert sorted(os.listdir(checkpoints)) == before  # no broken/, no new files
    assert "damaged" not in caplog.text
    assert not [r for r in caplog.records if r.name == "tensorflow"]
    # From the script: one line, also after TensorFlow deletes the failed restore's objects.
    done = run_script("evaluate", ["--run_dir=run", "--episodes=1"], cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert "holds other variables than this run's model" in lines[0]


def test_a_variable_of_another_dtype_is_a_mismatch_not_damage(tmp_path):
    from tfsac.deploy.loading import CheckpointMismatch, restore_checkpoint

    prefix = tf.train.Checkpoint(v=tf.Variable(1, dtype=tf.int64)).write(str(tmp_path / "c"))
    with pytest.raises(CheckpointMismatch, match="expected dtype float does not equal"):
        restore_checkpoint(tf.train.Checkpoint(v=tf.Variable(1.0)), prefix, "all")
    (tmp_path / "c.index").write_bytes(b"not an index")  # damage: not a mismatch
    with pytest.raises(TfsacError, match="cannot be restored") as raised:
        restore_checkpoint(tf.train.Checkpoint(v=tf.Variable(1.0)), prefix, "all")
    assert not isinstance(raised.value, CheckpointMismatch)


@pytest.mark.parametrize(
    "damage, message",
    [
        ("next_index of another shape", "next_index.npy has shape (3,)"),
        ("an empty rows file", "No data left in file"),  # EOFError, found by a tester
    ],
)
def test_a_corrupt_replay_buffer_is_set_aside_and_the_checkpoint_before_restores(
    tmp_path, two_checkpoints, caplog, damage, message
):
    shutil.copytree(two_checkpoints, tmp_path / "run")
    extra = tmp_path / "run" / "checkpoints" / "ckpt-200.extra"
    if damage == "an empty rows file":
        (extra / "rows.npy").write_bytes(b"")
    else:
        np.save(extra / "next_index.npy", np.zeros(3))
    trainer = Trainer(_config(tmp_path / "run", total_steps=300), export=False, resume=True)
    assert trainer.loop.step == 100 and trainer.resumed_from.endswith("ckpt-100")
    assert f"ckpt-200' has a corrupt replay buffer: {message}" in caplog.text


def test_incompatible_settings_are_refused_not_skipped(tmp_path):
    _run(tmp_path / "run", total_steps=100)
    with pytest.raises(TfsacError, match="hidden_sizes"):
        Trainer(_config(tmp_path / "run", hidden_sizes=(32, 32)), resume=True)
    assert not (tmp_path / "run" / "checkpoints" / "broken").exists()


def test_resuming_a_finished_run_keeps_it_as_it_was(tmp_path):
    _run(tmp_path / "run", total_steps=100)
    before = _snapshot(tmp_path / "run")
    trainer = Trainer(_config(tmp_path / "run", total_steps=100), export=False, resume=True)
    assert trainer.run().summary["total_steps"] == 100
    assert _snapshot(tmp_path / "run") == before  # no new TensorBoard events file either


def test_a_resume_refuses_other_settings_and_says_the_changes_it_may_make(tmp_path, caplog):
    _run(tmp_path / "run", total_steps=100, export=False)
    before = _snapshot(tmp_path / "run")
    with pytest.raises(TfsacError, match="batch_size=16 differs from the resumed run's 32"):
        Trainer(_config(tmp_path / "run", total_steps=100, batch_size=16), resume=True)
    with pytest.raises(TfsacError, match="total_steps can only grow"):
        Trainer(_config(tmp_path / "run", total_steps=50, learning_starts=10), resume=True)
    assert _snapshot(tmp_path / "run") == before
    caplog.set_level("INFO", logger="absl")  # whatever verbosity parsed flags left
    Trainer(_config(tmp_path / "run", total_steps=200, log_every=100), resume=True)
    assert "resume with total_steps: 100 -> 200" in caplog.text
    assert "resume with log_every: 50 -> 100" in caplog.text
    assert "resume with export: False -> True" in caplog.text


def _fail_np_save(monkeypatch):  # a disk that fills up inside the replay arrays
    real_save, calls = np.save, {"n": 0}

    def failing_save(file, array, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 5:  # the first checkpoint (5 replay arrays) succeeds
            raise OSError(28, "No space left on device")
        real_save(file, array, *args, **kwargs)

    monkeypatch.setattr(np, "save", failing_save)
    return "No space left on device"


def _fail_rename(monkeypatch):  # a folder whose permissions changed under the run
    real_rename = os.rename

    def failing_rename(src, dst, *args, **kwargs):
        if os.path.basename(str(dst)) == "ckpt-200.extra":
            raise PermissionError(13, "Permission denied")
        real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", failing_rename)
    return "Permission denied"


def _fail_tf_write(monkeypatch):  # TF's own file layer runs out of space
    real_save = tf.train.CheckpointManager.save

    def failing_save(self, checkpoint_number=None, **kwargs):
        if checkpoint_number == 200:
            raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")
        return real_save(self, checkpoint_number=checkpoint_number, **kwargs)

    monkeypatch.setattr(tf.train.CheckpointManager, "save", failing_save)
    return "No space left on device"


# One failure point in the default run, the others with -m slow (the same recovery path).
@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(_fail_np_save, marks=pytest.mark.slow),
        pytest.param(_fail_rename, marks=pytest.mark.slow),
        _fail_tf_write,
    ],
)
def test_a_failed_save_keeps_the_previous_checkpoint_and_stops_with_one_line(
    tmp_path, monkeypatch, fault
):
    trainer = Trainer(_config(tmp_path / "run", total_steps=300), export=False)
    reason = fault(monkeypatch)
    with pytest.raises(TfsacError) as error:
        trainer.run()
    message = str(error.value)
    assert "\n" not in message and reason in message and "ckpt-100" in message, message
    assert message.startswith("cannot write checkpoint for step 200"), message
    monkeypatch.undo()
    names = os.listdir(tmp_path / "run" / "checkpoints")
    assert not [n for n in names if n.startswith(".tmp")]
    resumed = Trainer(_config(tmp_path / "run"), export=False, resume=True)
    assert resumed.loop.step == 100 and resumed.resumed_from.endswith("ckpt-100")


def test_a_failed_export_keeps_the_version_folders_and_stops_with_one_line(tmp_path, monkeypatch):
    config = _config(tmp_path / "a", total_steps=100, export_dir=str(tmp_path / "models"))
    first = Trainer(config).run().saved_model_path
    before = _snapshot(tmp_path / "models")

    def failing_save(*args, **kwargs):  # the SavedModel writer meets a full disk
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", failing_save)
    config = _config(tmp_path / "b", total_steps=100, export_dir=str(tmp_path / "models"))
    with pytest.raises(TfsacError, match=r"cannot export the SavedModel to .*/2'.*No space left"):
        Trainer(config).run()
    assert _snapshot(tmp_path / "models") == before  # version 1 as it was, no partial 2
    assert first.endswith("1") and (tmp_path / "b" / "checkpoints" / "ckpt-100.index").exists()


class _BadRewardEnv(gym.Env):
    """Pendulum-like dynamics-free env whose reward turns bad at a given step."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def __init__(self, bad_step=150, bad_value=float("nan")):
        self.t, self.bad_step, self.bad_value = 0, bad_step, bad_value

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        reward = self.bad_value if self.t >= self.bad_step else 0.0
        return np.zeros(2, np.float32), reward, False, self.t % 50 == 0, {}


gym.register("tfsac-test/NaNReward-v0", entry_point=_BadRewardEnv)
gym.register(
    "tfsac-test/HugeReward-v0", entry_point=lambda: _BadRewardEnv(bad_step=120, bad_value=3e38)
)


def test_nan_reward_stops_with_step_and_keeps_checkpoint(tmp_path):
    trainer = Trainer(_config(tmp_path / "run", env_id="tfsac-test/NaNReward-v0"), export=False)
    with pytest.raises(NonFiniteError, match=r"non-finite reward \(nan\) at step 150.*ckpt-100"):
        trainer.run()
    assert (
        Trainer(
            _config(tmp_path / "run", env_id="tfsac-test/NaNReward-v0"), export=False, resume=True
        ).loop.step
        == 100
    )


def test_a_checkpoint_refuses_a_nonfinite_critic(tmp_path):
    """The update calls' flag reads the losses and the actor only; a non-finite critic
    would show in the next call's loss, and a checkpoint before that call refuses it."""
    trainer = Trainer(_config(tmp_path / "run", total_steps=100), export=False)
    trainer.run()
    assert trainer.checkpointer.latest.endswith("ckpt-100")
    bias = trainer.learner.critic.head.bias
    bias.assign(np.full(bias.shape, np.inf, np.float32))
    with pytest.raises(NonFiniteError, match=r"non-finite values at step 100 in: critic/q/bias"):
        trainer._save_checkpoint()
    assert trainer.checkpointer.latest.endswith("ckpt-100")
    assert np.all(
        np.isfinite(
            Trainer(trainer.config, export=False, resume=True).learner.critic.head.bias.numpy()
        )
    )


@pytest.mark.slow
def test_inf_loss_stops_with_step_and_quantity(tmp_path):
    trainer = Trainer(
        _config(tmp_path / "run", env_id="tfsac-test/HugeReward-v0", learning_starts=110),
        export=False,
    )
    with pytest.raises(NonFiniteError, match=r"non-finite values at step 1\d\d in: critic_loss"):
        trainer.run()
    # The bad state was never saved: the latest checkpoint is still the one at step 100.
    assert trainer.checkpointer.latest.endswith("ckpt-100")
    resumed = Trainer(
        _config(tmp_path / "run", env_id="tfsac-test/HugeReward-v0", learning_starts=110),
        export=False,
        resume=True,
    )
    assert all(np.all(np.isfinite(v.numpy())) for v in _all_variables(resumed))


SCRIPT = os.path.join(REPO_ROOT, "scripts", "train.py")
SCRIPT_ARGS = [
    "--env=Pendulum-v1",
    "--total_steps=8000",
    "--learning_starts=200",
    "--batch_size=32",
    "--hidden_sizes=16,16",
    "--eval_every=600",
    "--eval_episodes=1",
    "--log_every=100",
    "--checkpoint_every=100",
    "--keep_checkpoints=2",
    "--buffer_size=10000",
    "--resume",
]


def _checkpoint_steps(run_dir):
    ckpt = run_dir / "checkpoints"
    if not ckpt.exists():
        return []
    return sorted(int(p.name[5:-6]) for p in ckpt.iterdir() if p.name.endswith(".index"))


def _latest_step(run_dir):
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def test_sigterm_saves_then_exits_cleanly(tmp_path):
    run_dir = tmp_path / "run"
    args = [
        sys.executable,
        SCRIPT,
        *SCRIPT_ARGS,
        "--total_steps=100000",
        f"--run_dir={run_dir}",
        f"--export_dir={tmp_path / 'export'}",
        "--jit_compile=false",  # the stop is all this checks: no XLA compile before it
    ]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not _checkpoint_steps(run_dir) and time.time() < deadline:
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("stopped: SIGTERM at step") and "--resume" in last
    step = int(last.split("at step ")[1].split(":")[0])
    assert _latest_step(run_dir) == step
    assert not (tmp_path / "export").exists() or not list((tmp_path / "export").rglob("*.pb"))


def test_a_refused_change_of_num_actors_says_which_changes_are_allowed():
    """A tester's: --resume --num_actors=0 said num_actors "can not change" (2 -> 1 can)."""
    from tfsac.config.resume import Change, resume_changes

    assert resume_changes({"num_actors": 2}, {"num_actors": 1}) == [Change("num_actors", 2, 1)]
    assert str(Change("num_actors", 2, 1)) == "num_actors: 2 -> 1"
    with pytest.raises(TfsacError, match="can change only between counts of env runners, not"):
        resume_changes({"num_actors": 2}, {"num_actors": 0})


def test_evaluations_are_seeded_by_their_place_on_the_schedule():
    """A reviewer's: seeded by ceil(step / eval_every) - 1, evaluations at steps past the
    multiples (num_envs=4, eval_every=150: 152, 300, 452, 600) repeated every other seed."""
    from types import SimpleNamespace

    from tfsac.run.evaluation import Evaluator

    evaluator = SimpleNamespace(config=SimpleNamespace(seed=0, eval_every=150))
    seeds = [Evaluator.seed(evaluator, step, True) for step in (152, 300, 452, 600)]
    assert seeds == [100, 101, 102, 103]
    # Off the schedule (a run's end, a stop): the next scheduled one's seed.
    assert [Evaluator.seed(evaluator, step, False) for step in (100, 160)] == [100, 101]
    evaluator.config.eval_every = 0  # no schedule: every evaluation on the first seed
    assert Evaluator.seed(evaluator, 500, False) == 100
