"""`python -m guardhook` runs the command line."""

import sys

from guardhook.cli import main

sys.exit(main())
