"""``python -m powerdp.cli``: the same as ``powerdp`` (and ``python -m powerdp``)."""

import sys

from . import main

sys.exit(main())
