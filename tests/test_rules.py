"""Every rule between options (the rows of tfsac/config/rules.py) is reached by a bad-input
row: one of tests/test_bad_inputs.py's train.py cases, read as the config its flags make, or
one of the Python configs below. TF-free and quick: no script runs, no env is made."""

import dataclasses
import typing

import pytest
from test_bad_inputs import CASES

from tfsac.config import SACConfig
from tfsac.config.fields import field_errors
from tfsac.config.rules import NEEDS, NEW_RUN_NEEDS, NEW_RUN_RULES, RULES
from tfsac.config.sac_config import check_new_run
from tfsac.errors import TfsacError

ALL_RULES = {**RULES, **NEW_RUN_RULES}

# (a config's options, a piece of its one line): the rules no train.py case above reaches,
# most as the other test files' bad-input rows give them.
PYTHON_CASES = [
    (dict(episodes_per_rollout=2, train_freq=4), "both set"),
    (dict(sde_sample_freq=4), "need use_sde"),
    (dict(use_sde_at_warmup=True), "need use_sde"),
    (dict(use_sde=True, log_std_init=5.0), "log_std_init must lie in [log_std_min"),
    (dict(log_std_min=-1.0, log_std_max=-2.0, log_std_init=-1.5), "log_std_init must lie"),
    (dict(log_std_min=-1.0, log_std_max=-1.0, log_std_init=-1.0), "log_std_min must be sma"),
    (dict(num_envs=3, total_steps=1000), "total_steps (1000) must be a multiple of num_envs"),
    (dict(offline_updates=5), "offline_updates needs offline_data (the recorded transitions)"),
    (dict(total_steps=0, offline_data="d", offline_updates=5, lr_schedule="linear"), "lr_sch"),
    (dict(total_steps=0, offline_data="d", offline_updates=5, num_actors=1), "num_actors need"),
    (dict(her_goals_per_transition=8), "her_goals_per_transition needs her (add --her"),
    (dict(return_bound=5.0, normalize_rewards=False), "return_bound needs normalize_rewards"),
    (dict(target_std=0.15, target_entropy=-1.0), "target_std and target_entropy both"),
    (dict(exploration_zeta=2.0, use_sde=True), "exploration_zeta does not work with use_sde"),
    (dict(batch_size=2000, buffer_size=1000), "batch_size (2000) is larger than buffer_size"),
    (dict(num_actors=1, episodes_per_rollout=2), "episodes_per_rollout does not work with env"),
    (dict(num_actors=1, num_envs=2, total_steps=320), "num_envs must be 1 with env runners"),
    (dict(num_actors=1, chunk_steps=30, envs_per_actor=4), "chunk_steps (30) must be a mult"),
    (dict(num_actors=1, chunk_steps=30, train_freq=4), "multiple of train_freq"),
    (dict(num_actors=1, envs_per_actor=3, chunk_steps=63), "multiple of envs_per_actor (3)"),
]


def _flag_fields():
    """Flag name -> (config field, its type hint)."""
    hints = typing.get_type_hints(SACConfig)
    return {
        f.metadata["flag"] or f.name: (f.name, hints[f.name]) for f in dataclasses.fields(SACConfig)
    }


def _options(args):
    """The config options a train.py case's flags give (as absl would read them), or None
    for a case whose flags are not all options (--resume, a flagfile, a misspelt flag)."""
    fields, options = _flag_fields(), {}
    for arg in args:
        name, _, text = arg[2:].partition("=")
        if name not in fields and name.startswith("no") and name[2:] in fields and not text:
            name, text = name[2:], "false"
        if name not in fields:
            return None
        field, hint = fields[name]
        if hint in (bool, typing.Optional[bool]) and not text:
            text = "true"
        if hint is bool:
            value = text == "true"
        elif hint is int:
            value = int(float(text))
        elif hint in (float, typing.Optional[float]) and text.lower() != "auto":
            value = None if text.lower() == "none" else float(text)
        else:
            value = text  # the string forms SACConfig reads
        options[field] = value
    return options


def _fired(options):
    """The line of the rule a config of `options` breaks first, as the checks run (each
    option's own values first), or None."""
    try:
        config = SACConfig(**options)
        if field_errors(config):
            return None
    except (TfsacError, ValueError):
        return None
    return next((line for line, broken in ALL_RULES.items() if broken(config)), None)


def _train_cases():
    for script, args, message in CASES:
        if script == "train":
            try:
                options = _options(args)
            except ValueError:  # a value the flag parser refuses
                continue
            if options is not None:
                yield options, message


@pytest.mark.parametrize("options, message", PYTHON_CASES)
def test_a_python_config_breaking_a_rule_is_refused_with_its_line(options, message):
    config = SACConfig(**options)
    with pytest.raises(TfsacError) as raised:
        config.validate()
        check_new_run(config)
    line = str(raised.value)
    assert message in line and "\n" not in line, line
    assert _fired(options).format_map(vars(config)) == line


def _reached(cases):
    """The rules `cases` reach: where the line of the rule a case breaks is the one it says."""
    reached = set()
    for options, message in cases:
        line = _fired(options)
        if line is not None and message in line.format_map(vars(SACConfig(**options))):
            reached.add(line)
    return reached


def test_every_rule_is_reached_by_a_bad_input_row():
    assert len(_reached(_train_cases())) >= 14  # the train.py cases are read as configs
    reached = _reached([*_train_cases(), *PYTHON_CASES])
    unreached = [line for line in ALL_RULES if line not in reached]
    assert not unreached, f"rules no bad-input row reaches: {unreached}"


def test_the_scripts_refuse_a_needs_flag_given_alone_at_its_default_in_a_case():
    """The `any_value` rows, which only the scripts can hold (SACConfig sees values only),
    each have a train.py or sweep.py case that gives the flag at its default."""
    for row in (row for row in NEEDS + NEW_RUN_NEEDS if row.any_value):
        default = dataclasses.fields(SACConfig)
        default = next(f.default for f in default if f.name == row.option)
        given = f"--{row.option}={default}"
        assert any(given in args and message in row.line for _, args, message in CASES), row
