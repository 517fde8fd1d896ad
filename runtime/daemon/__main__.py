"""``python -m runtime.daemon --home DIR [--log-stderr]``: one daemon in this process."""

import sys

from runtime.daemon.unused_imports import keep_out

keep_out()  # before structlog and httpx are imported: see runtime.daemon.unused_imports

from runtime.daemon.main import main  # noqa: E402

sys.exit(main())
