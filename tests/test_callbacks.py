"""Callbacks that stop a run cleanly (SB3's convention: a method returning False), the
stop and keep-best options, and a finished run continued with more steps."""

import csv
import dataclasses
import json
import logging
import os
import shutil

import gymnasium as gym
import numpy as np
import pytest
from conftest import CounterEnv, tiny_config

import tfsac
from tfsac.run.callbacks import (
    CallbackList,
    FunctionCallback,
    StopTrainingOnNoModelImprovement,
    StopTrainingOnRewardThreshold,
    config_callbacks,
)

# CounterEnv's evaluation episodes (one per evaluation, on one env) alternate: the even
# ones terminate after 3 steps (return 3), the odd ones are truncated after 4 (return 4).
# So evaluations at 20, 40, 60, 80 return 3, 4, 3, 4. With min_evaluations=1 the first
# only sets the best; 40 improves it; 60 and 80 do not: 2 in a row > 1, a stop at 80.
STOP_AT = 80


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, counter_env_id):
    tmp = tmp_path_factory.mktemp("stopped")
    config = tiny_config(
        tmp,
        counter_env_id,
        total_steps=200,
        learning_starts=200,  # no updates: the returns do not depend on the policy
        eval_every=20,
        log_every=20,
        stop_after_no_improvement=1,
        min_evaluations=1,
        keep_best=True,
    )
    return config, tfsac.train(config, quiet=True)


class ProbedCounterEnv(CounterEnv):
    """CounterEnv whose first evaluation episode is even (episode 0): the start check's
    API probe, one reset and step on the evaluation env, is its episode -1."""

    def __init__(self):
        super().__init__()
        self.episode = -2


PROBED_COUNTER_ENV_ID = "tfsac-test-probed/Counter-v0"
if PROBED_COUNTER_ENV_ID not in gym.registry:
    gym.register(PROBED_COUNTER_ENV_ID, entry_point=ProbedCounterEnv, max_episode_steps=4)


@pytest.fixture(scope="module")
def counter_env_id():
    return PROBED_COUNTER_ENV_ID


def test_a_stop_writes_the_checkpoint_evaluation_summary_and_export(stopped):
    config, result = stopped
    assert result.stop_reason.startswith("no new best evaluation return (best 4.00) in 2 ")
    assert f"at step {STOP_AT} (stop_after_no_improvement)" in result.stop_reason
    with open(os.path.join(result.run_dir, "summary.json")) as f:
        summary = json.load(f)
    assert summary == result.summary
    reason, option = result.stop_reason, "stop_after_no_improvement"  # a resume turns it off
    assert summary["stop"] == {"step": STOP_AT, "reason": reason, "option": option}
    assert summary["env_steps"] == STOP_AT and summary["total_steps"] == 200
    evaluations = [(e["step"], e["return_mean"]) for e in summary["evaluations"]]
    assert evaluations == [(20, 3.0), (40, 4.0), (60, 3.0), (80, 4.0)]
    assert summary["checkpoint"].endswith(f"ckpt-{STOP_AT}")
    assert os.path.isfile(summary["checkpoint"] + ".index")
    with open(os.path.join(result.run_dir, "progress.csv")) as f:
        assert [int(r["step"]) for r in csv.DictReader(f)] == [20, 40, 60, 80]
    policy = tfsac.Policy.load(result.saved_model_path)
    assert policy.metadata["training_steps"] == STOP_AT
    assert policy.metadata["eval_return_mean"] == 4.0
    assert policy.predict([0.0]).shape == (2,)


def test_keep_best_exports_each_new_best_as_a_version(stopped):
    _, result = stopped
    best = os.path.join(result.run_dir, "best")
    assert sorted(os.listdir(best)) == ["1", "2"]  # 3 at step 20, then 4 at step 40
    steps = [tfsac.Policy.load(os.path.join(best, v)).metadata for v in ("1", "2")]
    assert [(m["training_steps"], m["eval_return_mean"]) for m in steps] == [(20, 3.0), (40, 4.0)]


