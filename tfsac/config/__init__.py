"""The configuration layer, the lowest of tfsac's: every option declared once, `SACConfig`
over all of them, and the learning-rate schedules. TF-free."""

from tfsac.config.options import GROUPS
from tfsac.config.resume import RESUME_ADJUSTABLE
from tfsac.config.sac_config import SACConfig, parse_env_kwargs

__all__ = ["GROUPS", "RESUME_ADJUSTABLE", "SACConfig", "parse_env_kwargs"]
