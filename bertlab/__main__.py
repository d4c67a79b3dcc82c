"""`python -m bertlab` is the same as the `bertlab` command."""

from bertlab.cli import run

run()
