"""Options users of other SAC implementations expect: how each reaches the learner."""

import dataclasses
import json
import os
import pathlib
import sys
from typing import Optional

import numpy as np
import pytest
import tensorflow as tf
from absl import flags
from conftest import REPO_ROOT, random_batch

from tfsac import SACConfig, SACLearner, TfsacError
from tfsac.algorithm.resolve import resolve

sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
import _cli  # noqa: E402

import tfsac  # noqa: E402

pytestmark = pytest.mark.usefixtures("training_flags")


def _config_from_args(*args):
    fv = flags.FLAGS
    fv.unparse_flags()
    try:
        fv(["train.py", *args])
        return _cli.config_from_flags(tfsac)
    finally:
        fv.unparse_flags()


@pytest.mark.parametrize(
    "value, alpha, initial",
    [("auto", None, 1.0), ("auto_0.1", None, 0.1), ("0.2", 0.2, 1.0)],
)
def test_entropy_coefficient_forms(value, alpha, initial):
    config = _config_from_args(f"--alpha={value}")
    assert (config.alpha, config.initial_alpha) == (alpha, initial)
    learner = SACLearner(3, 1, config)
    assert float(learner.alpha) == pytest.approx(alpha or initial)
    assert learner.sac.temperature.log_alpha.trainable == (alpha is None)


def test_separate_learning_rates_and_clipping():
    config = _config_from_args(
        "--learning_rate=1e-3",
        "--critic_learning_rate=5e-4",
        "--max_grad_norm=0.5",
        "--hidden_sizes=8",
    )
    learner = SACLearner(3, 1, config)
    assert float(learner.sac.actor_optimizer.learning_rate) == pytest.approx(1e-3)
    assert float(learner.sac.critic_optimizer.learning_rate) == pytest.approx(5e-4)
    assert float(learner.sac.temperature.optimizer.learning_rate) == pytest.approx(1e-3)
    assert learner.sac.critic_optimizer.global_clipnorm == 0.5
    assert learner.sac.actor_optimizer.global_clipnorm == 0.5


def test_clipped_update_moves_like_adam_and_stays_finite():
    rng = np.random.default_rng(0)
    batch = {
        "observation": rng.normal(size=(1, 32, 3)).astype(np.float32),
        "action": rng.uniform(-1, 1, (1, 32, 1)).astype(np.float32),
        "reward": (1e4 * rng.normal(size=(1, 32))).astype(np.float32),  # huge gradients
        "next_observation": rng.normal(size=(1, 32, 3)).astype(np.float32),
        "terminated": np.zeros((1, 32), np.float32),
    }
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(8,), max_grad_norm=1.0, jit_compile=False))
    before = learner.critic.head.bias.numpy().copy()
    assert learner.update(batch)["finite"]
    # Adam's first step moves each parameter by at most the learning rate.
    assert np.max(np.abs(learner.critic.head.bias.numpy() - before)) <= 3e-4 * 1.0001


@pytest.mark.parametrize(
    "field, value",
    [
        ("reward_scale", 0.0),
        ("reward_scale", float("inf")),
        ("max_grad_norm", -1.0),
        ("critic_learning_rate", 2.0),
        ("alpha", float("inf")),
        ("initial_alpha", float("inf")),
        ("target_entropy", float("nan")),
        ("model_name", "../elsewhere"),
        ("model_name", "a/b"),
        ("model_name", ""),
    ],
)
def test_bad_option_values(field, value):
    with pytest.raises(TfsacError, match=field):
        resolve(SACConfig(**{field: value}))


def _batch(g=1, seed=0):
    return random_batch(g, 16, 3, 1, seed, terminated_fraction=0.0)


