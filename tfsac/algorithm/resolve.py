"""A config as a run uses it: the 'auto' options filled by its variant and architecture, and
every check, resolved once, without TensorFlow, before anything is built."""

from __future__ import annotations

import dataclasses
import math
from inspect import getattr_static

from tfsac.algorithm.architectures import architecture_of
from tfsac.algorithm.variants import VARIANTS, Variant, variant_of
from tfsac.config import SACConfig
from tfsac.config.sac_config import field_default
from tfsac.errors import TfsacError
from tfsac.user_modules import users_frame

# What `variant` (kept as an alias of `algorithm`) selects.
VARIANT_ALIASES = {"v1": "sac_v1", "v2": "sac"}


def resolve(config: SACConfig) -> SACConfig:
    """`config` with `variant` folded into `algorithm` and the 'auto' options filled in,
    checked (options, variant, architecture); TfsacError names the first bad option."""
    if is_resolved(config):  # resolved before and unchanged since: checked already
        return config
    config.validate()
    if config.variant is not None:
        algorithm = VARIANT_ALIASES.get(config.variant, config.variant)
        if config.algorithm not in ("sac", algorithm):
            raise TfsacError(
                f"variant {config.variant} is algorithm {algorithm}, and algorithm is "
                f"{config.algorithm}: give one of them (variant is the older name)"
            )
        config = dataclasses.replace(config, algorithm=algorithm, variant=None)
    variant = variant_of(config)
    config = _with_hyperparameters(config, variant)
    own = _declared(variant, "algorithm", variant.defaults, config)
    if config.network is None:  # the architecture's defaults depend on it
        config = dataclasses.replace(config, network=own.get("network", "mlp"))
    architecture = architecture_of(config)
    defaults = {**own, **_declared(architecture, "network", architecture.defaults, config)}
    auto = {name: value for name, value in defaults.items() if getattr(config, name) is None}
    if auto:
        config = dataclasses.replace(config, **auto)
        config.validate()  # the checks between options, on the values filled in
    # An option the variant does not read would change nothing: refused away from its default.
    own = options_read(variant)
    others = {n for v in VARIANTS.values() if v is not variant for n in options_read(v)}
    for name in sorted(others - own):
        if getattr(config, name) != field_default(name):
            raise TfsacError(
                f"algorithm {variant.name} does not read {name} (set to "
                f"{getattr(config, name)!r}); leave it at its default {field_default(name)!r}"
            )
    for cls, option in ((variant, "algorithm"), (architecture, "network")):
        refusal = _declared(cls, option, cls.check, config)  # its reason, in one line
        if refusal:
            raise TfsacError(refusal)
    return mark_resolved(config)


_MARK = "_resolved_as"  # not a field: to_dict, equality and replace() leave it out


def mark_resolved(config: SACConfig) -> SACConfig:
    """Records on `config` that it is as resolve() (or a run's start check) left it."""
    setattr(config, _MARK, dataclasses.astuple(config))
    return config


def is_resolved(config: SACConfig) -> bool:
    """Whether `config` is resolve()'s result, unchanged since (a field set after is not)."""
    mark = getattr(config, _MARK, None)
    return mark is not None and mark == dataclasses.astuple(config)


def _declared(cls, option: str, method, config: SACConfig):
    """`method(config)`; where the user's code raises (not a TfsacError), one line saying where."""
    try:
        return method(config)
    except TfsacError:
        raise
    except Exception as e:
        frame = users_frame(e)
        raise TfsacError(
            f"{option} {cls.name}: its {method.__name__} raised {type(e).__name__}: {e} "
            f"({frame.filename}, line {frame.lineno})"
        ) from None


def _with_hyperparameters(config: SACConfig, variant) -> SACConfig:
    """`config` with algorithm_kwargs checked and completed by the variant's hyperparameters."""
    declared, given = variant.hyperparameters, config.algorithm_kwargs
    for name, value in given.items():
        if name not in declared:
            takes = ", ".join(sorted(declared)) or "none"
            option = name in {f.name for f in dataclasses.fields(config)}
            raise TfsacError(
                f"algorithm_kwargs: algorithm {variant.name} has no hyperparameter {name!r} "
                f"(its hyperparameters: {takes})"
                + (f"; {name} is an option of its own: --{name}" if option else "")
            )
        if not _same_kind(value, declared[name]) or not _finite(value):
            finite = " (finite)" if isinstance(declared[name], (float, list, dict)) else ""
            raise TfsacError(
                f"algorithm_kwargs: {name} of algorithm {variant.name} must be "
                f"{_kind(declared[name])} like its default {declared[name]!r}{finite}, got "
                f"{value!r}"
            )
    # An integer given for a number is a float, as the variant's default (tensors' dtypes).
    given = {k: float(v) if isinstance(declared[k], float) else v for k, v in given.items()}
    return dataclasses.replace(config, algorithm_kwargs={**declared, **given})


def _finite(value) -> bool:
    """No NaN or infinity in a value (config.json would hold them as non-standard JSON)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def _kind(default) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, (int, float)):
        return "an integer" if isinstance(default, int) else "a number"
    return {str: "text", list: "a list", dict: "a JSON object"}.get(type(default), "any value")


def _same_kind(value, default) -> bool:
    """Whether `value` may stand where `default` does (an integer for a float, not a bool)."""
    if default is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def options_read(variant) -> set:
    """The options `variant`'s classes declare in `reads`, less those whose methods it replaced;
    the Polyak options where it has targets."""
    polyak = variant.has_target_critic or variant.polyak_pairs is not Variant.polyak_pairs
    read = {"tau", "target_update_interval"} if polyak else set()
    for cls in variant.__mro__:
        for name, methods in vars(cls).get("reads", {}).items():
            if all(getattr_static(variant, m) is getattr_static(cls, m) for m in methods):
                read.add(name)
    return read
