"""``python -m runtime.daemon --home DIR [--log-stderr]``: one daemon in this process."""

import sys

from runtime.daemon.main import main

sys.exit(main())