def test_keep_best_converts_the_other_formats_once_into_the_last_best(
    tmp_path, counter_env_id, monkeypatch, caplog
):
    """Each new best is a SavedModel version; policy.tflite (stood in for here: its
    conversion takes seconds) is written once, into the highest version, at the end."""
    from tfsac.deploy import formats

    converted = []

    def fake_tflite(saved_model_dir, path, quantization="none"):
        converted.append(saved_model_dir)
        with open(path, "w") as f:
            f.write("converted")

    monkeypatch.setattr(formats, "write_tflite", fake_tflite)
    monkeypatch.setattr(formats, "check_parity", lambda *args: 0.0)
    options = dict(total_steps=40, learning_starts=40, eval_every=20, log_every=20)
    config = tiny_config(
        tmp_path, counter_env_id, keep_best=True, export_formats="saved_model,tflite", **options
    )
    caplog.set_level(logging.INFO, logger="absl")
    result = tfsac.train(config, quiet=True)
    best = os.path.join(result.run_dir, "best")
    assert sorted(os.listdir(best)) == ["1", "2"]  # returns 3, then 4
    assert not os.path.exists(os.path.join(best, "1", "policy.tflite"))
    assert os.path.isfile(os.path.join(best, "2", "policy.tflite"))
    assert [os.path.dirname(d) for d in converted].count(best) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("new best evaluation return 4.0 at step 40: ") for m in messages)
    assert any(m.startswith("best policy: exported ") and "policy.tflite" in m for m in messages)


def test_a_stopped_run_resumed_with_its_settings_trains_nothing(stopped, caplog, tmp_path):
    config, result = stopped
    caplog.set_level(logging.INFO, logger="absl")
    again = tfsac.train(config, resume=True, quiet=True)
    assert again.stop_reason == result.stop_reason and again.summary == result.summary
    # It says why it stopped and what continues it: the stop option that is on (a tester
    # took the hint --stop_at_return=none, which left this run stopped).
    messages = [r.getMessage() for r in caplog.records if "already complete" in r.getMessage()]
    assert len(messages) == 1 and f"(stopped: {result.stop_reason}; " in messages[0]
    assert messages[0].endswith(
        "; a resume with stop_after_no_improvement=0 (--stop_after_no_improvement=0) continues it)"
    )
    # Other stop options continue it, to its total_steps (a tester's: --resume
    # --stop_after_no_improvement=0 said the run was complete); on a copy of the run.
    run_dir = str(tmp_path / "copy")
    shutil.copytree(result.run_dir, run_dir)
    # As the hint says: the saved min_evaluations, which only that stop reads, stays.
    unstopped = dataclasses.replace(config, run_dir=run_dir, stop_after_no_improvement=0)
    continued = tfsac.train(unstopped, resume=True, quiet=True, export=False)
    assert continued.summary["env_steps"] == 200 and continued.summary["stop"] is None


@pytest.mark.slow
def test_a_stopped_run_continues_with_more_steps(stopped, tmp_path):
    """SB3's learn(more, reset_num_timesteps=False): a resume with a larger total_steps (and
    here without the stop) trains on from the stop's checkpoint (a copy of the run)."""
    config, result = stopped
    run_dir = str(tmp_path / "copy")
    shutil.copytree(result.run_dir, run_dir)
    more = dataclasses.replace(
        config,
        run_dir=run_dir,
        total_steps=240,
        eval_every=40,
        stop_after_no_improvement=0,
        min_evaluations=0,
    )
    continued = tfsac.train(more, resume=True, quiet=True)
    assert continued.stop_reason is None and continued.summary["stop"] is None
    steps = [e["step"] for e in continued.summary["evaluations"]]
    assert steps == [20, 40, 60, 80, 120, 160, 200, 240]
    assert continued.summary["resumed_from"].endswith(f"ckpt-{STOP_AT}")
    assert os.path.isabs(continued.summary["resumed_from"])  # as "checkpoint"
    assert continued.summary["env_steps"] == continued.summary["total_steps"] == 240
    assert continued.learner.update_count == 40  # from learning_starts=200 on
    assert continued.saved_model_path.endswith(os.path.join("counter_v0", "2"))
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["total_steps"] == 240
    with open(os.path.join(run_dir, "progress.csv")) as f:
        assert [int(r["step"]) for r in csv.DictReader(f)][3:6] == [80, 100, 120]
    # The best so far counts the earlier evaluations: returns of 3 and 4 are no new best.
    assert sorted(os.listdir(os.path.join(run_dir, "best"))) == ["1", "2"]


