"""Docker action entry point: thin; everything is in gate.github.action (the same code path as the CLI)."""

import sys

from gate.github.action import main

if __name__ == "__main__":
    sys.exit(main())
