"""python -m deepinfer generate|chat (see deepinfer._cli)."""

import sys

from ._cli import main

sys.exit(main())
