"""SIGINT as a test's child process starts with (`preexec_fn=`): a suite started as a script's
background job passes SIGINT down ignored, and Python then raises no KeyboardInterrupt
(docs/testing.md, "SIGINT ignored from a background job")."""
from __future__ import annotations

import signal


def sigint_as_from_a_terminal() -> None:
    """SIGINT at its default, as for a command typed at a terminal, whatever started the suite."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sigint_ignored() -> None:
    """SIGINT ignored, as for a script's background job (`bench run … &`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
