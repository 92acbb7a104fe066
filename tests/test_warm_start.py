"""init_from (tfsac/run/builder.py): a new run starts from another run's learned state,
and from nothing else of it."""

import json
import os

import numpy as np
import pytest
from test_offline import _config, dataset, record_episodes  # noqa: F401  (a fixture)

from tfsac import TfsacError
from tfsac.deploy.loading import checkpoint_learner
from tfsac.run.trainer import Trainer


def _learned(learner):
    sac = learner.sac
    models = (sac.actor, sac.critic, sac.target_critic)
    return [w for m in models for w in m.get_weights()] + [sac.temperature.log_alpha.numpy()]


def _same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.slow
def test_an_offline_only_run_is_fine_tuned_online_from_its_learned_state(tmp_path, dataset):  # noqa: F811
    offline = _config(
        tmp_path, "offline", dataset, total_steps=0, offline_updates=30, network="simba"
    )
    source = Trainer(offline, export=False).run().learner
    config = _config(
        tmp_path, "online", dataset, network="simba", init_from=str(tmp_path / "offline"), seed=3
    )
    trainer = Trainer(config, export=False)
    learner = trainer.learner
    assert _same(_learned(learner), _learned(source))
    # The observation statistics are the source's: not the recorded rows folded in again.
    assert learner.sac.obs_normalizer.count.numpy() == source.sac.obs_normalizer.count.numpy()
    # The run's course starts afresh: no optimizer steps or moments, this run's seed.
    assert learner.update_count == 0
    assert all(
        not np.any(v.numpy()) for v in learner.sac.critic_optimizer.variables if v.shape.rank
    )
    trainer.run()
    assert learner.update_count > 0 and not _same(_learned(learner), _learned(source))
    # A resume takes its own checkpoint, not the source's again.
    longer = _config(
        tmp_path,
        "online",
        dataset,
        network="simba",
        init_from=str(tmp_path / "offline"),
        seed=3,
        total_steps=60,
    )
    resumed = Trainer(longer, export=False, resume=True)
    assert _same(_learned(resumed.learner), _learned(learner))


@pytest.fixture(scope="module")
def online_source(tmp_path_factory):
    """(a folder holding `source`, a 40-step run with checkpoints at 20 and 40, its data)."""
    from tfsac.data.recording import write_dataset

    root = tmp_path_factory.mktemp("warm")
    episodes = record_episodes("Pendulum-v1", 1, seed=7, env_kwargs={"max_episode_steps": 60})
    data = write_dataset(episodes, "Pendulum-v1", str(root / "data"), "npz")
    Trainer(_config(root, "source", data, keep_checkpoints=5), export=False).run()
    return root, data


def test_a_checkpoint_prefix_names_the_step_and_a_fixed_alpha_stays_this_runs(
    tmp_path, online_source
):
    root, data = online_source
    prefix = root / "source" / "checkpoints" / "ckpt-20"
    config = _config(tmp_path, "tuned", data, init_from=str(prefix), alpha=0.05)
    learner = Trainer(config, export=False).learner
    at_20, _, _ = checkpoint_learner(str(root / "source"), step=20)
    newest, _, _ = checkpoint_learner(str(root / "source"))
    assert _same(_learned(learner)[:-1], _learned(at_20)[:-1])
    assert not _same(_learned(learner)[:-1], _learned(newest)[:-1])
    assert np.isclose(np.exp(learner.sac.temperature.log_alpha.numpy()), 0.05)


@pytest.mark.parametrize(
    "source, overrides, message",
    [
        ("nowhere", {}, r"init_from: '.*nowhere' is not a tfsac run directory"),
        ("source/checkpoints/ckpt-30", {}, r"no checkpoint of step 30 .* \(steps: 40, 20\)"),
        ("source/checkpoints/ckpt-x", {}, r"not a checkpoint \(ckpt-<env step>\)"),
        ("source", {"hidden_sizes": (8, 8)}, r"trained with hidden_sizes=\(16, 16\), this run"),
        ("source", {"num_critics": 3}, r"num_critics=2, this run has num_critics=3"),
        # Same settings, other spaces: the variables' shapes differ.
        (
            "source",
            {"env_id": "MountainCarContinuous-v0", "offline_data": None},
            r"trained on Pendulum-v1 \(observations of 3 numbers, actions of 1\), this run's "
            r"MountainCarContinuous-v0 has 2 and 1: its networks do not fit$",
        ),
        ("source/checkpoints/ckpt-20.index", {}, r"name its prefix, .*/checkpoints/ckpt-20$"),
    ],
)
def test_a_source_that_does_not_fit_is_one_line_and_writes_nothing(
    tmp_path, online_source, source, overrides, message
):
    root, data = online_source
    config = _config(tmp_path, "new", data, init_from=str(root / source), **overrides)
    with pytest.raises(TfsacError, match=message):
        Trainer(config, export=False)
    assert not os.path.exists(tmp_path / "new")


def test_a_source_whose_env_spec_json_is_damaged_is_one_line(tmp_path, online_source):
    """Found by a reviewer: a damaged env_spec.json was passed over with the env's failures,
    so a source of other spaces got by the space check."""
    import shutil

    root, _ = online_source
    source = shutil.copytree(root / "source", tmp_path / "source")
    (source / "env_spec.json").write_text("{cut")
    overrides = dict(env_id="MountainCarContinuous-v0", offline_data=None)
    config = _config(tmp_path, "new", None, init_from=str(source), **overrides)
    with pytest.raises(TfsacError, match=r"env_spec.json"):
        Trainer(config, export=False)
    assert not os.path.exists(tmp_path / "new")


