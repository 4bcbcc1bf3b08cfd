"""The emulated instruments' SCPI layer: parsing, command matching, error queue, blocks, transport."""
from __future__ import annotations

import socket

import pytest
from instrument_helpers import Hangup, RawPeer

from phonebench.core.errors import InstrumentError
from phonebench.drivers.scope import KeysightInfiniiVision
from phonebench.emulation.instruments.scpi import (
    CommandTree,
    ScpiError,
    find_message_end,
    ieee_block,
    parse_number,
    short_form,
    split_units,
)
from phonebench.emulation.instruments.server import InstrumentServer


def test_long_and_short_forms_match_the_same_command():
    tree = CommandTree()
    tree.add(":WAVeform:POINts:MODE", lambda c: "mode")
    tree.add(":CHANnel<n>:PROBe:SKEW?", lambda c: c.suffixes)
    tree.add(":TRIGger[:EDGE]:SOURce", lambda c: "src")
    for words in (["WAV", "POIN", "MODE"], ["waveform", "points", "mode"], ["WAVEFORM", "POIN", "MODE"]):
        assert tree.lookup(words, False) is not None
    assert tree.lookup(["WAVE", "POIN", "MODE"], False) is None  # neither short nor long
    handler, suffixes = tree.lookup(["CHAN3", "PROB", "SKEW"], True)
    assert suffixes == (3,)
    assert tree.lookup(["TRIG", "SOUR"], False) is not None  # optional node left out
    assert tree.lookup(["TRIG", "EDGE", "SOUR"], False) is not None
    assert tree.lookup(["CHAN3", "PROB", "SKEW"], False) is None  # only the query exists


def test_units_arguments_channel_lists_and_blocks_are_split():
    units = split_units(b':WAV:SOUR CHAN1;:WAV:DATA?;VOLT 3.8,(@1,2);DATA:ARB:DAC UTT,#14a;b\n;*IDN?')
    assert units == [(":WAV:SOUR", ["CHAN1"]), (":WAV:DATA?", []), ("VOLT", ["3.8", "(@1,2)"]),
                     ("DATA:ARB:DAC", ["UTT", b"a;b\n"]), ("*IDN?", [])]


def test_message_end_skips_newlines_inside_blocks_and_waits_for_incomplete_ones():
    assert find_message_end(b"DATA #14a\nbc\nNEXT") == 12
    assert find_message_end(b"DATA #14a\nb") is None  # block incomplete
    assert find_message_end(b'SAY "a\nb"\n') == 9  # newline inside a string
    assert ieee_block(b"xyz") == b"#13xyz"


class _Echo(InstrumentServer):
    family = "echo"
    idn = "phonebench,ECHO,1,1"

    def __init__(self) -> None:
        super().__init__()
        self.value = 0.0
        self.tree.add(":SOURce:VALue", lambda c: setattr(self, "value", c.number(0, 0, 10)))
        self.tree.add(":SOURce:VALue?", lambda c: f"{self.value:g}")
        self.tree.add(":SOURce:LEVel", lambda c: c.number(0))


@pytest.fixture()
def echo():
    with _Echo() as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=2)
        reader = sock.makefile("rb")

        def ask(text: str) -> str:
            sock.sendall(text.encode() + b"\n")
            return reader.readline().decode().strip()

        yield server, sock, ask
        sock.close()


def test_error_queue_reports_undefined_headers_then_no_error(echo):
    server, _, ask = echo
    assert ask("*IDN?") == "phonebench,ECHO,1,1"
    assert ask(":NOPE:NOT 1;:SYST:ERR?").startswith('-113,"Undefined header')
    assert ask("SYST:ERR?") == '+0,"No error"'
    assert ask(":SOUR:VAL 99;:SYST:ERR?").startswith('-222,"Data out of range')
    assert ask(":SOURCE:VALUE 2.5;:SOUR:VAL?") == "2.5"
    # A relative header continues the previous path: LEV is :SOURce:LEVel.
    assert ask(":SOUR:VAL 1;LEV 3;:SYST:ERR?") == '+0,"No error"'
    assert ask("*OPC?") == "1"


def test_error_queue_overflows_like_a_real_instrument(echo):
    server, sock, ask = echo
    sock.sendall(b";".join([b":BAD"] * 40) + b"\n")
    entries = [ask("SYST:ERR?") for _ in range(31)]
    # 30 entries deep: 29 errors, then -350 in the last place, then an empty queue.
    assert entries[28].startswith("-113") and entries[29].startswith("-350") and entries[30] == '+0,"No error"'


def test_cls_clears_the_queue_and_several_queries_share_one_answer_line(echo):
    server, sock, ask = echo
    sock.sendall(b":BAD;*CLS\n")  # no query, no answer
    assert ask("SYST:ERR?;*IDN?") == '+0,"No error";phonebench,ECHO,1,1'


def test_unknown_fault_name_is_refused():
    with pytest.raises(ValueError, match="known"):
        _Echo().inject_fault("melt")