def test_policy_delay_updates_actor_and_alpha_every_k_critic_steps():
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(8,), policy_delay=2, jit_compile=False))
    log_alphas = []
    for _ in range(4):
        metrics = learner.update(_batch())
        log_alphas.append(float(learner.sac.temperature.log_alpha.numpy()))
    assert int(learner.sac.critic_optimizer.iterations.numpy()) == 4
    assert int(learner.sac.actor_optimizer.iterations.numpy()) == 2
    assert int(learner.sac.temperature.optimizer.iterations.numpy()) == 2
    # Alpha moves on critic updates 2 and 4 only.
    assert log_alphas[0] == 0.0 and log_alphas[1] != 0.0
    assert log_alphas[2] == log_alphas[1] and log_alphas[3] != log_alphas[2]
    assert metrics["finite"] and metrics["actor_loss"] != 0.0
    # Four updates in one compiled call behave the same.
    fused = SACLearner(3, 1, SACConfig(hidden_sizes=(8,), policy_delay=2, jit_compile=False))
    fused.update(_batch(g=4))
    assert int(fused.sac.actor_optimizer.iterations.numpy()) == 2


@pytest.mark.slow
def test_target_update_interval():
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(8,), target_update_interval=2))
    target = learner.target_critic.head.bias
    start = target.numpy().copy()
    learner.update(_batch())
    np.testing.assert_array_equal(target.numpy(), start)  # critic update 1: no target step
    learner.update(_batch(seed=1))
    assert not np.array_equal(target.numpy(), start)  # update 2: Polyak step


def test_droq_critics_layer_norm_and_dropout():
    config = SACConfig(
        hidden_sizes=(8, 8), critic_layer_norm=True, critic_dropout=0.5, jit_compile=False
    )
    learner = SACLearner(3, 1, config)
    names = [layer.name for layer in learner.critic.trunk.layers]
    assert names == [
        "hidden_0",
        "dropout_0",
        "layer_norm_0",
        "relu_0",
        "hidden_1",
        "dropout_1",
        "layer_norm_1",
        "relu_1",
    ]
    obs, act = np.ones((4, 3), np.float32), np.zeros((4, 1), np.float32)
    # Dropout only in training mode; two members normalise independently.
    np.testing.assert_array_equal(learner.critic(obs, act), learner.critic(obs, act))
    assert not np.array_equal(
        learner.critic(obs, act, training=True), learner.critic(obs, act, training=True)
    )
    assert learner.update(_batch(g=3))["finite"]
    assert learner.critic.trunk.layers[2].gamma.shape == (2, 1, 8)


def test_schedules_parse_and_shape_the_rate():
    from tfsac.config.sac_config import check_new_run
    from tfsac.config.schedules import parse_schedule

    linear = parse_schedule("linear")
    assert [linear(s, 100) for s in (0, 25, 100)] == [1.0, 0.75, 0.0]
    piecewise = parse_schedule("piecewise:50:0.5,80:0.1")
    assert [piecewise(s, 100) for s in (10, 50, 79, 80)] == [1.0, 0.5, 0.5, 0.1]
    for bad in ("cosine", "piecewise:10", "piecewise:10:-1", "piecewise:10:inf", "piecewise:9:nan"):
        with pytest.raises(TfsacError, match="lr_schedule .* positive finite factors"):
            resolve(SACConfig(lr_schedule=bad))
    # Two factors from one step: a saved run's config loads (the larger wins, as before),
    # a new run is refused.
    twice = resolve(SACConfig(lr_schedule="piecewise:100:0.5,100:0.2"))
    with pytest.raises(TfsacError, match="gives step 100 two factors"):
        check_new_run(twice)


def test_a_fixed_alpha_beside_a_learned_ones_options_warns_and_a_saved_run_loads():
    """A tester's: --alpha=0.1 --target_entropy=-2 said nothing. A new run says which
    options it does not read; a run saved so before this loads (resume, evaluate)."""
    from tfsac.config.sac_config import check_new_run

    config = resolve(SACConfig(alpha=0.1, target_entropy=-3.0, use_log_alpha=False))
    assert check_new_run(config) == [
        "target_entropy=-3.0 is not read: alpha is fixed at 0.1 (alpha=auto learns it)",
        "use_log_alpha=False is not read: alpha is fixed at 0.1 (alpha=auto learns it)",
    ]
    assert check_new_run(resolve(SACConfig(target_entropy=-3.0))) == []  # learned: read