def test_a_stop_between_log_steps_writes_a_progress_row_at_the_stop(tmp_path, counter_env_id):
    import signal

    def steps(run_dir):
        with open(os.path.join(run_dir, "progress.csv")) as f:
            return [int(r["step"]) for r in csv.DictReader(f)]

    options = dict(total_steps=200, learning_starts=200, eval_every=30, log_every=50)
    config = tiny_config(tmp_path, counter_env_id, name="callback", **options)
    tfsac.train(config, export=False, quiet=True, on_evaluation=lambda e: e["step"] < 60)
    assert steps(config.run_dir) == [50, 60]

    def ctrl_c(evaluation):  # as Ctrl-C at step 30: the run stops at its next step
        os.kill(os.getpid(), signal.SIGINT)

    config = tiny_config(tmp_path, counter_env_id, name="signal", **options)
    with pytest.raises(tfsac.Interrupted, match="SIGINT at step 31"):
        tfsac.train(config, export=False, quiet=True, on_evaluation=ctrl_c)
    assert steps(config.run_dir) == [31]


def test_a_function_returning_false_stops_after_a_final_evaluation(tmp_path, counter_env_id):
    """A stop asked for from on_log at a step without an evaluation evaluates there."""
    config = tiny_config(
        tmp_path, counter_env_id, total_steps=200, learning_starts=200, eval_every=40, log_every=20
    )

    def enough(record):  # numpy's booleans too (a comparison of numpy values)
        return np.float64(record["step"]) < 60

    best = tfsac.SaveBestPolicy(str(tmp_path / "mine"))  # a folder the user names
    result = tfsac.train(config, export=False, quiet=True, on_log=enough, callbacks=[best])
    assert result.stop_reason.endswith("<locals>.enough returned False at step 60")
    assert [e["step"] for e in result.summary["evaluations"]] == [40, 60]
    assert result.summary["checkpoint"].endswith("ckpt-60")
    assert result.saved_model_path is None
    # The stop's evaluation (return 4 after 3) reached the callbacks: a new best version.
    assert sorted(os.listdir(tmp_path / "mine")) == ["1", "2"]
    assert best.saved_model_path == str(tmp_path / "mine" / "2")
    assert not os.path.exists(os.path.join(result.run_dir, "best"))


def test_a_stop_met_at_the_last_evaluation_is_a_stop(tmp_path, counter_env_id, caplog):
    """Evaluations at 20 and 40 (the last) return 3 and 4: a threshold of 3.5, or a
    function returning False at step 40, is met at total_steps and recorded as a stop."""
    options = dict(total_steps=40, learning_starts=40, eval_every=20, log_every=20)
    config = tiny_config(tmp_path, counter_env_id, name="threshold", stop_at_return=3.5, **options)
    result = tfsac.train(config, export=False, quiet=True)
    reason = "evaluation return 4.00 reached 3.5 at step 40 (stop_at_return)"
    assert result.stop_reason == reason
    with open(os.path.join(result.run_dir, "summary.json")) as f:
        assert json.load(f)["stop"] == {"step": 40, "reason": reason, "option": "stop_at_return"}
    # At total_steps, only more steps continue it, whatever the stop options.
    caplog.set_level(logging.INFO, logger="absl")
    again = tfsac.train(config, resume=True, quiet=True, export=False)
    assert again.stop_reason == reason and again.already_finished
    (message,) = [r.getMessage() for r in caplog.records if "already complete" in r.getMessage()]
    assert message.endswith("; a resume with a larger total_steps continues it)")

    def until_40(evaluation):
        return evaluation["step"] < 40

    config = tiny_config(tmp_path, counter_env_id, name="function", **options)
    result = tfsac.train(config, export=False, quiet=True, on_evaluation=until_40)
    assert result.stop_reason.endswith("<locals>.until_40 returned False at step 40")
    assert result.summary["stop"] == {"step": 40, "reason": result.stop_reason}
    assert result.summary["env_steps"] == 40


def test_the_reward_threshold_stops_at_the_first_evaluation_that_reaches_it():
    stop = StopTrainingOnRewardThreshold(-150)
    assert stop.on_evaluation({"step": 10, "return_mean": -151.0}) is None
    assert stop.on_evaluation({"step": 20, "return_mean": -150.0}) is False
    reason = "evaluation return -150.00 reached -150 at step 20 (StopTrainingOnRewardThreshold)"
    assert stop.stop_reason == reason  # a tester: it named the config's option, not given
    config = dataclasses.replace(tfsac.SACConfig(), stop_at_return=-150.0)
    (made,) = [c for c in config_callbacks(config) if isinstance(c, type(stop))]
    made.on_evaluation({"step": 20, "return_mean": -150.0})
    assert made.stop_reason.endswith("(stop_at_return)")


