"""``python -m soak``: the same as ``roost soak``."""

from soak import main

raise SystemExit(main())
