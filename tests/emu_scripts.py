"""Seeded random SCPI command scripts for the emulated instruments, and their recorded answers.

The emulated N6705C, 33500B and DAQ970A were refactored from one registration closure each into
command tables (emulation/instruments/*_table.py). Before the refactor, `python tests/emu_scripts.py`
ran SCRIPTS seeded scripts per instrument on the old servers and wrote every message with the
server's answer and its error queue to tests/data/emulated_tables/<family>.transcript.json.gz;
tests/test_emulated_tables.py replays those messages on the current servers and wants every answer
byte-identical. For a deliberate change of behaviour, `python tests/emu_scripts.py --rerecord <family>`
records the current answers to the same messages (a fresh `record` draws new scripts, which follow
the tree's patterns).

A script mixes the manual's example commands (tests/data/conformance/<family>.toml), random
renderings of every pattern in the server's command tree (long, short and mixed-case forms,
optional nodes dropped, numeric suffixes 1-3) with random arguments (in and out of range,
MIN/MAX/DEF, wrong types, missing and extra values, bad channel lists, blocks), undefined
headers, compound messages with relative paths, and the status and error-queue queries.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import logging
import random
import re
import sys
import tomllib
from pathlib import Path

from phonebench.emulation.instruments.conformance import Capture
from phonebench.emulation.instruments.registry import make_server
from phonebench.emulation.instruments.server import InstrumentServer
from phonebench.emulation.world import World

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
CONFORMANCE = HERE / "data" / "conformance"
TRANSCRIPTS = HERE / "data" / "emulated_tables"
INSTRUMENTS = {"keysight-n6705c": "supply", "keysight-33500b": "stimulus", "keysight-daq970a": "thermal",
               # the scopes' registrations were split in the same change (no function over 60 lines)
               "keysight-infiniivision": "scope", "rigol-ds1000z": "scope"}
SCRIPTS = 300
LONG_ANSWER = 200  # longer answers are recorded as their sha256 and length

# Argument pools: every value small enough that a sweep or scan it sets up stays short in simulated time.
COMMON_ARGS = ["0", "1", "-1", "0.5", "3.8", "2", "10", "217", "1000", "20.48e-6", "1e-3", "5.12e-6", "-2",
               "1e7", "-1e7", "30", "100", "0.01", "MIN", "MAX", "DEF", "MINimum", "maximum", "INF", "ON", "OFF",
               "on", "BOGUS", "", "1 KHZ", "100 mV", "1 XY", "abc", "(@1)", "(@2)", "(@1,2)", "(@1:2)", "(@3)",
               "(@101)", "(@101,102)", "(@101:105)", "(@104)", "(@111)", "(@201)", "(@121)", "(@101,114)",
               "@1", "(@x)", '"CLIP"', '"clip2"', "'x'", '""', "#14abcd", "#10", "#208" + "\x00\x01" * 4]
FAMILY_ARGS = {
    "keysight-n6705c": ["BATTery", "BATT", "PS2Q", "PS4Q", "CHARger", "FIXed", "FIX", "ARB", "STEP", "VOLTage",
                        "CURRent", "SINusoid", "SIN", "RAMP", "BUS", "IMMediate", "IMM", "ASCii", "REAL",
                        "NORMal", "SWAPped", "1024", "6", "-6", "-100000", "1.024e-05", "0.03", "3.06", "20.4"],
    "keysight-33500b": ["SINusoid", "SIN", "SQU", "TRI", "RAMP", "PULS", "PRBS", "NOIS", "ARB", "DC", "VPP",
                        "VRMS", "DBM", "50", "1e4", "INFinity", "BUS", "IMM", "EXT", "TIM", "POS", "NEG", "NORM",
                        "INV", "GAT", "TRIG", "SRAT", "STEP", "NORMal", "SWAPped", "ONCE", "0.1", "1e6",
                        "44100", "-0.5", "0.25", "-1.0", "32767", "-32768", "1e8", "2.5", "-360", "720", "99"],
    "keysight-daq970a": ["TC", "TCouple", "K", "J", "T", "X", "FRTD", "RTD", "85", "91", "THER", "FTH", "5000",
                         "AUTO", "INT", "EXT", "FIX", "C", "F", "K", "ABS", "REL", "IMM", "TIM", "BUS", "ALARm1",
                         "100", "200", "300", "0.02", "3", "0.0004", "0.2"],
    "keysight-infiniivision": ["CHAN1", "CHANnel2", "CHAN5", "MATH", "BYTE", "WORD", "ASCii", "RAW", "NORMal",
                               "MAXimum", "LSBFirst", "MSBFirst", "EDGE", "AUTO", "NORM", "POS", "NEG", "DC", "AC",
                               "LEFT", "CENTer", "1e-3", "2e-4", "0.05", "1000", "FIFTy", "ONEMeg", "HRES"],
    "rigol-ds1000z": ["CHAN1", "CHANnel2", "CHAN5", "MATH", "BYTE", "WORD", "ASCii", "RAW", "NORMal", "MAX",
                      "EDGE", "AUTO", "NORM", "SING", "POS", "NEG", "DC", "AC", "GND", "1e-3", "2e-4", "0.05",
                      "1000", "VPP", "VMAX", "FREQ", "STAT", "RUN", "STOP", "TD", "WAIT"],
}
# Valid sequences the drivers send (a sweep, a ripple, a clip played in a burst), dropped into scripts whole.
RECIPES = {
    "keysight-n6705c": [
        ["OUTP ON,(@1)", "SENS:FUNC:VOLT ON,(@1)", "SENS:SWE:POIN 64,(@1)", "SENS:SWE:OFFS:POIN -4,(@1)",
         "TRIG:ACQ:SOUR BUS,(@1)", "INIT:ACQ (@1)", "STAT:OPER:COND? (@1)", "STAT:OPER:COND? (@1)", "TRIG:ACQ (@1)",
         "FETC:ARR:CURR? (@1)", "FETC:ARR:VOLT? (@1)", "FETC:CURR? (@1)", "FETC:VOLT? (@1)"],
        ["FORM REAL;FORM:BORD SWAP", "SENS:SWE:POIN 16,(@1)", "INIT:ACQ (@1)", "*TRG", "FETC:ARR:VOLT? (@1)",
         "FETC:ARR:CURR? (@1)", "FORM ASC", "FETC:ARR:VOLT? (@1)"],
        ["VOLT 3.8,(@1)", "OUTP ON,(@1)", "VOLT:MODE ARB,(@1)", "ARB:FUNC:TYPE VOLT,(@1)", "ARB:FUNC:SHAP SIN,(@1)",
         "ARB:VOLT:SIN:AMPL 0.03,(@1)", "ARB:VOLT:SIN:OFFS 3.8,(@1)", "ARB:VOLT:SIN:FREQ 217,(@1)",
         "ARB:COUN INF,(@1)", "TRIG:TRAN:SOUR BUS,(@1)", "INIT:TRAN (@1)", "STAT:OPER:COND? (@1)",
         "TRIG:TRAN (@1)", "STAT:OPER? (@1)", "MEAS:VOLT? (@1)", "ABOR:TRAN (@1)", "VOLT:MODE FIX,(@1)"],
    ],
    "keysight-33500b": [
        ["DATA:VOL:CLE", "FORM:BORD SWAP", "DATA:ARB:DAC CLIP,#216" + "\x00\x10\x00\x20" * 4,
         "DATA:ATTR:POIN? CLIP", "FUNC:ARB CLIP", "FUNC ARB", "FUNC:ARB:SRAT 8000", "FUNC:ARB:FREQ?",
         "FUNC:ARB:FREQ 100", "FUNC:ARB:PER?", "VOLT 0.5", "OUTP ON", "BURS:STAT ON", "BURS:MODE TRIG",
         "BURS:NCYC 2", "TRIG:SOUR BUS", "*TRG", "TRIG2", "*OPC?"],
        ["SOUR2:DATA:ARB TONE,0,0.5,1,0.5,0,-0.5,-1,-0.5", "SOUR2:FUNC:ARB TONE", "SOUR2:FUNC ARB",
         "SOUR2:FUNC:ARB:POIN?", "OUTP2 ON", "SOUR2:BURS:STAT ON", "TRIG2:SOUR BUS", "TRIG2", "*OPC?"],
        ["APPL:SIN 1000,0.2,0", "BURS:STAT ON", "BURS:NCYC 3", "TRIG:SOUR BUS", "APPL?",
         "FUNC SQU", "FUNC:SQU:DCYC 30", "FUNC RAMP", "FUNC:RAMP:SYMM 20", "TRIG"],
    ],
    "keysight-daq970a": [
        ["CONF:TEMP TC,K,(@101:103)", "TRIG:SOUR TIM", "TRIG:TIM 0.5", "TRIG:COUN 3", "FORM:READ:CHAN ON",
         "FORM:READ:TIME ON", "INIT", "DATA:POIN?", "FETC?", "DATA:LAST?", "R?"],
        ["CONF:TEMP FRTD,85,(@104)", "UNIT:TEMP K,(@104)", "READ?", "ROUT:SCAN (@101,104)", "READ?",
         "DATA:REM? 1", "ABOR"],
    ],
}
NEXT_UNITS = ["SYSTem:ERRor?", "SYST:ERR?", ":SYST:ERR:NEXT?", "*ESR?", "*STB?", "*OPC?", "*RST", "*CLS", "*TRG",
              "*IDN?", "*OPC", "*WAI", "*SAV 1", "*RCL 1", "*RCL 3", "*OPT?"]
BAD_WORDS = ["BOGus", "VOLTS", "XYZ", "SOUR3", "CHAN", "OUTP5", "TRIG9", "FOO", "SENS2"]


def conformance_messages(family: str) -> list[str]:
    """The manual's example commands and dialogue messages for `family`."""
    data = tomllib.loads((CONFORMANCE / f"{family}.toml").read_text())
    sends = [step["send"] if isinstance(step, dict) else step[0]
             for dialogue in data.get("dialogue", []) for step in dialogue["steps"]]
    return list(data["commands"]) + sends


