"""The signed firmware profile library: schema errors with file, line and field; duplicate
claims; adapter safety; Ed25519 signatures; `bench profiles sign|verify`."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from phonebench.core import signing
from phonebench.bench.cli import main as bench_main
from phonebench.core.errors import ConfigError
from phonebench.bench.specs.profiles import DEFAULT_ROOT, Signature, load_library
from phonebench.emulation.npu_personas import PERSONAS

UNPROFILED = {"SM8650-MP2"}  # the build the library deliberately lacks

@pytest.fixture(autouse=True, scope="module")
def development_station():
    """These tests stand for a development station: it opts in to the shipped development key."""
    with signing.trusting(None, development=True):
        yield


@pytest.fixture
def keypair(tmp_path) -> tuple[Path, Path]:
    private = Ed25519PrivateKey.generate()
    key, pub = tmp_path / "key.pem", tmp_path / "key.pub"
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    pub.write_bytes(signing.public_pem(private))
    return key, pub


@pytest.fixture
def lib(tmp_path, keypair):
    """A signed copy of the shipped library in tmp, and a function to edit + re-sign a file."""
    root = tmp_path / "profiles"
    root.mkdir()
    (root / "adapters").mkdir()
    for path in DEFAULT_ROOT.glob("*.toml"):
        shutil.copy(path, root)
    for path in (DEFAULT_ROOT / "adapters").glob("*.json"):
        shutil.copy(path, root / "adapters")
    private = signing.load_private_key(keypair[0])
    for path in [*root.glob("*.toml"), *(root / "adapters").glob("*.json")]:
        signing.sign_file(path, private)
    trusted = signing.trusted_keys([keypair[1]])

    def edit(name: str, old: str, new: str, resign: bool = True) -> Path:
        path = root / name
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))
        if resign:
            signing.sign_file(path, private)
        return path

    return root, trusted, edit, private


def test_shipped_library_verifies_with_the_dev_key():
    library = load_library()
    assert len(library.socs) >= 12 and library.dev_signed
    assert {s.vendor for s in library.socs.values()} == {"Qualcomm", "MediaTek", "HiSilicon"}
    for soc in library.socs.values():
        assert {b.stage for b in soc.builds} >= {"ES", "MP"}


@pytest.mark.parametrize("name", sorted(PERSONAS))
def test_every_persona_is_profiled_or_deliberately_not(name):
    persona = PERSONAS[name]
    build = load_library().build(persona.soc.model, persona.microcode)
    if name in UNPROFILED:
        assert build is None
    elif persona.silicon is not None:  # another SoC's die with the claimed build's overflow rule: its speed differs
        assert build is not None and build.signature == Signature(persona.accumulator.bits, persona.accumulator.rule.value)
        assert load_library().socs[persona.soc.model.upper()].npu_gmac_per_s != persona.die.npu_gmac_per_s
    elif "RELABEL" in name:  # reports a profiled string but behaves otherwise
        assert build is not None and build.signature != Signature(persona.accumulator.bits, persona.accumulator.rule.value)
    else:
        assert build is not None and build.signature == Signature(persona.accumulator.bits, persona.accumulator.rule.value)


def _error_location(exc: ConfigError) -> tuple[str, int]:
    match = re.match(r"(.+?):(\d+): ", str(exc))
    assert match, str(exc)
    return Path(match[1]).name, int(match[2])


@pytest.mark.parametrize("old,new,field", [
    ("accumulator_bits = 18", 'accumulator_bits = "18"', "accumulator_bits"),
    ('overflow = "saturate-each-step"', 'overflow = "saturate"', "overflow"),
    ('stage = "MP"', 'stage = "PROTO"', "stage"),
    ('overflow = "saturate-each-step"', 'overflow = "saturate-each-step"\ncolour = "red"', "colour"),
    ('adapter = "tile-k-1024"', 'adapter = "tile-k-9"', "adapter"),
    ('adapter = "tile-k-1024"', 'adapter = "tile-k-4096"', "adapter"),  # too long for 18 bits
    ('adapter = "tile-k-1024"', 'adapter = "none"', "adapter"),  # narrow accumulators need one
    ("accumulator_bits = 18", "accumulator_bits = 40", "accumulator_bits"),
])
def test_malformed_profile_names_file_line_and_field(lib, old, new, field):
    root, trusted, edit, _ = lib
    path = edit("qualcomm-sm8650.toml", old, new)
    with pytest.raises(ConfigError) as info:
        load_library(root, trusted)
    name, line = _error_location(info.value)
    assert name == path.name and field in str(info.value)
    assert field in path.read_text().splitlines()[line - 1] or "[[build]]" in path.read_text().splitlines()[line - 1]


def test_missing_field_points_at_its_build(lib):
    root, trusted, edit, _ = lib
    path = edit("qualcomm-sm8650.toml", 'microcode = "QNN-HTP v75 ucode 2.14.3"\n', "")
    with pytest.raises(ConfigError, match=r"\[\[build\]\] #2 microcode: missing") as info:
        load_library(root, trusted)
    assert path.read_text().splitlines()[_error_location(info.value)[1] - 1] == "[[build]]"


def test_toml_syntax_error_names_file_and_line(lib):
    root, trusted, edit, _ = lib
    edit("mediatek-mt6989.toml", 'vendor = "MediaTek"', 'vendor = "MediaTek')
    with pytest.raises(ConfigError, match=r"mediatek-mt6989.toml: invalid TOML: .*line 4"):
        load_library(root, trusted)


def test_two_profiles_claiming_the_same_build_fail_at_load(lib):
    root, trusted, _, private = lib
    clash = root / "zz-clash.toml"
    clash.write_text((root / "qualcomm-sm8650.toml").read_text().replace('soc_model = "SM8650"', 'soc_model = "sm8650"'))
    signing.sign_file(clash, private)
    with pytest.raises(ConfigError, match="already profiled in"):
        load_library(root, trusted)
    clash.write_text('schema = 1\nvendor = "Qualcomm"\nsoc_manufacturer = "QTI"\nsoc_model = "SM8650"\n'
                     '[[build]]\nmicrocode = "x"\nstage = "ES"\naccumulator_bits = 16\noverflow = "wrap"\n'
                     'adapter = "tile-k-256"\n')
    (root / "qualcomm-sm8650.toml").unlink()
    signing.sign_file(clash, private)
    (root / "aa-first.toml").write_text(clash.read_text().replace('soc_model = "SM8650"', 'soc_model = "SM8651"')
                                        .replace('"x"', '"y"'))
    signing.sign_file(root / "aa-first.toml", private)
    load_library(root, trusted)  # distinct builds load
    dup = root / "zz-clash.toml"
    dup.write_text(dup.read_text() + '\n[[build]]\nmicrocode = "x"\nstage = "MP"\naccumulator_bits = 16\n'
                   'overflow = "wrap"\nadapter = "tile-k-256"\n')
    signing.sign_file(dup, private)
    with pytest.raises(ConfigError, match=r"zz-clash.toml:12: build SM8650 'x' is already claimed at .*zz-clash.toml:5"):
        load_library(root, trusted)


def test_malformed_adapter_names_file_line_and_field(lib):
    root, trusted, edit, _ = lib
    edit("adapters/tile-k-256.json", '"partials": "wide"', '"partials": "narrow"')
    with pytest.raises(ConfigError, match=r"tile-k-256.json:6: partials: 'narrow'"):
        load_library(root, trusted)


def test_tampered_profile_is_refused(lib):
    root, trusted, edit, _ = lib
    edit("hisilicon-kirin9000.toml", "accumulator_bits = 16", "accumulator_bits = 17", resign=False)
    with pytest.raises(signing.SignatureError, match="kirin9000.toml: signature does not match"):
        load_library(root, trusted)


def test_unsigned_adapter_is_refused(lib):
    root, trusted, _, _ = lib
    signing.signature_path(root / "adapters" / "tile-k-512.json").unlink()
    with pytest.raises(signing.SignatureError, match="tile-k-512.json: unsigned"):
        load_library(root, trusted)


def test_untrusted_key_is_refused(lib):
    root, _, _, _ = lib
    with pytest.raises(signing.SignatureError, match="not trusted"):
        load_library(root, signing.trusted_keys([signing.DEV_PUBLIC_KEY]))


def test_trusted_keys_from_environment(lib, keypair, monkeypatch):
    root, _, _, _ = lib
    monkeypatch.setenv(signing.TRUSTED_KEYS_ENV, str(keypair[1]))
    library = load_library(root)
    assert not library.dev_signed and library.trusted[0].path == keypair[1]


def test_cli_sign_and_verify(lib, keypair, capsys):
    root, _, edit, _ = lib
    edit("mediatek-mt6991.toml", "# ", "# reviewed 2026-11: ", resign=False)
    assert bench_main(["profiles", "verify", "--dir", str(root), "--pubkey", str(keypair[1])]) == 2
    assert "signature does not match" in capsys.readouterr().err
    assert bench_main(["profiles", "sign", "--dir", str(root), "--key", str(keypair[0])]) == 0
    assert "signed 18 files" in capsys.readouterr().out
    assert bench_main(["profiles", "verify", "--dir", str(root), "--pubkey", str(keypair[1])]) == 0
    assert "12 SoC profiles (24 builds) and 6 adapters" in capsys.readouterr().out


def test_cli_sign_refuses_an_invalid_library(lib, keypair, capsys):
    root, _, edit, _ = lib
    edit("mediatek-mt6991.toml", 'stage = "ES"', 'stage = "XX"', resign=False)
    assert bench_main(["profiles", "sign", "--dir", str(root), "--key", str(keypair[0])]) == 2
    assert "stage" in capsys.readouterr().err
