"""Audio stimulus: how the bench starts an utterance at a known instant for latency trials.

An arbitrary-waveform generator holds a speech clip and plays it once per bus trigger; its
output is teed to scope channel 1 (the trial's time zero) and to the speaker facing the phone.
The 33500B's commands are tables of its channel (phonebench.drivers.scpi_table), like the other
instrument drivers'; the binary clip upload is code.
"""
from __future__ import annotations

import logging
import wave
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from phonebench.core.errors import ConfigError
from .scpi_table import Channel, Setting, Table, fixed, sequence
from .visa import DEFAULT_TIMEOUT_S, InstrumentIdentity, ScpiInstrument

log = logging.getLogger(__name__)


@runtime_checkable
class AudioStimulus(Protocol):
    name: str  # names it in every message: role, family, address (and model, serial once known)
    identity: InstrumentIdentity

    def load_clip(self, samples: np.ndarray, sample_rate: float, amplitude_vpp: float = 1.0) -> None:
        """Store a clip (any scale; it is normalised to its peak) to play at amplitude_vpp."""

    def arm(self) -> None:
        """Output on, waiting for fire()."""

    def fire(self) -> None:
        """Start the clip now; returns once the source has taken the trigger."""

    def close(self) -> None: ...


def read_wav(path: str | Path) -> tuple[np.ndarray, float]:
    """Mono 16-bit PCM WAV -> (samples in [-1, 1], sample rate)."""
    path = Path(path)
    try:
        with wave.open(str(path), "rb") as wav:
            if wav.getsampwidth() != 2:
                raise ConfigError(f"{path}: {8 * wav.getsampwidth()}-bit WAV; the stimulus needs 16-bit PCM",
                                  hint="convert it, e.g. `sox in.wav -b 16 out.wav`")
            frames = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
            channels, rate = wav.getnchannels(), float(wav.getframerate())
    except (OSError, wave.Error, EOFError) as exc:
        raise ConfigError(f"cannot read stimulus clip {path}: {exc}", hint="give a mono 16-bit PCM WAV file") from exc
    if channels != 1:
        frames = frames.reshape(-1, channels)[:, 0]
    return frames.astype(np.float64) / 32768.0, rate


# One output channel, `{ch}` = its number. The clip's waveform, then the burst that plays it once
# per bus trigger; settings with a default are the fixed part of each.
KS33500B_CLIP: Table = {
    "function": Setting("SOUR{ch}:FUNC {}", choices=("ARB",), default="ARB"),
    "arb": Setting("SOUR{ch}:FUNC:ARB {}"),
    "sample_rate": Setting("SOUR{ch}:FUNC:ARB:SRAT {:g}", "SOUR{ch}:FUNC:ARB:SRAT?", "Sa/s"),
    # High-Z load: the fixture is the scope's 1 MOhm input and a line-level speaker amp.
    "load": Setting("OUTP{ch}:LOAD {}", choices=("INF",), default="INF"),
    "amplitude": Setting("SOUR{ch}:VOLT {:g}", "SOUR{ch}:VOLT?", "Vpp"),
    "offset": Setting("SOUR{ch}:VOLT:OFFS {:g}", "SOUR{ch}:VOLT:OFFS?", "V", default=0),
}
KS33500B_BURST: Table = {
    "mode": fixed("SOUR{ch}:BURS:MODE TRIG"),
    "cycles": Setting("SOUR{ch}:BURS:NCYC {}", default=1),
    "trigger": fixed("TRIG{ch}:SOUR BUS"),
    "burst": fixed("SOUR{ch}:BURS:STAT ON"),
    "output": fixed("OUTP{ch} ON"),
}


class Keysight33500B(ScpiInstrument):
    role = "stimulus"
    family = "keysight-33500b"

    def __init__(self, address: str, channel: int = 1, arb_name: str = "UTTERANCE", backend: str = "@py",
                 timeout_s: float = DEFAULT_TIMEOUT_S, resource: object = None) -> None:
        super().__init__(address, backend, timeout_s, resource)
        self.ch = self.channel(channel)
        self.arb_name = arb_name

    def channel(self, number: int, table: Table = KS33500B_CLIP) -> Channel:
        return Channel(self, number, table)

    # The arb memory is cleared and the sample byte order set before each upload.
    _prepare_upload = sequence("SOUR{ch}:DATA:VOL:CLE", "FORM:BORD SWAP")

    def load_clip(self, samples: np.ndarray, sample_rate: float, amplitude_vpp: float = 1.0) -> None:
        samples = np.asarray(samples, dtype=np.float64)
        peak = float(np.max(np.abs(samples))) if samples.size else 0.0
        if peak == 0.0 or not np.isfinite(peak):
            raise ConfigError(f"{self.name}: the stimulus clip is silent or not finite",
                              hint="load a clip with sound in it")
        codes = np.round(samples / peak * 32767).astype(np.int16)
        upload = f"SOUR{self.ch.wire}:DATA:ARB:DAC"
        self._prepare_upload()
        try:
            self._res.write_binary_values(f"{upload} {self.arb_name},", codes, datatype="h", is_big_endian=False)
        except OSError as exc:
            raise self._io_error(upload, exc) from exc
        self.check_errors(f"{upload} {self.arb_name},<{codes.size} points>")
        self.ch.setup(arb=self.arb_name, sample_rate=sample_rate, amplitude=amplitude_vpp)

    def arm(self) -> None:
        self.channel(self.ch.number, KS33500B_BURST).setup()

    def fire(self) -> None:
        # The error-queue round trip also proves the trigger was taken before we return.
        self.configure("*TRG")
