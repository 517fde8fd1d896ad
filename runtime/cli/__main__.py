"""``python -m runtime.cli ARGS``: the ``roost`` command line."""

import sys

from runtime.cli.app import main

sys.exit(main())
