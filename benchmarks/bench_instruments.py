"""Instrument I/O and simulated-world speed figures.

1. Waveform transfer + decode through the scope driver (pyvisa-py, raw socket) against a plain
   socket reading the same `:WAV:DATA?` bytes. The emulated scope runs in its own process, as a
   real instrument would, so the two sides do not share a GIL. Target: >= 50 % of raw. The
   "volts decode alone" row is the float32 conversion by itself, as a share of the raw transfer
   time: on loopback it is about as long as the transfer, which bounds the decode ratio (on a
   real LAN link the transfer is tens of times slower and the decode disappears in it).
2. Digitizer fetch of 1 M points from the emulated N6705C (first fetch includes the emulator
   computing the sweep; the re-fetch is transfer + decode only).
3. Simulated seconds per wall second of the world during a generate-like work loop, alone and
   through the emulated phone's runtime (`llmrt generate`, which also runs the tiny model).

Usage: python benchmarks/bench_instruments.py [--points N] [--repeat R]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _timing import best_of  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

TARGET_RATIO = 0.5
FULL_RECORD = 4_000_000  # the emulated InfiniiVision 3000T's deepest record


def _serve(kind: str, conn) -> None:  # runs in the child process
    from phonebench.emulation.audio import synth_speech
    from phonebench.emulation.instruments.power_analyzer import PowerAnalyzerServer
    from phonebench.emulation.instruments.scope import KeysightScopeServer
    from phonebench.emulation.world import World

    world = World(seed=1)
    server = KeysightScopeServer(world) if kind == "scope" else PowerAnalyzerServer(world)
    server.start()
    if kind == "scope":
        world.schedule("decode", world.clock.now(), world.clock.now() + 5)
        world.play_stimulus(synth_speech(0.3, 16_000, np.random.default_rng(1)), 16_000, 0.5,
                            t0=world.clock.now() + 0.5)
    conn.send(server.address)
    conn.recv()  # until the parent is done
    server.stop()


class Child:
    def __init__(self, kind: str) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(kind, child_conn), daemon=True)
        self.process.start()
        self.address = self.conn.recv()

    def close(self) -> None:
        self.conn.send("stop")
        self.process.join(timeout=10)



def raw_block_reader(address: str, command: bytes):
    port = int(address.split("::")[2])
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(64 << 20)
    view = memoryview(buf)

    def read() -> int:
        sock.sendall(command)
        got, need = 0, None
        while need is None or got < need:
            got += sock.recv_into(view[got:])
            if need is None and got >= 2 and got >= 2 + int(buf[1:2]):
                digits = int(buf[1:2])
                need = 2 + digits + int(buf[2:2 + digits]) + 1
        return need - 3 - int(buf[1:2])  # payload bytes
    return read, sock


def bench_waveform(points: int, repeat: int) -> list[tuple[str, str]]:
    from phonebench.drivers.scope import KeysightInfiniiVision

    child = Child("scope")
    rows = []
    try:
        for fmt, size, n in (("BYTE", 1, points), ("BYTE", 1, FULL_RECORD), ("WORD", 2, points)):
            scope = KeysightInfiniiVision(child.address, poll_s=0, waveform_format=fmt)
            if not rows:
                scope.set_timebase(0.4, 1.6)
                scope.set_edge_trigger(1, 0.05)
                scope.single()
                scope.wait_triggered(timeout_s=30)
            scope.read_waveform(1, n)  # the emulator encodes the record once; re-reads are transfer
            read, sock = raw_block_reader(child.address, b":WAVeform:DATA?\n")
            assert read() == n * size
            raw = best_of(read, repeat)
            sock.close()
            codes = best_of(lambda s=scope, n=n: s.read_waveform(1, n), repeat)
            decoded = best_of(lambda s=scope, n=n: s.read_waveform(1, n).volts, repeat)
            waveform = scope.read_waveform(1, n)
            decode_only = best_of(lambda w=waveform: (w.__dict__.pop("volts", None), w.volts), repeat)
            scope.close()
            rows += [(f"scope {fmt} {n:,} pts: raw socket", f"{n / raw / 1e6:8.1f} MS/s"),
                     (f"scope {fmt} {n:,} pts: driver transfer + validity",
                      f"{n / codes / 1e6:8.1f} MS/s ({raw / codes:.0%} of raw)"),
                     (f"scope {fmt} {n:,} pts: driver transfer + volts decode",
                      f"{n / decoded / 1e6:8.1f} MS/s ({raw / decoded:.0%} of raw; target {TARGET_RATIO:.0%})"),
                     (f"scope {fmt} {n:,} pts: volts decode alone",
                      f"{decode_only * 1e3:8.3f} ms ({decode_only / raw:.0%} of the raw transfer time)")]
    finally:
        child.close()
    return rows


def bench_digitizer(points: int, repeat: int) -> list[tuple[str, str]]:
    from phonebench.drivers.power import KeysightN6705C

    child = Child("supply")
    try:
        supply = KeysightN6705C(child.address, timeout_s=30)
        supply.output(True)
        supply.arm_digitizer(points, 10.24e-6, pretrigger_points=1000, quantities=("current",))
        supply.trigger()
        start = time.perf_counter()
        trace = supply.fetch()
        first = time.perf_counter() - start
        assert trace.current_a.size == points
        again = best_of(supply.fetch, repeat)
        supply.close()
    finally:
        child.close()
    return [(f"digitizer fetch {points:,} pts (sweep computed)", f"{first * 1e3:8.1f} ms"),
            (f"digitizer re-fetch {points:,} pts (transfer + decode)",
             f"{again * 1e3:8.1f} ms  ({points / again / 1e6:.0f} MS/s, {4 * points / again / 1e6:.0f} MB/s)")]


def bench_world(seconds: float) -> list[tuple[str, str]]:
    from phonebench.emulation.device import PhoneSpec
    from phonebench.emulation.phones import emulated_phone
    from phonebench.emulation.world import World

    world = World()
    rng = np.random.default_rng(0)
    sim_start, wall_start = world.clock.now(), time.perf_counter()
    while time.perf_counter() - wall_start < seconds:
        world.work("prefill", 0.12 + 0.0015 * 32)
        for _ in range(64):
            world.work("decode", max(0.005, rng.normal(0.045, 0.004)))
    world_rate = (world.clock.now() - sim_start) / (time.perf_counter() - wall_start)

    phone = emulated_phone(PhoneSpec(), world=World())
    sim_start, wall_start = phone.world.clock.now(), time.perf_counter()
    runs = 0
    while time.perf_counter() - wall_start < seconds:
        result = phone.shell.execute(f"llmrt generate --prompt-tokens 32 --max-tokens 64 --seed {runs}")
        assert result.status == 0, result.stderr
        runs += 1
    phone_rate = (phone.world.clock.now() - sim_start) / (time.perf_counter() - wall_start)
    return [("world: generate-like work loop", f"{world_rate:8.0f} sim s / wall s"),
            ("phone: llmrt generate (tiny model included)", f"{phone_rate:8.1f} sim s / wall s ({runs} runs)")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000, help="scope record and digitizer points")
    parser.add_argument("--repeat", type=int, default=15, help="repetitions; the best is reported")
    parser.add_argument("--seconds", type=float, default=2.0, help="wall time per world-speed figure")
    args = parser.parse_args()
    rows = bench_waveform(args.points, args.repeat)
    rows += bench_digitizer(args.points, max(3, args.repeat // 3))
    rows += bench_world(args.seconds)
    width = max(len(name) for name, _ in rows)
    print(f"{'figure':<{width}}  value")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