def test_no_improvement_counts_as_sb3_does():
    """SB3's StopTrainingOnNoModelImprovement(max_no_improvement_evals=2, min_evals=2): the
    first 2 evaluations only set the best; then 3 in a row without a new best stop."""
    stop = StopTrainingOnNoModelImprovement(2, min_evals=2)
    returns = [1.0, 5.0, 2.0, 6.0, 6.0, 3.0, 6.0, 7.0]
    verdicts = [stop.on_evaluation({"step": i, "return_mean": r}) for i, r in enumerate(returns)]
    assert verdicts == [None, None, None, None, None, None, False, None]
    assert stop.best == 7.0 and stop.no_improvement == 0  # 7 after the stop: a new best
    # A session's last evaluation off the eval_every schedule does not count (a tester's: a
    # finished run continued to more steps stopped where the run trained at once did not).
    stop = StopTrainingOnNoModelImprovement(1)
    off = {"step": 150, "return_mean": 0.0, "scheduled": False}
    steps = [{"step": s, "return_mean": r, "scheduled": True} for s, r in ((100, 5), (200, 4))]
    assert [stop.on_evaluation(e) for e in (steps[0], off, steps[1])] == [None, None, None]
    assert stop.evaluations == 2 and stop.no_improvement == 1


def test_hooks_that_are_not_functions_or_callbacks_are_refused_before_anything_is_written(
    tmp_path,
):
    config = tiny_config(tmp_path, "Pendulum-v1")
    for hooks, message in (
        ({"on_log": 5}, "on_log must be a function of one dict, got 5"),
        ({"callbacks": [lambda e: False]}, "callbacks must be tfsac.Callback instances"),
        ({"callbacks": tfsac.Callback()}, "callbacks must be a list of Callbacks"),
    ):
        with pytest.raises(tfsac.TfsacError, match=message):
            tfsac.train(config, quiet=True, **hooks)
        assert not os.path.exists(config.run_dir)


def test_an_answer_that_is_not_a_bool_goes_on_and_is_said_once(caplog):
    # A logger's one-liner (f.write, writer.writerow) returns a number: not a stop.
    calls = CallbackList([FunctionCallback(on_log=lambda record: 0), tfsac.Callback()])
    assert [calls.on_log({"step": s}) for s in (1, 2, 3)] == [None, None, None]
    said = [r.getMessage() for r in caplog.records if "not a bool" in r.getMessage()]
    assert said == [
        "FunctionCallback.on_log returned 0, not a bool: going on (only False "
        "stops the run; this is said once)"
    ]
    assert calls.stop_reason is None


def test_on_training_start_cannot_stop_and_says_so(caplog):
    class Refuses(tfsac.Callback):
        def on_training_start(self, trainer):
            return False

    CallbackList([Refuses(), tfsac.Callback()]).on_training_start(None)
    said = [r.getMessage() for r in caplog.records if "stops nothing" in r.getMessage()]
    assert said == [
        "Refuses.on_training_start returned a value, which stops nothing: return False from "
        "on_log or on_evaluation to stop the run"
    ]


def test_stop_callbacks_take_sb3s_arguments_and_refuse_nonsense():
    """An SB3 user's lines (with verbose=1) construct; a negative count or a NaN threshold,
    which would stop at once or never, is refused in one line (a tester's: -1 was taken)."""
    tfsac.StopTrainingOnNoModelImprovement(3, min_evals=5, verbose=1)
    tfsac.StopTrainingOnRewardThreshold(reward_threshold=-200, verbose=1)
    tfsac.StopTrainingOnNoModelImprovement(np.int64(2))  # a count from numpy
    for args in [(-1,), (1.5,), (True,), (1, -2)]:
        with pytest.raises(tfsac.TfsacError, match="must be a whole number >= 0"):
            tfsac.StopTrainingOnNoModelImprovement(*args)
    with pytest.raises(tfsac.TfsacError, match="reward_threshold is NaN"):
        tfsac.StopTrainingOnRewardThreshold(float("nan"))