def test_options_that_act_only_as_the_runs_end_does_are_said():
    """keep_best without an evaluation before the end keeps the final policy, as the export
    does; an interval past total_steps acts only at the end (a default one says nothing)."""
    from tfsac.config.sac_config import check_new_run, evaluations_before_end

    short = dict(total_steps=3000, learning_starts=100)
    assert check_new_run(resolve(SACConfig(**short))) == []
    config = resolve(SACConfig(**short, keep_best=True, eval_every=4000, checkpoint_every=9000))
    assert check_new_run(config) == [
        "keep_best keeps the best of the evaluations, and eval_every=4000 and total_steps=3000 "
        "make 0 evaluations before the run's last one: its best is the final policy, as the "
        "export's",
        "eval_every=4000 is more than total_steps (3000): the run evaluates only at its end",
        "checkpoint_every=9000 is more than total_steps (3000): the run checkpoints only at "
        "its end",
    ]
    # Evaluations at 1000 and 2000; the one at 3000 ends the run (a stop there stops nothing).
    assert evaluations_before_end(resolve(SACConfig(**short, eval_every=1000))) == 2
    assert evaluations_before_end(resolve(SACConfig(**short, eval_every=999))) == 3
    stop = dict(short, eval_every=1000, stop_after_no_improvement=1)  # needs 1 + 1 + 1
    check_new_run(resolve(SACConfig(**dict(stop, eval_every=999))))
    with pytest.raises(TfsacError, match="needs 3 evaluations, and eval_every=1000 and total_"):
        check_new_run(resolve(SACConfig(**stop)))


def test_linear_schedule_decays_rates_during_training(tmp_path):
    from conftest import tiny_config

    from tfsac import Trainer

    schedule = dict(
        learning_starts=20,
        learning_rate=1e-3,
        alpha_learning_rate=1e-2,
        lr_schedule="linear",
        checkpoint_every=0,
    )
    cfg = tiny_config(tmp_path, "Pendulum-v1", total_steps=100, **schedule)
    trainer = Trainer(cfg, export=False)
    trainer.run()
    learner = trainer.learner
    # Last update at step 100 of 100: factor 0.
    assert float(learner.sac.critic_optimizer.learning_rate) == pytest.approx(0.0, abs=1e-9)
    # A resumed run takes its rates from its own config and step, not the checkpoint's.
    cfg2 = tiny_config(tmp_path, "Pendulum-v1", total_steps=200, **schedule)
    resumed = Trainer(cfg2, export=False, resume=True)
    assert resumed.loop.step == 100
    assert float(resumed.learner.sac.critic_optimizer.learning_rate) == pytest.approx(5e-4)
    assert float(resumed.learner.sac.temperature.optimizer.learning_rate) == pytest.approx(5e-3)


def test_alpha_optimised_directly():
    from tfsac.algorithm import losses

    alpha = tf.Variable(0.5)
    log_prob = tf.constant([-1.0, -3.0])
    # -(0.5) * mean([-2, -4]) = 1.5 ; d/dalpha = 3 > 0: entropy 2 above target 1 -> alpha falls.
    assert float(losses.alpha_loss_direct(alpha, log_prob, -1.0)) == pytest.approx(1.5)
    learner = SACLearner(
        3,
        1,
        SACConfig(
            hidden_sizes=(8,),
            use_log_alpha=False,
            initial_alpha=0.5,
            alpha_learning_rate=0.1,
            jit_compile=False,
        ),
    )
    assert learner.sac.temperature.variable.name.startswith("alpha")
    assert float(learner.alpha) == 0.5
    before = float(learner.alpha)
    metrics = learner.update(_batch(g=5))
    after = float(learner.alpha)
    assert metrics["finite"] and after != before and after >= 1e-8
    assert float(learner.sac.temperature.log_alpha.numpy()) == pytest.approx(
        np.log(0.5)
    )  # unused here