def render(pattern: str, rng: random.Random) -> str:
    """A random concrete header for a tree pattern, e.g. `:VOLT:LEV` for `[SOURce]:VOLTage[:LEVel]`."""
    query = "?" if pattern.endswith("?") else ""
    body = pattern.rstrip("?")
    if body.startswith("*"):
        return body.lower() if rng.random() < 0.2 else body
    words = []
    for optional, word in re.findall(r"(\[?):?([A-Za-z*]+(?:<n>)?)\]?", body):
        if optional and rng.random() < 0.4:
            continue
        suffix = word.endswith("<n>")
        word = word.replace("<n>", "")
        short = "".join(ch for ch in word if ch.isupper())
        form = rng.choice([word, short, word.upper(), short.lower(), word.lower()])
        if suffix and rng.random() < 0.6:
            form += rng.choice(["1", "2", "3"])
        words.append(form)
    lead = ":" if rng.random() < 0.5 else ""
    return lead + ":".join(words) + query


def random_args(family: str, rng: random.Random) -> str:
    pool = COMMON_ARGS + FAMILY_ARGS[family]
    count = rng.choice([0, 1, 1, 1, 2, 2, 3])
    return ",".join(rng.choice(pool) for _ in range(count))


def mutate(message: str, family: str, rng: random.Random) -> str:
    """An example command with one argument replaced, dropped, or one added."""
    header, _, args = message.partition(" ")
    values = [a for a in args.split(",") if a] if args else []
    choice = rng.random()
    if values and choice < 0.4:
        values[rng.randrange(len(values))] = rng.choice(COMMON_ARGS + FAMILY_ARGS[family])
    elif values and choice < 0.6:
        values.pop(rng.randrange(len(values)))
    else:
        values.append(rng.choice(COMMON_ARGS + FAMILY_ARGS[family]))
    return f"{header} {','.join(values)}".rstrip()


