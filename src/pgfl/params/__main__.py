"""``python -m pgfl.params > docs/config.md``: print the configuration reference."""

import sys

from pgfl.params import markdown

sys.stdout.write(markdown())
