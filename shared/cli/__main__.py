"""``python -m slalom_core.cli``: the ``slalom-xai`` command without its installed script."""

import sys

from .command import main

sys.exit(main())
