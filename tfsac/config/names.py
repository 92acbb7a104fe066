"""The names users bring for tfsac's options (a flag's name for its field, other SAC
libraries' arguments) and the line that says which option they mean, as `--flag` on the
command line or `field=` in Python."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import re
import shlex
from typing import Dict, Iterable, Optional, Tuple

from tfsac.errors import TfsacError

CLI, PYTHON = "cli", "python"
SB3, SU = "Stable-Baselines3", "Spinning Up"

# Other libraries' SAC arguments and what tfsac calls them; `render` says each `name=value`.
OTHER_NAMES: Dict[str, Tuple[str, str]] = {
    "ent_coef": (SB3, "`alpha` (a number, auto or auto_<initial value>)"),
    "net_arch": (SB3, "`hidden_sizes=256,256` (`critic_hidden_sizes` for the critics alone)"),
    "policy_kwargs": (
        SB3,
        "`hidden_sizes`, `network`, `critic_layer_norm` (custom networks: `algorithm`/"
        "`network` of a module of yours, docs/guide/custom-env-and-networks.md)",
    ),
    "tensorboard_log": (SB3, "`tensorboard` (TensorBoard logs under the run directory)"),
    "n_sampled_goal": (SB3, "`her_goals_per_transition` (with `her`)"),
    "goal_selection_strategy": (SB3, "`her_strategy` (with `her`)"),
    "replay_buffer_class": (SB3, "`her` (HerReplayBuffer) or `n_steps` (NStepReplayBuffer)"),
    "verbose": (
        SB3,
        "`progress_bar` and `log_every` (progress; the scripts' --verbosity: absl's logging)",
    ),
    "start_steps": (SU, "`learning_starts` (random actions until then; updates start after it)"),
    "update_after": (
        SU,
        "`learning_starts` (updates start after it, with random actions until then)",
    ),
    "update_every": (SU, "`train_freq=N` and `gradient_steps=N` (N updates every N env steps)"),
    "epochs": (SU, "`total_steps` (env steps in all)"),
    "steps_per_epoch": (SU, "`log_every` (a progress row every N env steps) and `eval_every`"),
    "num_test_episodes": (SU, "`eval_episodes`"),
    "max_ep_len": (SU, '`env_kwargs={"max_episode_steps": N}`'),
    "save_freq": (SU, "`checkpoint_every`"),
    "replay_size": (SU, "`buffer_size`"),
    "polyak": (SU, "`tau` (1 - polyak)"),
    "lr": (SU, "`learning_rate`"),
}

_OPTION = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(?:=([^`]*))?`")


def _python_value(text: str) -> str:
    """A command-line value as Python writes it ('256,256' -> '(256, 256)'), else as typed."""
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, SyntaxError):
        return text


def say(name: str, style: str, value: Optional[str] = None) -> str:
    """Option `name` (with `value`, as typed on the command line) as `style` writes it:
    --name=value, or name=value in Python (name= without a value)."""
    if style == CLI:
        return f"--{name}" + (f"={shlex.quote(value)}" if value is not None else "")
    return f"{name}=" + (_python_value(value) if value is not None else "")


def render(text: str, style: str) -> str:
    """`text` with each `option` or `option=value` in it said as `style` writes it."""
    return _OPTION.sub(lambda m: say(m.group(1), style, m.group(2)), text)


def flag_names(config_class) -> Dict[str, str]:
    """Flag name -> field name, for the fields whose flag is named otherwise (--env)."""
    return {
        f.metadata["flag"]: f.name
        for f in dataclasses.fields(config_class)
        if f.metadata.get("flag") and f.metadata["flag"] != f.name
    }


def unknown_name_hint(name: str, style: str, flags: Dict[str, str], fields: Iterable[str] = ()):
    """What a user who typed unknown option `name` means: the field of a flag name (`flags`:
    flag -> field) or the other way round, another library's name, or a close spelling
    among `fields`; None where none fits."""
    if style == PYTHON and name in flags:
        return f": use {say(flags[name], style)}"
    if style == CLI and name in flags.values():
        flag = next(f for f, field in flags.items() if field == name)
        return f": the {name} option is {say(flag, style)}"
    if name in OTHER_NAMES:
        library, text = OTHER_NAMES[name]
        return f" ({library}'s name): in tfsac {render(text, style)}"
    near = difflib.get_close_matches(name, list(fields), n=1)
    return f"; did you mean {say(near[0], style)}?" if near else None


class UnknownOptionError(TfsacError, TypeError):
    """A keyword that names no option of a config (a TypeError, as Python's own is)."""


def checked_keywords(cls):
    """Wraps dataclass `cls`'s __init__ so that a keyword naming no field is refused with
    the field the user means."""
    generated = cls.__init__
    fields = [f.name for f in dataclasses.fields(cls)]
    known = set(fields)

    @functools.wraps(generated)
    def __init__(self, *args, **kwargs):
        for name in kwargs:
            if name not in known:
                hint = unknown_name_hint(name, PYTHON, flag_names(cls), fields)
                raise UnknownOptionError(f"{cls.__name__} has no field {name!r}{hint or ''}")
        generated(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls
