"""tfsac's command-line scripts. Run from a checkout (`python scripts/train.py`) or, installed
as the package `tfsac_scripts`, as console scripts (`tfsac-train`, `tfsac-evaluate`,
`tfsac-sweep`, `tfsac-plot`, `tfsac-export`) or `python -m tfsac <command>`."""