@pytest.mark.parametrize(
    "algorithm",
    [
        pytest.param("sac_v1", marks=pytest.mark.slow),
        pytest.param("tqc", marks=pytest.mark.slow),
        "crossq",
    ],
)
def test_every_algorithms_learned_state_carries_over(tmp_path, algorithm):
    options = dict(algorithm=algorithm, offline_data=None, critic_hidden_sizes=(16, 16))
    source = Trainer(_config(tmp_path, "source", None, **options), export=False).run().learner
    config = _config(tmp_path, "new", None, init_from=str(tmp_path / "source"), **options)
    learner = Trainer(config, export=False).learner
    # Every variable an update writes: the variant's networks (V), batch statistics, atoms.
    state, expected = learner.sac.trainable_state(), source.sac.trainable_state()
    assert _same([v.numpy() for v in state], [v.numpy() for v in expected])


def test_networks_that_do_not_fit_are_one_line_without_tensorflows_warnings(
    tmp_path, online_source, caplog
):
    from tfsac import Actor

    def actor_fn(obs_dim, action_dim):  # the same settings, narrower layers: other shapes
        return Actor(action_dim, hidden_sizes=(8, 8))

    root, data = online_source
    config = _config(tmp_path, "new", data, init_from=str(root / "source"))
    with pytest.raises(
        TfsacError, match=r"no checkpoint restores into this run \(.*ckpt-40' holds other variables"
    ):
        Trainer(config, export=False, actor_fn=actor_fn)
    # TensorFlow's complaints about the dropped restore's objects: a page for one error.
    assert not [r for r in caplog.records if r.name == "tensorflow"]
    assert not os.path.exists(tmp_path / "new")


def test_a_temperature_the_source_held_fixed_is_not_carried_over(tmp_path, dataset):  # noqa: F811
    fixed = _config(tmp_path, "fixed", dataset, total_steps=0, offline_updates=5, alpha=0.1)
    Trainer(fixed, export=False).run()
    config = _config(tmp_path, "new", dataset, init_from=str(tmp_path / "fixed"), initial_alpha=0.5)
    learner = Trainer(config, export=False).learner
    assert np.isclose(np.exp(learner.sac.temperature.log_alpha.numpy()), 0.5)


def test_a_resume_does_not_read_init_from_so_it_may_change(tmp_path, online_source):
    root, data = online_source
    source = str(root / "source")
    Trainer(_config(tmp_path, "new", data, init_from=source), export=False).run()
    # The same source written otherwise, or gone: the run's own checkpoint is restored.
    for init_from in (source + "/", str(tmp_path / "gone")):
        config = _config(tmp_path, "new", data, init_from=init_from, total_steps=60)
        trainer = Trainer(config, export=False, resume=True)
        assert trainer.resumed_from.endswith("ckpt-40")
        # The run's record keeps the source it started from (a tester's: the resume wrote
        # the one it never read into config.json).
        assert trainer.config.init_from == source
        assert json.loads((tmp_path / "new" / "config.json").read_text())["init_from"] == source


def test_a_sweeps_trials_read_init_from_and_recorded_data_from_where_it_started(
    tmp_path, monkeypatch, online_source
):
    """Trials run in Tune's trial folders: relative paths are made absolute when the sweep
    is planned, and a source that no trial could read is refused then, writing nothing."""
    from tfsac import SACConfig
    from tfsac.algorithm.resolve import resolve
    from tfsac.scale.sweeps.plan import plan_sweep

    root, data = online_source
    monkeypatch.chdir(root)

    class Configs:  # the sweep script's FlagConfigs, over the source's settings
        names = frozenset(SACConfig.__dataclass_fields__)

        def __call__(self, overrides):
            kinds = {"seed": int, "num_critics": int}
            values = {k: kinds.get(k, str)(v) for k, v in overrides.items()}
            values = {"env_id": "Pendulum-v1", "hidden_sizes": (16, 16), **values}
            return resolve(SACConfig(**values))

    grid = ["init_from=source,source/checkpoints/ckpt-20", "offline_data=data"]
    plan = plan_sweep(Configs(), str(tmp_path / "sweep"), [0], grid=grid)
    assert {t["config"]["init_from"] for t in plan.trials} == {
        str(root / "source"),
        str(root / "source" / "checkpoints" / "ckpt-20"),
    }
    assert {t["config"]["offline_data"] for t in plan.trials} == {str(root / "data")}
    for grid, message in (
        (["init_from=nowhere"], r"init_from: '.*nowhere' is not a tfsac run directory"),
        (["init_from=source", "num_critics=3"], r"num_critics=2, this run has num_critics=3"),
        # Every config's networks: the first grid value fits, the second does not.
        (["init_from=source", "hidden_sizes=16,16;8,8"], r"this run has hidden_sizes=\(8, 8\)"),
        (["offline_data=nodata"], r"'nodata': no such folder"),
    ):
        with pytest.raises(TfsacError, match=message):
            plan_sweep(Configs(), str(tmp_path / "sweep"), [0], grid=grid)
    assert not os.path.exists(tmp_path / "sweep")
