"""`python -m bench.cli`: the bench command."""
import sys

from bench.cli import main

sys.exit(main())
