"""The configuration layer, the lowest of tfsac's: every option declared once (options.py,
run_options.py, with fields.py's checks), `SACConfig` over all of them (sac_config.py) and
the learning-rate schedules (schedules.py). TF-free; it imports no other tfsac layer."""

from tfsac.config.options import GROUPS
from tfsac.config.resume import RESUME_ADJUSTABLE
from tfsac.config.sac_config import SACConfig, parse_env_kwargs

__all__ = ["GROUPS", "RESUME_ADJUSTABLE", "SACConfig", "parse_env_kwargs"]
