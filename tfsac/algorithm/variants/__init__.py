"""The algorithm variants, one module each (every one imported here), and the registry
`--algorithm` selects from (base.py; docs/guide/adding-an-algorithm.md)."""

import importlib
import pkgutil

from tfsac.algorithm.variants.base import (
    VARIANTS,
    Variant,
    lazy_module,
    register,
    variant_named,
    variant_of,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")  # each registers its variant

__all__ = ["VARIANTS", "Variant", "lazy_module", "register", "variant_named", "variant_of"]
