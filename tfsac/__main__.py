"""`python -m tfsac <command> [flags]`: the scripts of an installed tfsac, as the console
scripts tfsac-<command> run them."""

import importlib
import sys

COMMANDS = ("train", "evaluate", "sweep", "plot", "export", "collect")
USAGE = f"usage: python -m tfsac {{{','.join(COMMANDS)}}} [flags] (<command> --help lists them)"


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command in (None, "-h", "--help"):
        print(USAGE)
        sys.exit(0 if command else 2)
    if command not in COMMANDS:
        print(f"error: unknown command {command!r}; {USAGE}", file=sys.stderr)
        sys.exit(2)
    del sys.argv[1]
    sys.argv[0] = f"tfsac-{command}"
    importlib.import_module(f"tfsac_scripts.{command}").run()


if __name__ == "__main__":
    main()
