"""Recorded data (--offline_data): datasets from scripts/collect.py read back as the same
transitions, the exact recorded share of every batch, checkpoints that reference the data
(never copy it) and resume exactly, offline-only training, RLPD's ensemble options."""

import dataclasses
import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_batch, run_script

from tfsac import SACConfig, SACLearner, TfsacError, Trainer
from tfsac.algorithm import losses
from tfsac.data.envs import env_spec, make_env
from tfsac.data.mixed_replay import MixedReplay, RecordedReplay
from tfsac.data.offline_data import NPZ_FORMAT, RecordedData, load_recorded
from tfsac.data.recording import record_episodes
from tfsac.data.replay import ReplayBuffer


def _spec(env_id="Pendulum-v1"):
    env = make_env(env_id)
    try:
        return env_spec(env_id, env)
    finally:
        env.close()


@pytest.mark.parametrize("fmt", ["minari", "npz"])
def test_collect_then_offline_data_gives_the_same_transitions_bounds_rescaled(tmp_path, fmt):
    kwargs = {"max_episode_steps": 30}
    args = ["--env=Pendulum-v1", "--episodes=2", "--seed=4", f"--format={fmt}", "--output=out"]
    args += [f"--env_kwargs={json.dumps(kwargs)}"]
    if fmt == "minari":
        args.append("--dataset_id=pendulum/random-v0")
    proc = run_script("collect", args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = os.path.join("out", "pendulum/random-v0" if fmt == "minari" else "")
    assert f"--offline_data={os.path.normpath(folder)}\n" in proc.stdout
    # The hint and the metadata name the env as it was made: with its keyword arguments.
    assert "'--env_kwargs={\"max_episode_steps\": 30}'" in proc.stdout
    if fmt == "npz":
        assert json.loads((tmp_path / "out" / "dataset.json").read_text())["env_kwargs"] == kwargs
    data = load_recorded(str(tmp_path / folder), _spec())
    # The same random episodes, recorded again in this process.
    episodes = record_episodes("Pendulum-v1", 2, seed=4, env_kwargs=kwargs)
    obs = np.concatenate([e["observations"][:-1] for e in episodes])
    next_obs = np.concatenate([e["observations"][1:] for e in episodes])
    action = np.concatenate([e["actions"] for e in episodes]) / 2.0  # Pendulum's [-2, 2]
    assert len(data) == 60 and data.kind == fmt
    np.testing.assert_array_equal(data.observation, obs.astype(np.float32))
    np.testing.assert_array_equal(data.next_observation, next_obs.astype(np.float32))
    np.testing.assert_allclose(data.action, action, atol=1e-6)
    rewards = np.concatenate([e["rewards"] for e in episodes]).astype(np.float32)
    np.testing.assert_array_equal(data.reward, rewards)
    # Each row links to the next of its episode; the truncated last rows link nowhere.
    assert data.next_index[28] == 29 and data.next_index[29] == data.next_index[59] == 60
    assert not data.terminated.any()
    # Two observations of 3 floats, an action, a reward, a flag (float32) and an int64 link.
    assert data.nbytes == 60 * ((3 + 3 + 1 + 1 + 1) * 4 + 8)


def test_a_goal_envs_dict_observations_from_minari_are_flattened_as_the_env_does(tmp_path):
    """A Minari dataset of a Dict-observation env (as D4RL's AntMaze and PointMaze data
    are, one array per key), read against this env: each step flattened by
    gymnasium.spaces.flatten, keys in the space's order; a key short is one clean error."""
    import gymnasium as gym
    import minari
    from minari.data_collector import EpisodeBuffer

    from tfsac.data.recording import _minari_root

    env_id = "goal_env:PointReach-v0"
    env = make_env(env_id)
    spec, raw = env_spec(env_id, env), env.unwrapped.observation_space
    env.close()
    rng = np.random.default_rng(0)
    keys = ("desired_goal", "observation", "achieved_goal")  # not the space's order
    obs = {k: rng.uniform(-1, 1, (6, 2)).astype(np.float32) for k in keys}
    episode = dict(
        actions=rng.uniform(-1, 1, (5, 2)).astype(np.float32),
        rewards=-np.ones(5),
        terminations=np.zeros(5, bool),
        truncations=np.array([0, 0, 0, 0, 1], bool),
    )
    registered = gym.spec("PointReach-v0")
    registered = dataclasses.replace(registered, entry_point="goal_env:PointReachEnv")
    for name, observations in (("full", obs), ("short", {k: obs[k] for k in keys[:2]})):
        with _minari_root(str(tmp_path)):
            minari.create_dataset_from_buffers(
                f"point/{name}-v0",
                [EpisodeBuffer(id=0, observations=observations, **episode)],
                env=registered,
                observation_space=gym.spaces.Dict({k: raw[k] for k in observations}),
                action_space=env.action_space,
            )
    data = load_recorded(str(tmp_path / "point" / "full-v0"), spec)
    flat = [gym.spaces.flatten(raw, {k: v[t] for k, v in obs.items()}) for t in range(6)]
    np.testing.assert_array_equal(data.observation, np.array(flat[:-1], np.float32))
    np.testing.assert_array_equal(data.next_observation, np.array(flat[1:], np.float32))
    assert data.observation.shape == (5, spec.obs_dim)
    with pytest.raises(TfsacError, match="episode 0: observations that do not fit the env's"):
        load_recorded(str(tmp_path / "point" / "short-v0"), spec)


def test_a_goal_env_named_by_its_module_records_to_minari_and_reads_back(tmp_path):
    """collect.py on 'goal_env:PointReach-v0' (a class registered in code, Dict
    observations): the dataset holds the flattened observations under the registered id,
    and a run on the module-qualified id reads it."""
    from tfsac.data.recording import write_dataset

    env_id = "goal_env:PointReach-v0"
    episodes = record_episodes(env_id, 2, seed=3)
    target = write_dataset(episodes, env_id, str(tmp_path), "minari", "point/random-v0")
    data = load_recorded(target, _spec(env_id))
    obs = np.concatenate([e["observations"][:-1] for e in episodes])
    assert obs.shape == (40, 6) and data.kind == "minari"
    np.testing.assert_array_equal(data.observation, obs.astype(np.float32))


def test_a_transition_floor_records_whole_episodes_until_it_is_reached():
    kwargs = {"max_episode_steps": 7}
    episodes = record_episodes("Pendulum-v1", 1, seed=2, env_kwargs=kwargs, transitions=15)
    assert [len(e["rewards"]) for e in episodes] == [7, 7, 7]  # 14 < 15, so a third one
    again = record_episodes("Pendulum-v1", 3, seed=2, env_kwargs=kwargs)
    for a, b in zip(episodes, again, strict=True):  # the same episodes --episodes=3 gives
        np.testing.assert_array_equal(a["observations"], b["observations"])


def test_actions_are_rescaled_to_the_unit_box_and_checked_against_the_bounds(tmp_path):
    episodes = record_episodes("Pendulum-v1", 1, seed=0, env_kwargs={"max_episode_steps": 5})
    from tfsac.data.offline_data import Episodes, checked

    data = checked("rec", Episodes("npz", "Pendulum-v1", None, None, episodes), _spec())
    np.testing.assert_allclose(data.action, episodes[0]["actions"] / 2.0, atol=1e-6)  # [-2, 2]
    assert not data.action.flags.writeable and not data.observation.flags.writeable
    episodes[0]["actions"][2] = 2.5  # out of the env's bounds: another env's data
    with pytest.raises(TfsacError, match="actions outside the env's bounds"):
        checked("rec", Episodes("npz", "Pendulum-v1", None, None, episodes), _spec())
    for bad in (np.nan, np.inf):  # no bound check catches a NaN; a clip would keep it
        episodes[0]["actions"][2] = bad
        with pytest.raises(TfsacError, match="episode 0: non-finite observations, actions or"):
            checked("rec", Episodes("npz", "Pendulum-v1", None, None, episodes), _spec())


def _recorded(n=50, reward=1.0, obs_dim=3):
    rows = np.arange(n)
    return RecordedData(
        source="test",
        kind="npz",
        observation=np.full((n, obs_dim), 5.0, np.float32),
        action=np.zeros((n, 1), np.float32),
        reward=np.full(n, reward, np.float32),
        next_observation=np.full((n, obs_dim), 6.0, np.float32),
        terminated=np.zeros(n, np.float32),
        next_index=np.where(rows % 10 == 9, n, rows + 1),
    )


def _online(n=40, seed=0):
    buffer = ReplayBuffer(100, 3, 1, seed=seed)
    buffer.add(np.zeros((n, 3)), np.zeros((n, 1)), np.zeros(n), np.ones((n, 3)), np.zeros(n))
    return buffer


@pytest.mark.parametrize("ratio", [0.0, 0.25, 0.5, 0.9, 1.0])
def test_the_recorded_share_of_every_batch_is_exact(ratio):
    mixed = MixedReplay(_online(), RecordedReplay(_recorded(), 1, 0.99), ratio, seed=0)
    batches = mixed.sample_packed(batch_size=64, num_batches=50)
    recorded_rows = (batches[..., 4] == 1.0).sum(axis=1)  # reward: 1 recorded, 0 online
    assert batches.shape == (50, 64, 3 + 1 + 1 + 3 + 1 + 1)
    assert (recorded_rows == round(ratio * 64)).all()
    # The online rows are the online buffer's own draws, as in a run without the data.
    reference = _online().sample_packed(64 - round(ratio * 64), 50)
    np.testing.assert_array_equal(batches[:, round(ratio * 64) :], reference)


def test_a_ratio_that_rounds_to_no_rows_of_one_kind_is_said(tmp_path, dataset, caplog):
    for ratio, said in ((0.001, "is 0 recorded rows per batch: online rows only"), (0.5, None)):
        caplog.clear()
        Trainer(_config(tmp_path, f"r{ratio}", dataset, offline_ratio=ratio), export=False)
        assert (said in caplog.text) if said else ("recorded rows per batch" not in caplog.text)


def test_sampling_by_size_draws_the_union_uniformly():
    mixed = MixedReplay(_online(40), RecordedReplay(_recorded(60), 1, 0.99), None, seed=0)
    share = (mixed.sample_packed(100, 200)[..., 4] == 1.0).mean()
    assert abs(share - 0.6) < 0.01  # 60 recorded of 100 rows


def test_n_step_returns_follow_the_recorded_episodes():
    recorded = RecordedReplay(_recorded(20), n_steps=3, gamma=0.5)
    rows = recorded.packed(np.array([0, 8, 9]))
    # Episodes of 10 rows: row 0 sums 3 rewards, row 8 two (its episode ends at 9), row 9 one.
    np.testing.assert_allclose(rows[:, 4], [1.75, 1.5, 1.0])
    np.testing.assert_allclose(rows[:, -1], [0.125, 0.25, 0.5])


def _config(tmp_path, name, data, **kw):
    options = dict(
        env_id="Pendulum-v1",
        env_kwargs={"max_episode_steps": 25},  # short evaluations
        total_steps=40,
        learning_starts=10,
        batch_size=16,
        hidden_sizes=(16, 16),
        eval_every=40,
        eval_episodes=1,
        log_every=20,
        checkpoint_every=20,
        run_dir=str(tmp_path / name),
        deterministic=True,
        buffer_size=1000,
        tensorboard=False,
        offline_data=str(data),
        jit_compile=False,
    )
    options.update(kw)
    return SACConfig(**options)


@pytest.fixture
def dataset(tmp_path):
    from tfsac.data.recording import write_dataset

    episodes = record_episodes("Pendulum-v1", 1, seed=7, env_kwargs={"max_episode_steps": 60})
    return write_dataset(episodes, "Pendulum-v1", str(tmp_path / "data"), "npz")


def _weights(trainer):
    return [v.numpy() for v in trainer.learner.sac.trainable_state()]


@pytest.mark.slow
def test_checkpoints_reference_the_recorded_rows_and_a_resume_restores_exactly(tmp_path, dataset):
    full = Trainer(_config(tmp_path, "full", dataset), export=False)
    full.run()
    Trainer(_config(tmp_path, "split", dataset, total_steps=20), export=False).run()
    resumed = Trainer(_config(tmp_path, "split", dataset), export=False, resume=True)
    resumed.run()
    for a, b in zip(_weights(full), _weights(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    extra = tmp_path / "full" / "checkpoints" / "ckpt-40.extra"
    # The checkpoint's replay holds the 40 online rows only; the recorded 60 by reference.
    assert np.load(extra / "rows.npy").shape[0] == 40
    reference = json.loads((extra / "state.json").read_text())["offline_data"]
    assert reference["transitions"] == 60 and reference["source"] == dataset
    assert len(reference["checksum"]) == 64
    # A run directory is a source too: its newest checkpoint's replay, memory-mapped.
    replay = load_recorded(str(tmp_path / "full"), _spec())
    assert replay.kind == "run" and len(replay) == 40
    np.testing.assert_array_equal(replay.observation, full.buffer.observation[:40])
    np.testing.assert_array_equal(replay.next_observation, full.buffer.next_observation[:40])
    np.testing.assert_array_equal(replay.action, full.buffer.action[:40])
    # The same data elsewhere (moved, or named from another directory): its checksum
    # says it is the checkpoint's, and the resume takes it.
    moved = shutil.copytree(dataset, tmp_path / "moved")
    Trainer(_config(tmp_path, "split", moved, total_steps=60), export=False, resume=True)
    _run_dir_sources_get_the_recorded_datas_checks(tmp_path / "full", tmp_path)
    # A checkpoint whose reference to the data is damaged: one line, not a KeyError.
    state_file = tmp_path / "split" / "checkpoints" / "ckpt-40.extra" / "state.json"
    saved = state_file.read_text()
    state = json.loads(saved)
    del state["offline_data"]["checksum"]
    state_file.write_text(json.dumps(state))
    with pytest.raises(TfsacError, match=r"ckpt-40's offline_data entry is damaged"):
        Trainer(_config(tmp_path, "split", dataset, total_steps=60), export=False, resume=True)
    state_file.write_text(saved)
    # Other data under the same name: the resume refuses in one line, before training.
    shutil.copy(
        os.path.join(dataset, "episode_000000.npz"), os.path.join(dataset, "episode_000001.npz")
    )
    with pytest.raises(TfsacError, match=r"trained with 60 recorded transitions .* now holds 120"):
        Trainer(_config(tmp_path, "split", dataset, total_steps=60), export=False, resume=True)


def _drop_older_checkpoint(run_dir):
    """Leaves the newest checkpoint alone: an older one would be read where it is damaged."""
    for older in (run_dir / "checkpoints").glob("ckpt-20.*"):
        shutil.rmtree(older) if older.is_dir() else older.unlink()


def _run_dir_sources_get_the_recorded_datas_checks(run_dir, tmp_path):
    """A run's replay edited by hand is refused as a damaged episode file is."""
    edits = {
        "a NaN observation": ("rows", lambda a: a.__setitem__((3, 0), np.nan)),
        "an action beyond the bounds": ("rows", lambda a: a.__setitem__((3, 3), 7.0)),
        "a link before the first row": ("next_index", lambda a: a.__setitem__(3, -2)),
    }
    messages = {
        "a NaN observation": "non-finite values in its checkpoint replay",
        "an action beyond the bounds": r"replay actions outside \[-1, 1\]",
        "a link before the first row": "corrupt checkpoint replay: next_index out of range",
    }
    for what, (name, edit) in edits.items():
        copy = shutil.copytree(run_dir, tmp_path / f"edited {what}")
        _drop_older_checkpoint(copy)
        extra = copy / "checkpoints" / "ckpt-40.extra"
        array = np.load(extra / f"{name}.npy")
        edit(array)
        np.save(extra / f"{name}.npy", array)
        (copy / "checkpoints" / "ckpt-abc.extra").mkdir()  # not a checkpoint: passed over
        (copy / "checkpoints" / "ckpt-90.extra").mkdir()  # a killed save's (no .index): too
        with pytest.raises(TfsacError, match=messages[what]):
            load_recorded(str(copy), _spec())
    copy = shutil.copytree(run_dir, tmp_path / "empty rows")  # a file a full disk left empty
    _drop_older_checkpoint(copy)
    (copy / "checkpoints" / "ckpt-40.extra" / "rows.npy").write_bytes(b"")
    with pytest.raises(TfsacError, match="corrupt checkpoint replay: No data left in file"):
        load_recorded(str(copy), _spec())
    # A damaged newest checkpoint beside a good older one: the older one's replay, as a
    # resume takes it (a tester's was refused).
    copy = shutil.copytree(run_dir, tmp_path / "damaged newest")
    (copy / "checkpoints" / "ckpt-40.extra" / "rows.npy").write_bytes(b"")
    older = np.load(run_dir / "checkpoints" / "ckpt-20.extra" / "rows.npy")
    replay = load_recorded(str(copy), _spec())
    assert len(replay) == len(older) == 20
    np.testing.assert_array_equal(replay.observation, older[:, :3])


def test_offline_only_training_runs_its_updates_on_the_recorded_data(tmp_path, dataset):
    config = _config(
        tmp_path,
        "offline",
        dataset,
        total_steps=0,
        offline_updates=30,
        num_critics=4,
        target_subset=2,
        actor_q="mean",
        backup_entropy=False,
        policy_delay=3,
        log_every=12,
        tensorboard=True,
    )
    result = Trainer(config, export=False).run()
    assert result.learner.update_count == 30 and result.summary["total_steps"] == 0
    assert len(result.buffer) == 0 and result.summary["evaluations"][0]["step"] == 0
    assert os.path.isdir(tmp_path / "offline" / "checkpoints" / "ckpt-0.extra")
    # Its learner curves by update, every log_every (an offline-RL tester's: one point, at
    # env step 0, and lines only every 250 updates).
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "offline" / "tensorboard")).Reload()
    steps = [e.step for e in events.Tensors("learner/critic_loss")]
    assert steps[:3] == [12, 24, 30]


def test_the_docs_behaviour_cloning_variant_trains_offline_and_reports(
    tmp_path, dataset, monkeypatch
):
    import csv
    import sys

    from conftest import REPO_ROOT, docs_example

    from tfsac.algorithm.variants import VARIANTS

    page = os.path.join(REPO_ROOT, "docs", "guide", "recorded-data.md")
    code = docs_example(page, "offline_algos.py")
    (tmp_path / "offline_algos.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = _config(
        tmp_path,
        "bc",
        dataset,
        algorithm="offline_algos:sac_bc",
        total_steps=0,
        offline_updates=20,
        algorithm_kwargs={"bc_weight": 1.0},
    )
    try:
        result = Trainer(config, export=False).run()
        with open(tmp_path / "bc" / "progress.csv") as f:
            rows = list(csv.DictReader(f))
        assert 0 < float(rows[-1]["bc_loss"]) < 4  # squared distances of actions in [-1, 1]
        assert result.learner.sac.variant.kwargs == {"bc_weight": 1.0}
    finally:
        VARIANTS.pop("sac_bc", None)
        sys.modules.pop("offline_algos", None)


@pytest.mark.parametrize(
    "ratio, folded",
    [
        (0.5, 60),
        pytest.param("size", 60, marks=pytest.mark.slow),
        pytest.param(0.0, 0, marks=pytest.mark.slow),
    ],
)
def test_the_observation_normaliser_counts_the_recorded_rows_it_samples(
    tmp_path, dataset, ratio, folded
):
    config = _config(tmp_path, "run", dataset, network="simba", offline_ratio=ratio)
    trainer = Trainer(config, export=False)
    normaliser = trainer.learner.sac.obs_normalizer
    assert normaliser.count.numpy() == folded  # before the first step: the recorded 60 rows
    if folded:
        recorded = trainer.parts.mixed.recorded.data.observation
        np.testing.assert_allclose(normaliser.mean.numpy(), recorded.mean(axis=0), rtol=1e-5)
    trainer.run()
    assert normaliser.count.numpy() == folded + 40  # and each online observation
    resumed = Trainer(config, export=False, resume=True)  # its statistics: the checkpoint's
    assert resumed.learner.sac.obs_normalizer.count.numpy() == folded + 40


@pytest.mark.parametrize("network", ["mlp", "simba"])
def test_the_target_over_a_subset_evaluates_only_the_drawn_critics(network):
    config = SACConfig(
        hidden_sizes=(8, 8), num_critics=5, target_subset=2, network=network, jit_compile=False
    )
    keras.utils.set_random_seed(0)  # networks whose subset's minimum is not the ensemble's
    sac = SACLearner(3, 1, config).sac
    batch = {k: v[0] for k, v in random_batch(1, 6, 3, 1).items()}
    batch["discount"] = np.full(6, 0.99, np.float32)
    seed = tf.constant([5, 9], tf.int32)
    target = sac.variant.td_target(batch, batch["reward"], 0.3, seed)
    # By hand: all five target critics at a' ~ pi(.|s'), then the drawn two's minimum.
    members = losses.random_subset(5, 2, seed)
    next_action, next_log_prob = sac.sample_with_log_prob(batch["next_observation"], seed)
    every = sac.target_critic(batch["next_observation"], next_action, training=True)
    y = batch["reward"] + 0.99 * (1.0 - batch["terminated"]) * (
        np.min(tf.gather(every, members), axis=0) - 0.3 * next_log_prob
    )
    np.testing.assert_allclose(target, y, rtol=1e-5)
    assert not np.allclose(
        target,
        losses.soft_td_target(
            batch["reward"], batch["terminated"], every, next_log_prob, 0.3, 0.99
        ),
    )  # the subset's minimum, not the ensemble's


def test_a_custom_critic_without_members_is_refused_with_a_target_subset():
    from tfsac.algorithm.networks import Critic

    class Plain(Critic):
        def call(self, observations, actions, training=None):
            return super().call(observations, actions, training=training)

    config = SACConfig(hidden_sizes=(8, 8), num_critics=4, target_subset=2)
    with pytest.raises(TfsacError, match="critic must take members="):
        SACLearner(3, 1, config, critic_fn=lambda o, a: Plain(4, (8, 8)))


def test_random_subset_takes_distinct_critics_the_same_for_the_whole_batch():
    picked = set()
    for i in range(20):
        subset = losses.random_subset(10, 2, tf.constant([i, 3], tf.int32)).numpy()
        assert subset.shape == (2,) and subset[0] != subset[1]
        assert set(subset.tolist()) <= set(range(10))
        picked.update(subset.tolist())
    assert len(picked) >= 8  # over draws, the subsets cover the ensemble
    # Without the entropy term (RLPD's backup_entropy=False) the target is r + gamma min Q'.
    target = losses.soft_td_target(
        1.0, 0.0, tf.constant([[2.0], [3.0]]), tf.constant([5.0]), 0.0, 0.5
    )
    assert target.numpy().tolist() == [2.0]
    mean_loss = losses.actor_loss_on_mean(tf.constant([0.0]), tf.constant([[2.0], [4.0]]), 1.0)
    assert mean_loss.numpy() == -3.0


@pytest.mark.slow
def test_an_rlpd_preset_without_data_says_that_it_learns_online_only(tmp_path):
    """The presets set offline_ratio; without --offline_data they would be slow online SAC,
    silently. A start refused for another reason says that reason alone."""
    from conftest import REPO_ROOT

    preset = os.path.join(REPO_ROOT, "scripts", "presets", "pendulum_v1_rlpd.flags")
    tiny = ["--total_steps=30", "--learning_starts=20", "--batch_size=8", "--hidden_sizes=8"]
    tiny += ["--num_critics=2", "--target_subset=0", "--gradient_steps=1", "--policy_delay=1"]
    tiny += ["--eval_every=30", "--eval_episodes=1", "--export=false", "--run_dir=run"]
    done = run_script("train", [f"--flagfile={preset}", *tiny], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "without --offline_data: this run learns online only" in done.stderr
    done = run_script("train", [f"--flagfile={preset}", "--env=NoSuchEnv-v0"], cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "NoSuchEnv-v0" in lines[0]


def test_episode_values_a_tester_found_taken_are_refused_in_one_line(tmp_path, monkeypatch):
    """NaN or 0.5 terminations were read as True; a float64 reward beyond float32 printed
    numpy's overflow warning before the error; zero-width action bounds divided by zero
    (NaN actions); a text file named episode_0.npz was said to hold pickled data; and a
    missing Minari id made Minari's datasets folder (outside every path named)."""
    import warnings

    from tfsac.data.offline_data import Episodes, checked

    def episodes(**changes):
        found = record_episodes("Pendulum-v1", 1, seed=0, env_kwargs={"max_episode_steps": 5})
        found[0].update(changes)
        return Episodes("npz", "Pendulum-v1", None, None, found)

    for flags in ([0, 0, 0, 0, np.nan], [0, 0, 0, 0, 0.5]):
        with pytest.raises(TfsacError, match="terminations and truncations must be 0 or 1"):
            checked("rec", episodes(terminations=np.array(flags)), _spec())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning line would be a second line
        with pytest.raises(TfsacError, match="non-finite observations, actions or rewards"):
            checked("rec", episodes(rewards=np.array([0, 1, 1e300, 0, 0])), _spec())
    # A fixed action (zero width): 0 in the replay where recorded at its value (as the
    # policy's 0 maps to it), refused elsewhere (the rescale divided by zero: NaN actions).
    fixed = dataclasses.replace(_spec(), action_low=(-2.0,), action_high=(-2.0,))
    with pytest.raises(TfsacError, match="actions outside the env's bounds"):
        checked("rec", episodes(), fixed)
    at_it = episodes()
    at_it.episodes[0]["actions"][:] = -2.0
    np.testing.assert_array_equal(checked("rec", at_it, fixed).action, 0.0)
    folder = tmp_path / "npz"
    folder.mkdir()
    (folder / "dataset.json").write_text(
        json.dumps(
            {"format": NPZ_FORMAT, "env_id": "Pendulum-v1", "action_low": [-2], "action_high": [2]}
        )
    )
    (folder / "episode_0.npz").write_text("not an archive")
    with pytest.raises(TfsacError, match="episode_0.npz: not an .npz archive of arrays$"):
        load_recorded(str(folder), _spec())
    np.savez(folder / "episode_0.npz", observations=np.array([[1.0], "a"], dtype=object))
    with pytest.raises(TfsacError, match="episode_0.npz: it holds object arrays: save numeric"):
        load_recorded(str(folder), _spec())
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TfsacError, match="no Minari dataset of that id .*name it where it is"):
        load_recorded("nosuch/data-v0", _spec())
    assert not (tmp_path / "minari").exists()
