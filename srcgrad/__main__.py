"""`python -m srcgrad`: the command line."""

import sys

from srcgrad.cli import main

sys.exit(main())
