"""`python -m guardhook` runs the command line."""

import sys

from guardhook.commands.main import main

sys.exit(main())