@pytest.mark.parametrize("gradient_steps, expected", [(-1, [6, 7, 7, 7]), (3, [3] * 4)])
def test_episodes_per_rollout_updates_after_whole_episodes(
    tmp_path, counter_env_id, gradient_steps, expected
):
    from conftest import tiny_config

    from tfsac import UpdateSchedule, train

    # CounterEnv episodes last 3, 4, 3, 4, ... steps: pairs end at steps 7, 14, 21, 28, 35.
    episode_ends = set(np.cumsum([3, 4] * 6).tolist())
    schedule = UpdateSchedule(
        learning_starts=8, episodes_per_rollout=2, gradient_steps=gradient_steps
    )
    calls = []
    for step in range(1, 41):
        _, due = schedule.after_env_step(step - 1, step, int(step in episode_ends))
        calls += [(step, due)] if due else []
    # The pair ending at step 7 is all warmup; the next holds 14 - 8 = 6 learning steps;
    # steps 36-40 finish no pair, so they get no update.
    assert calls == list(zip([14, 21, 28, 35], expected, strict=True))
    # The training loop runs exactly these updates.
    cfg = tiny_config(
        tmp_path,
        counter_env_id,
        learning_starts=8,
        episodes_per_rollout=2,
        gradient_steps=gradient_steps,
    )
    result = train(cfg, export=False)
    assert int(result.learner.sac.critic_optimizer.iterations.numpy()) == sum(expected)


def test_new_option_flags_reach_the_config():
    config = _config_from_args(
        "--variant=v1",
        "--value_learning_rate=1e-3",
        "--use_sde",
        "--sde_sample_freq=4",
        "--use_sde_at_warmup",
        "--log_std_init=-2",
        "--episodes_per_rollout=2",
        "--gradient_steps=-1",
    )
    assert (resolve(config).algorithm, config.value_learning_rate) == ("sac_v1", 1e-3)
    assert (config.use_sde, config.sde_sample_freq, config.use_sde_at_warmup) == (True, 4, True)
    assert (config.log_std_init, config.episodes_per_rollout, config.gradient_steps) == (
        -2.0,
        2,
        -1,
    )
    learner = SACLearner(3, 1, resolve(config))
    assert float(learner.sac.variant.optimizer.learning_rate) == pytest.approx(1e-3)
    np.testing.assert_allclose(learner.actor.log_std.numpy(), -2.0)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(variant="v3"), "variant"),
        (dict(gradient_steps=0), "gradient_steps"),
        (dict(gradient_steps=-2), "gradient_steps"),
        (dict(episodes_per_rollout=-1), "episodes_per_rollout"),
        (dict(episodes_per_rollout=2, train_freq=4), "both set"),
    ],
)
def test_bad_collection_and_variant_settings(kw, message):
    with pytest.raises(TfsacError, match=message):
        resolve(SACConfig(**kw))


@pytest.mark.slow
def test_v1_updates_value_networks_and_not_without_updates():
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(8,), variant="v1", tau=0.5))
    assert learner.target_critic is None
    value_before = [v.numpy().copy() for v in learner.sac.variant.value.trainable_variables]
    target_before = [v.numpy().copy() for v in learner.sac.variant.target_value.trainable_variables]
    learner.act(np.ones((2, 3), np.float32))  # acting changes nothing
    for v, before in zip(learner.sac.variant.value.trainable_variables, value_before, strict=True):
        np.testing.assert_array_equal(v.numpy(), before)
    metrics = learner.update(_batch(g=2))
    assert metrics["finite"] and metrics["value_loss"] > 0
    for v, before in zip(learner.sac.variant.value.trainable_variables, value_before, strict=True):
        assert not np.array_equal(v.numpy(), before)
    for v, before in zip(
        learner.sac.variant.target_value.trainable_variables, target_before, strict=True
    ):
        assert not np.array_equal(v.numpy(), before)


