"""``python -m dsh_testkit.cli``: the ``dsh-testkit`` command."""

import sys

from . import main

sys.exit(main())
