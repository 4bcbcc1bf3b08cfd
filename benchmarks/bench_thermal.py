"""Thermal instrument speed figures, measured in one run against the emulated instruments.

1. The instrument lock's cost: acquire + release alone against opening and closing a DAQ970A
   driver (which takes the lock, identifies the unit and sets up the scan). Target: <= 5 %.
2. One `read()` (a full scan) of the DAQ970A against one of the generic board, wall time.
3. The 1529's fresh-reading poll: wall time per streamed sample of four channels.

Usage: python benchmarks/bench_thermal.py [--repeat R]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _timing import best_of  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

TARGET_LOCK_SHARE = 0.05


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("PHONEBENCH_LOCK_DIR", tempfile.mkdtemp(prefix="phonebench-locks-"))

    from phonebench.drivers import locks
    from phonebench.drivers.daq970a import KeysightDaq970a
    from phonebench.drivers.thermal_fluke import Fluke1529
    from phonebench.drivers.thermal_generic import GenericAsciiProbe
    from phonebench.emulation.instruments.daq970a import Daq970aServer
    from phonebench.emulation.instruments.thermal_probe import ThermalProbeServer
    from phonebench.emulation.world import World

    world = World(seed=1)
    with Daq970aServer(world) as daq_server, ThermalProbeServer(world) as board_server, \
            ThermalProbeServer(world, "fluke") as fluke_server:
        lock_s = best_of(lambda: locks.acquire("TCPIP::192.0.2.1::5025::SOCKET", wait_s=0).release(), args.repeat * 20)
        open_s = best_of(lambda: KeysightDaq970a(daq_server.address).close(), args.repeat)
        print(f"lock acquire+release {lock_s * 1e6:.0f} us, DAQ970A open+close {open_s * 1e3:.1f} ms: "
              f"lock share {lock_s / open_s:.2%} (target <= {TARGET_LOCK_SHARE:.0%})")

        daq, board = KeysightDaq970a(daq_server.address), GenericAsciiProbe(board_server.address)
        daq_s, board_s = best_of(daq.read, args.repeat), best_of(board.read, args.repeat)
        print(f"read(): DAQ970A scan of {len(daq.channels)} channels {daq_s * 1e3:.2f} ms, generic board "
              f"{board_s * 1e3:.2f} ms: ratio {daq_s / board_s:.1f}x")
        daq.close()
        board.close()

        fluke = Fluke1529(fluke_server.address)
        fluke.start_stream(1.0)
        samples = 3
        stream_s = best_of(lambda: fluke.stream(n=samples), 1)
        print(f"1529 stream: {stream_s / samples * 1e3:.0f} ms wall per fresh 4-channel sample "
              f"(1 s sample period, polled at 9600 baud on the simulated clock)")
        fluke.close()
    return 0 if lock_s / open_s <= TARGET_LOCK_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())
