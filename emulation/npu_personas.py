"""NPU microcode builds the emulated phone can run: 12 SoCs x (engineering sample, mass production).

Each persona is one microcode build on one SoC: the version string its runtime reports, how its
MAC array really accumulates (width, overflow rule) and how fast (the SoC's MAC throughput: a
probe takes its length over that, at the nominal NPU clock). Engineering samples wrap; production
builds saturate (per step or once at the end) at various widths. Two extra builds exercise the
fingerprint verdicts: one missing from the profile library (unknown) and one whose version
string claims a production build while it behaves like the engineering sample (mismatch). A
relabelled unit (SM8650-ES-RELABEL) is another SoC's die saying it is an SM8650 with the
SM8650's microcode, whose overflow behaviour matches the claimed build: only its speed (and the
lab's inventory) tells.
"""
from __future__ import annotations

from dataclasses import dataclass

from phonebench.core.errors import ConfigError
from .phone_spec import PhoneSpec
from .npu import Accumulator, OverflowRule

WRAP, SATURATE, CLAMP = OverflowRule.WRAP, OverflowRule.SATURATE, OverflowRule.CLAMP_END


@dataclass(frozen=True)
class Soc:
    vendor: str           # Qualcomm, MediaTek, HiSilicon
    manufacturer: str     # ro.soc.manufacturer
    model: str            # ro.soc.model
    board_platform: str   # ro.board.platform
    hardware: str         # ro.hardware
    marketing_name: str
    npu_gmac_per_s: float  # INT4 MAC throughput at the nominal NPU clock (how long a probe takes)
    gpu_full_w: float = 2.4  # the GPU's draw at 100 % busy (a design figure; units vary around it)


@dataclass(frozen=True)
class NpuPersona:
    name: str
    soc: Soc
    stage: str                  # "ES" (engineering sample) or "MP" (mass production)
    microcode: str              # the version string the runtime reports (may lie)
    accumulator: Accumulator    # what the MAC array really does
    note: str = ""
    silicon: Soc | None = None  # the die really in the phone when it is not `soc` (a relabelled unit)

    @property
    def die(self) -> Soc:
        """The SoC that computes (its speed); `soc` is what the phone says it is."""
        return self.silicon or self.soc


_SOCS = {s.model: s for s in (
    Soc("Qualcomm", "QTI", "SM8750", "sun", "qcom", "Snapdragon 8 Elite", 140.8, 2.7),
    Soc("Qualcomm", "QTI", "SM8650", "pineapple", "qcom", "Snapdragon 8 Gen 3", 70.4, 2.4),
    Soc("Qualcomm", "QTI", "SM8550", "kalama", "qcom", "Snapdragon 8 Gen 2", 56.3, 2.2),
    Soc("Qualcomm", "QTI", "SM8450", "taro", "qcom", "Snapdragon 8 Gen 1", 40.0, 2.5),
    Soc("MediaTek", "Mediatek", "MT6991", "mt6991", "mt6991", "Dimensity 9400", 110.0, 2.6),
    Soc("MediaTek", "Mediatek", "MT6989", "mt6989", "mt6989", "Dimensity 9300", 88.0, 2.3),
    Soc("MediaTek", "Mediatek", "MT6985", "mt6985", "mt6985", "Dimensity 9200", 64.0, 2.1),
    Soc("MediaTek", "Mediatek", "MT6897", "mt6897", "mt6897", "Dimensity 8300", 44.0, 1.7),
    Soc("HiSilicon", "HiSilicon", "Kirin9020", "kirin9020", "kirin9020", "Kirin 9020", 96.0, 2.2),
    Soc("HiSilicon", "HiSilicon", "Kirin9010", "kirin9010", "kirin9010", "Kirin 9010", 80.0, 2.0),
    Soc("HiSilicon", "HiSilicon", "Kirin9000S", "kirin9000s", "kirin9000s", "Kirin 9000S", 60.0, 1.9),
    Soc("HiSilicon", "HiSilicon", "Kirin9000", "kirin9000", "kirin9000", "Kirin 9000", 50.0, 2.0),
)}