def test_v1_value_network_sees_the_critics_inputs_sizes_and_optimizer():
    """Found by a reviewer: V took raw observations where the actor and critics took
    normalised ones (V(s') is the critics' whole bootstrap in v1), the actor's sizes and
    plain Adam without the critics' weight decay."""
    config = SACConfig(
        hidden_sizes=(8,),
        critic_hidden_sizes=(16, 4),
        variant="v1",
        normalize_observations=True,
        weight_decay=0.01,
    )
    learner = SACLearner(3, 1, config)
    sac, value = learner.sac, learner.sac.variant.value
    observations = np.random.default_rng(0).normal(1000.0, 50.0, (64, 3)).astype(np.float32)
    sac.observe(observations)
    normalised = sac.obs_normalizer(observations)
    assert abs(float(tf.reduce_mean(normalised))) < 0.1  # the statistics moved
    np.testing.assert_allclose(
        value(observations), tf.squeeze(value.head(value.trunk(normalised)), -1), rtol=1e-5
    )
    assert [layer.units for layer in value.trunk.layers] == [16, 4]
    assert isinstance(sac.variant.optimizer, tf.keras.optimizers.AdamW)


def options_table() -> str:
    """docs/options.md's table of every option, rendered from SACConfig's fields."""
    import dataclasses

    from tfsac.config.options import GROUPS

    rows = ["| flag (field) | default | meaning |", "| --- | --- | --- |"]
    for group in GROUPS:
        rows.append(f"| **{group}** | | |")
        for field in dataclasses.fields(SACConfig):
            meta = field.metadata
            if meta["group"] != group:
                continue
            flag = meta["flag"] or field.name
            name = f"`--{flag}`" + ("" if flag == field.name else f" (`{field.name}`)")
            default = field.default_factory() if callable(field.default_factory) else field.default
            if meta["text"] is not None:
                default = meta["text"]
            elif isinstance(default, tuple):
                default = ",".join(map(str, default))
            elif isinstance(default, bool) or default is None:
                default = str(default).lower()
            help_text = meta["help"].replace("|", "\\|")  # a bar would end the cell
            rows.append(f"| {name} | `{default}` | {help_text} |")
    return "\n".join(rows) + "\n"


def test_options_doc_lists_every_config_field():
    from conftest import REPO_ROOT

    with open(os.path.join(REPO_ROOT, "docs", "options.md")) as f:
        doc = f.read()
    start = doc.index("<!-- options table -->\n") + len("<!-- options table -->\n")
    table = doc[start : doc.index("<!-- end of options table -->")]
    assert table == options_table(), "docs/options.md's table should read:\n" + options_table()


def test_widths_read_as_text_or_whole_numbers_and_from_dict_takes_a_dict():
    for sizes in ("32,32", [32, 32.0], (32, 32)):
        config = SACConfig(hidden_sizes=sizes, critic_hidden_sizes=sizes)
        assert config.hidden_sizes == config.critic_hidden_sizes == (32, 32)
    with pytest.raises(TfsacError, match="a config is a dict of fields, got NoneType"):
        SACConfig.from_dict(None)


