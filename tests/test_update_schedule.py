"""The update schedule, the collector and the run services, each on its own."""

import time

import numpy as np
import pytest

from tfsac import Collector, UpdateSchedule
from tfsac.data.envs import env_factory, env_spec, make_env
from tfsac.run.loop_state import LoopState
from tfsac.run.progress import Stopwatch


def _due_steps(schedule, total, num_envs=1, episode_ends=()):
    """(env step, gradient steps due) for every step that owes updates."""
    calls = []
    for step in range(num_envs, total + 1, num_envs):
        finished = sum(step - num_envs < end <= step for end in episode_ends)
        _, due = schedule.after_env_step(step - num_envs, step, finished)
        calls += [(step, due)] if due else []
    return calls


def test_one_update_per_env_step_after_learning_starts():
    assert _due_steps(UpdateSchedule(learning_starts=3), 6) == [(4, 1), (5, 1), (6, 1)]


def test_train_freq_and_gradient_steps():
    schedule = UpdateSchedule(learning_starts=4, train_freq=4, gradient_steps=2)
    assert _due_steps(schedule, 16) == [(8, 2), (12, 2), (16, 2)]
    # -1: one update per env step collected in the phase.
    schedule = UpdateSchedule(learning_starts=0, train_freq=3, gradient_steps=-1)
    assert _due_steps(schedule, 9) == [(3, 3), (6, 3), (9, 3)]


@pytest.mark.parametrize("num_envs", [1, 2, 4])
def test_the_update_ratio_does_not_depend_on_num_envs(num_envs):
    schedule = UpdateSchedule(learning_starts=8, train_freq=2, gradient_steps=1, num_envs=num_envs)
    calls = _due_steps(schedule, 40, num_envs)
    assert sum(due for _, due in calls) == (40 - 8) // 2


def test_episodes_per_rollout_pays_for_the_learning_steps_of_whole_episodes():
    schedule = UpdateSchedule(learning_starts=5, episodes_per_rollout=1, gradient_steps=-1)
    # Episodes end at 4 (all warm-up), 10 (5 learning steps) and 13 (3 more).
    assert _due_steps(schedule, 15, episode_ends=(4, 10, 13)) == [(10, 5), (13, 3)]


def test_warmup_and_gsde_noise_resets():
    schedule = UpdateSchedule(learning_starts=4, num_envs=2)
    assert [schedule.is_warmup(s) for s in (0, 2, 4)] == [True, True, False]
    assert not UpdateSchedule(learning_starts=4, use_sde_at_warmup=True).is_warmup(0)
    schedule = UpdateSchedule(learning_starts=100, train_freq=4, use_sde=True, sde_sample_freq=2)
    resets = []
    for step in range(1, 9):
        ended, _ = schedule.after_env_step(step - 1, step, 0)
        resets += [step] if schedule.noise_reset_due(ended) else []
    assert resets == [2, 4, 6, 8]  # every phase's end, and 2 steps into each phase
    assert not UpdateSchedule(learning_starts=0).noise_reset_due(True)  # gSDE only


def test_schedule_state_round_trip():
    schedule = UpdateSchedule(learning_starts=0, train_freq=5)
    schedule.after_env_step(0, 3, 1)
    restored = UpdateSchedule(learning_starts=0, train_freq=5)
    restored.load_state(schedule.state())
    assert restored == schedule


def test_collector_keeps_the_true_successor_of_a_truncated_episode(counter_env_id):
    fn = env_factory(counter_env_id)
    spec = env_spec(counter_env_id, make_env(counter_env_id))
    collector = Collector(fn, spec, num_envs=1, mode="sync", seed=0)
    collector.reset(seed=0)
    episodes, rows = [], []
    for _ in range(7):  # episode 0 terminates after 3 steps, episode 1 is truncated at 4
        t = collector.step(None)
        rows.append((float(t.observation[0, 0]), float(t.next_observation[0, 0])))
        episodes += t.finished_episodes
        assert np.all(np.abs(t.action) <= 1.0)  # warm-up actions in the learner's units
    assert rows == [(0, 1), (1, 2), (2, 3), (10, 11), (11, 12), (12, 13), (13, 14)]
    assert episodes == [(3.0, 3), (4.0, 4)]
    assert collector.observation[0, 0] == 20  # the next episode has started
    collector.close()


def test_stopwatch_leaves_out_paused_time_and_adds_earlier_sessions():
    watch = Stopwatch(before=10.0)
    with watch.paused():  # not running yet: nothing to leave out
        pass
    assert watch.seconds() == 10.0 and not watch.running
    watch.start()
    with watch.paused():
        time.sleep(0.2)
    assert 10.0 <= watch.seconds() < 10.15
    watch.stop()  # the reading freezes
    frozen = watch.seconds()
    time.sleep(0.05)
    assert watch.seconds() == frozen and not watch.running


def test_loop_state_round_trip():
    state = LoopState(step=7, episodes=2, evaluations=[{"step": 5, "return_mean": -1.0}])
    for r in range(12):
        state.record_episode(float(r), r)
    again = LoopState.from_dict(state.to_dict())
    assert again.to_dict() == state.to_dict()
    assert list(again.recent_returns) == [float(r) for r in range(2, 12)]  # the last 10
    assert again.episodes == 14 and again.mean_recent_return() == pytest.approx(6.5)