# soc: (ES microcode, ES bits), (MP microcode, MP bits, MP rule). Every ES build wraps.
_BUILDS = {
    "SM8750": (("QNN-HTP v79 ucode 3.1.0.es2", 20), ("QNN-HTP v79 ucode 3.2.4", 32, SATURATE)),
    "SM8650": (("QNN-HTP v75 ucode 2.14.0.es1", 16), ("QNN-HTP v75 ucode 2.14.3", 18, SATURATE)),
    "SM8550": (("QNN-HTP v73 ucode 2.9.0.es3", 16), ("QNN-HTP v73 ucode 2.9.6", 16, SATURATE)),
    "SM8450": (("QNN-HTP v69 ucode 2.2.1.es1", 17), ("QNN-HTP v69 ucode 2.3.0", 24, CLAMP)),
    "MT6991": (("MDLA5.5 fw 5.1.0-ES2", 18), ("MDLA5.5 fw 5.1.7", 20, CLAMP)),
    "MT6989": (("MDLA5.0 fw 4.2.0-ES1", 16), ("MDLA5.0 fw 4.3.2", 16, CLAMP)),
    "MT6985": (("MDLA4.0 fw 3.8.0-ES1", 19), ("MDLA4.0 fw 3.9.1", 19, SATURATE)),
    "MT6897": (("MDLA3.0 fw 3.1.0-ES3", 16), ("MDLA3.0 fw 3.2.5", 17, SATURATE)),
    "Kirin9020": (("DaVinci-V300 npu-fw 1.6.0.B010-ES", 18), ("DaVinci-V300 npu-fw 1.6.2.B200", 20, SATURATE)),
    "Kirin9010": (("DaVinci-V220 npu-fw 1.4.0.B005-ES", 16), ("DaVinci-V220 npu-fw 1.4.3.B120", 18, CLAMP)),
    "Kirin9000S": (("DaVinci-V210 npu-fw 1.2.1.B002-ES", 17), ("DaVinci-V210 npu-fw 1.2.5.B090", 17, CLAMP)),
    "Kirin9000": (("DaVinci-V200 npu-fw 1.0.3.B001-ES", 16), ("DaVinci-V200 npu-fw 1.1.0.B060", 32, CLAMP)),
}


def _catalogue() -> dict[str, NpuPersona]:
    personas = {}
    for model, ((es_ucode, es_bits), (mp_ucode, mp_bits, mp_rule)) in _BUILDS.items():
        soc = _SOCS[model]
        personas[f"{model}-ES"] = NpuPersona(f"{model}-ES", soc, "ES", es_ucode, Accumulator(es_bits, WRAP))
        personas[f"{model}-MP"] = NpuPersona(f"{model}-MP", soc, "MP", mp_ucode, Accumulator(mp_bits, mp_rule))
    personas["SM8650-MP2"] = NpuPersona(
        "SM8650-MP2", _SOCS["SM8650"], "MP", "QNN-HTP v75 ucode 2.15.1", Accumulator(17, SATURATE),
        note="a newer production build not yet in the profile library (verdict: unknown)")
    personas["SM8650-ES-RELABEL"] = NpuPersona(
        "SM8650-ES-RELABEL", _SOCS["SM8650"], "ES", _BUILDS["SM8650"][0][0], Accumulator(16, WRAP),
        note="a MediaTek MT6989 engineering sample relabelled as a Snapdragon SM8650 one (getprop, runtime): "
             "the same 16-bit wrap, but the MT6989's MAC throughput", silicon=_SOCS["MT6989"])
    personas["MT6989-ES-RELABEL"] = NpuPersona(
        "MT6989-ES-RELABEL", _SOCS["MT6989"], "ES", _BUILDS["MT6989"][1][0], Accumulator(16, WRAP),
        note="engineering-sample silicon reporting the production version string (verdict: mismatch)")
    return personas


PERSONAS: dict[str, NpuPersona] = _catalogue()


def get_persona(name: str) -> NpuPersona:
    try:
        return PERSONAS[name]
    except KeyError:
        raise ConfigError(f"unknown NPU persona {name!r}",
                          hint=f"npu_persona is one of: {', '.join(sorted(PERSONAS))}") from None


def phone_spec(persona: str, serial: str, **overrides: object) -> PhoneSpec:
    """A PhoneSpec whose SoC identity and NPU come from the persona; overrides win."""
    p = get_persona(persona)
    fields: dict[str, object] = dict(
        serial=serial, soc_manufacturer=p.soc.manufacturer, soc_model=p.soc.model,
        board_platform=p.soc.board_platform, hardware=p.soc.hardware,
        product_model=f"PB-Emu {p.soc.marketing_name}", npu_persona=p.name,
        product_name=f"pbemu_{p.soc.model.lower()}", product_device=f"pbemu_{p.soc.model.lower()}")
    fields.update(overrides)
    return PhoneSpec(**fields)  # type: ignore[arg-type]


DEFAULT_FLEET = ("SM8650-MP", "SM8650-ES", "MT6989-MP", "MT6991-MP")


def default_fleet() -> list[PhoneSpec]:
    """The emulated station's default fleet, each phone in a bay of its own: cases a fingerprint
    must tell apart (MP saturate, ES wrap, MP clamp-at-end on two MediaTek generations), every
    build trusted with an adapter, so every unit is healthy and `make run` is green. An unknown
    build and a lying one are negative controls (tests/data/stations/relabelled-fleet.toml)."""
    return [phone_spec(name, f"EMU{index:04d}") for index, name in enumerate(DEFAULT_FLEET, start=1)]
