"""A lab as a lab sets one up: its own folder with a station file, plain pytest started in it."""
from __future__ import annotations

# One emulated phone, no instruments: the smallest station a lab's own repository can test against.
ONE_PHONE_STATION = """\
[station]
name = "lab"

[emulated]
instruments = false

[[emulated.phone]]
serial = "EMU0001"
"""