def test_server_stops_with_clients_connected():
    server = _Echo()
    server.start()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=2)
    server.stop()
    sock.settimeout(2)
    try:
        assert sock.recv(10) == b""  # the server closed our connection
    except ConnectionResetError:
        pass  # closed with our bytes unread: a reset, also fine
    sock.close()
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.address


def test_scpi_error_entry_format():
    assert ScpiError((-113, "Undefined header")).entry() == '-113,"Undefined header"'


# --- the driver side of the transport: what a broken or foreign peer looks like --------------------

IDN = b"KEYSIGHT TECHNOLOGIES,DSOX3024T,MY58101234,07.50\n"


def _peer(script: dict[bytes, bytes | None]) -> RawPeer:
    return RawPeer(lambda line: script.get(line.strip(), b""))


def test_non_ascii_idn_is_a_clear_error_naming_the_address():
    peer = _peer({b"*IDN?": b"KEYSIGHT \xff\xfe TECHNOLOGIES,DSOX\n"})
    try:
        with pytest.raises(InstrumentError, match=r"at TCPIP::127.0.0.1::\d+::SOCKET: `\*IDN\?` answered bytes "
                                                  r"that are not ASCII"):
            KeysightInfiniiVision(peer.address, timeout_s=1)
    finally:
        peer.close()


def test_non_ascii_answer_is_a_clear_error_naming_the_instrument():
    peer = _peer({b"*IDN?": IDN, b":MEASure:DELay? CHANnel1,CHANnel2": b"+2.5E-01\xc3\n"})
    try:
        scope = KeysightInfiniiVision(peer.address, timeout_s=1)
        with pytest.raises(InstrumentError, match=r"DSOX3024T s/n MY58101234\): `:MEASure:DELay\? .*not ASCII"):
            scope.measure_delay(1, 2)
        scope.close()
    finally:
        peer.close()


def test_an_instrument_closing_the_connection_mid_query_is_reported_as_such():
    peer = _peer({b"*IDN?": IDN, b":TER?": None})
    try:
        scope = KeysightInfiniiVision(peer.address, timeout_s=5)
        with pytest.raises(InstrumentError, match="closed the connection during `:TER\\?`") as err:
            scope.wait_triggered(timeout_s=1)
        assert "silent" not in str(err.value)
        scope.close()
    finally:
        peer.close()


def test_an_instrument_closing_the_connection_mid_block_is_reported_as_such():
    partial = Hangup(b"+0,+0,+1000,+1,+1E-06,+0,+0,+1E-02,+0,+128;#41000" + bytes(300))
    peer = RawPeer(lambda line: IDN if line.startswith(b"*IDN") else partial)
    try:
        scope = KeysightInfiniiVision(peer.address, timeout_s=5)
        with pytest.raises(InstrumentError, match="closed the connection during `:WAVeform"):
            scope.read_waveform(1)
        scope.close()
    finally:
        peer.close()


# --- IEEE 488.2 and SCPI rules every model shares ------------------------------------------------

def test_numbers_take_unit_suffixes_and_enumerations_answer_short_forms():
    assert parse_number("100 mV") == pytest.approx(0.1) and parse_number("2.5KHZ") == 2500.0
    assert parse_number("1 MHZ") == 1e6 and parse_number("10US") == pytest.approx(1e-5)
    with pytest.raises(ScpiError, match="-104"):
        parse_number("lots")
    assert short_form("MAXimum") == "MAX" and short_form("LSBFirst") == "LSBF" and short_form("DC") == "DC"


def test_common_commands_status_byte_and_the_path_rule(echo):
    server, _, ask = echo
    assert ask("*ESE 32;*ESE?;*SRE 32;*SRE?;*STB?") == "+32;+32;+0"
    assert ask(":BAD;*STB?") == "+100"  # error queue (4), ESB (32), MSS (64)
    assert ask("*CLS;*STB?") == "+0"
    assert ask("*OPC;*ESR?") == "1"
    assert ask(":SOUR:VAL 1;VAL?") == "1"  # relative to :SOURce
    # A relative header that does not resolve from the current path is not retried from the root.
    assert ask(":SOUR:VAL 1;SYST:ERR?;:SYST:ERR?").startswith('-113,"Undefined header; SYST:ERR?"')
    assert ask(":SOUR:VAL 2;*CLS;VAL?") == "2"  # a common command leaves the path alone
    assert ask(":SOURce2:VALue?;:SYST:ERR?").startswith("-113")  # no suffix on a node without one
    assert ask(":SOUR:VAL 1,2;:SYST:ERR?").startswith("-108")
    assert ask(":SOUR:VAL MAX;VAL?") == "10"  # MAXimum is the command's upper bound
    assert ask(":SOUR:LEV MAX;:SYST:ERR?").startswith("-224")  # this one has no MAX
    assert ask("*OPT?;:SYST:ERR?").startswith("-113")  # a model without *OPT? in its manual