@pytest.mark.parametrize(
    "field, value, must",
    [
        ("learning_rate", "3e-4", "a number"),
        ("batch_size", True, "an integer"),
        ("batch_size", 64.5, "an integer"),
        ("use_sde", 1, "a bool"),
        ("env_id", 3, "a string"),
        ("env_kwargs", ["g", 9.8], "a dict"),
        ("actor_learning_rate", "1e-3", "a number"),
        ("hidden_sizes", 64, "integers"),
        ("hidden_sizes", (32.5,), "integers"),  # not rounded to 32
        ("policy_delay", 1.5, "'auto' or an integer"),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_when_the_config_is_made(field, value, must):
    with pytest.raises(TfsacError, match=f"^{field} must be {must}"):
        SACConfig(**{field: value})
    with pytest.raises(TfsacError, match=f"^{field} must be {must}"):
        dataclasses.replace(SACConfig(), **{field: value})


def test_numbers_of_other_types_become_the_fields_types():
    config = SACConfig(
        learning_rate=np.float32(1e-3), batch_size=np.int64(64), buffer_size=1e5, gamma=1
    )
    assert type(config.learning_rate) is float
    assert (config.batch_size, config.buffer_size) == (64, 100000)
    assert type(config.batch_size) is int and type(config.buffer_size) is int
    assert config.gamma == 1  # an int where a float goes
    json.dumps(config.to_dict())  # numpy scalars would not write into config.json
    paths = SACConfig(run_dir=pathlib.Path("runs/a"), export_dir=pathlib.PurePosixPath("m"))
    assert (paths.run_dir, paths.export_dir) == ("runs/a", "m")  # path objects: their text


def test_a_run_of_something_else_than_a_config_is_one_line():
    from tfsac import train

    with pytest.raises(TfsacError, match="a run takes a tfsac.SACConfig, got dict"):
        train({"env_id": "Pendulum-v1"})


def test_an_optional_number_is_switched_off_with_none_as_help_shows_its_default():
    assert _config_from_args("--stop_at_return=250").stop_at_return == 250.0
    for off in ("none", "None", ""):
        assert _config_from_args(f"--stop_at_return={off}").stop_at_return is None
    with pytest.raises(flags.IllegalFlagValueError):
        _config_from_args("--stop_at_return=abc")


def test_a_resume_names_a_learned_alpha_auto_not_none():
    """A tester's: 'alpha=0.2 differs from the resumed run's None'."""
    from tfsac.config.resume import resume_changes

    with pytest.raises(TfsacError, match=r"alpha=0.2 differs from the resumed run's 'auto' \("):
        resume_changes({"alpha": None, "run_dir": "r"}, {"alpha": 0.2, "run_dir": "r"})
    # And offline_ratio's 'size' (None in config.json), as its flag is written.
    with pytest.raises(
        TfsacError, match=r"offline_ratio='size' differs from the resumed run's 0.5"
    ):
        resume_changes(
            {"offline_ratio": 0.5, "run_dir": "r"}, {"offline_ratio": None, "run_dir": "r"}
        )


def test_layer_widths_take_sb3s_list_syntax_too():
    """`--hidden_sizes=[64,64]` (SB3's net_arch as typed) was refused: the flag's list held
    '[64' and '64]'. Brackets around the whole are taken; half a bracket is still refused."""
    for value in ("[64,64]", "(64, 64)", "64,64", ["[64", "64]"], (64, 64)):
        assert SACConfig(hidden_sizes=value).hidden_sizes == (64, 64)
    assert SACConfig(hidden_sizes=["[8]"], critic_hidden_sizes="[16]").hidden_sizes == (8,)
    assert SACConfig(critic_hidden_sizes="[16, 16]").critic_hidden_sizes == (16, 16)
    for value in ("[64,64", "64]", "[]"):
        with pytest.raises(TfsacError, match="hidden_sizes must be integers"):
            SACConfig(hidden_sizes=value)


# The auto/true/false options: every config field typed Optional[bool].
TRI_STATE = [f.name for f, hint in _cli._config_fields() if hint == Optional[bool]]


def test_the_tri_state_options_are_found():
    assert set(TRI_STATE) >= {"normalize_observations", "progress_bar"}


@pytest.mark.parametrize("name", TRI_STATE)
@pytest.mark.parametrize(
    "args, value",
    [
        ([], None),
        (["--{}"], True),
        (["--no{}"], False),
        (["--{}=auto"], None),
        (["--{}=true"], True),
        (["--{}=False"], False),
        (["--no{}", "--{}=auto"], None),  # the last one given stands
    ],
)
def test_a_tri_state_option_reads_as_a_switch_too(name, args, value):
    config = _config_from_args(*(a.format(name) for a in args))
    assert getattr(config, name) is value


def test_a_switch_does_not_take_the_next_flag_as_its_value():
    config = _config_from_args("--normalize_observations", "--total_steps=800")
    assert (config.normalize_observations, config.total_steps) == (True, 800)
    config = _config_from_args("--nonormalize_observations", "--network=simba")
    assert resolve(config).normalize_observations is False
