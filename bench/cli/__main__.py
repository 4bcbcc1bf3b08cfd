"""`python -m phonebench.bench.cli`: the bench command."""
import sys

from . import main

sys.exit(main())
