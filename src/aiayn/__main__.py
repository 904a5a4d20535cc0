"""`python -m aiayn` (and `torchrun -m aiayn train ...`) runs the command line."""

import sys

from aiayn.cli import entry

sys.exit(entry())