def unit(family: str, patterns: list[str], examples: list[str], rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.40:
        return rng.choice(examples)
    if roll < 0.65:
        header = render(rng.choice(patterns), rng)
        args = random_args(family, rng)
        return f"{header} {args}" if args else header
    if roll < 0.80:
        return mutate(rng.choice(examples), family, rng)
    if roll < 0.87:
        header = render(rng.choice(patterns), rng).rstrip("?")
        parts = header.split(":")
        parts[rng.randrange(len(parts))] = rng.choice(BAD_WORDS)
        return ":".join(parts) + rng.choice(["", "?"])
    return rng.choice(NEXT_UNITS)


def script(family: str, patterns: list[str], examples: list[str], seed: int) -> list[str]:
    """One seeded script: 10-40 program messages of 1-3 units each."""
    rng = random.Random(f"{family}:{seed}")
    messages = []
    for _ in range(rng.randint(10, 40)):
        if RECIPES.get(family) and rng.random() < 0.08:
            messages.extend(rng.choice(RECIPES[family]))
            continue
        units = [unit(family, patterns, examples, rng) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        messages.append(";".join(units))
    return messages + ["SYST:ERR?"] * 3 + ["*ESR?", "*STB?"]


def fingerprint(raw: bytes) -> str:
    """An answer as recorded: itself (latin-1) if short, else its digest and length."""
    if len(raw) <= LONG_ANSWER:
        return raw.decode("latin-1")
    return f"sha256:{hashlib.sha256(raw).hexdigest()}:{len(raw)}"


def server_for(family: str, seed: int) -> InstrumentServer:
    world = World(seed=seed)
    # The stimulus goes to the scope's loopback input, not to the phone: the phone's spoken answer
    # (costly to synthesise) is no part of the generator's answers.
    world.set_fixture_loopback(True, "electrical")
    server = make_server(INSTRUMENTS[family], family, world)
    assert isinstance(server, InstrumentServer)
    return server


def run(family: str, seed: int, messages: list[str]) -> list[list]:
    """[message, answer fingerprint, error queue after it] for each message, on a fresh server."""
    server = server_for(family, seed)
    conn = Capture("transcript")
    steps = []
    for message in messages:
        conn.sent.clear()
        try:
            server.handle_message(conn, message.encode("latin-1"))  # type: ignore[arg-type]
        except Exception as exc:  # a handler bug ends the connection's thread: recorded as such
            conn.sent = [f"!{type(exc).__name__}".encode()]
        steps.append([message, fingerprint(b"".join(conn.sent)), list(server.errors)])
    return steps


def transcript_path(family: str) -> Path:
    return TRANSCRIPTS / f"{family}.transcript.json.gz"


def load(family: str) -> list[dict]:
    with gzip.open(transcript_path(family), "rt", encoding="utf-8") as f:
        return json.load(f)["scripts"]


def record(family: str) -> None:
    """Generate SCRIPTS new scripts (they follow the tree's patterns) and record the answers."""
    patterns = list(server_for(family, 0).tree.patterns)
    examples = conformance_messages(family)
    save(family, [{"seed": seed, "steps": run(family, seed, script(family, patterns, examples, seed))}
                  for seed in range(SCRIPTS)])


def rerecord(family: str) -> None:
    """Record the current answers to the recorded scripts' messages (a deliberate change of behaviour)."""
    save(family, [{"seed": old["seed"], "steps": run(family, old["seed"], [step[0] for step in old["steps"]])}
                  for old in load(family)])


def save(family: str, scripts: list[dict]) -> None:
    TRANSCRIPTS.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"family": family, "scripts": scripts}, separators=(",", ":"), sort_keys=True)
    with open(transcript_path(family), "wb") as f:  # mtime 0: the same answers give the same file
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
            gz.write(body.encode("utf-8"))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    again = "--rerecord" in sys.argv
    for name in [arg for arg in sys.argv[1:] if not arg.startswith("--")] or list(INSTRUMENTS):
        (rerecord if again else record)(name)
        log.info("%s: %d bytes", name, transcript_path(name).stat().st_size)
