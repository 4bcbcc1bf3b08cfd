"""`python -m phonebench.bench.cli`: the bench command."""
import sys

from phonebench.bench.cli import main

sys.exit(main())
