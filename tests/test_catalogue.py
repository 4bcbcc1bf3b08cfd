"""The build catalogue (bench/catalogue/catalogue.py, docs/builds.md): read as a lab's build system
writes it, every mistake one error naming the file and the key."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from phonebench.bench.catalogue.catalogue import CatalogueError, load_catalogue
from phonebench.core.errors import ConfigError
from phonebench.emulation.build_artefact import Behaviour
from phonebench.emulation.catalogue_factory import behaviour_at, write_catalogue

DIGEST = "ab" * 32


def catalogue(tmp_path: Path, builds: str, head: str = 'format = "phonebench-catalogue/1"\n') -> Path:
    path = tmp_path / "catalogue.toml"
    path.write_text(head + builds, encoding="utf-8")
    return path


def build(ident: str = "3.5.0", order: int = 1, **more: str) -> str:
    keys = {"id": f'"{ident}"', "order": str(order), "date": "2026-12-01", "artefact": '"a/b.tar"',
            "sha256": f'"{DIGEST}"', **more}
    return "[[build]]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items() if v is not None) + "\n"


def test_a_catalogue_is_read_in_order_with_artefacts_beside_it(tmp_path):
    path = catalogue(tmp_path, build("b", 20, date="2026-12-02T22:05:00Z") + build("a", 10) + build("c", 30))
    cat = load_catalogue(tmp_path)  # the folder holding catalogue.toml
    assert cat.path == path.resolve()
    assert [b.id for b in cat.builds] == ["a", "b", "c"]
    assert cat.builds[0].artefact == tmp_path.resolve() / "a" / "b.tar"
    assert cat.builds[0].date == dt.date(2026, 12, 1)
    assert cat.get("b").date == dt.datetime(2026, 12, 2, 22, 5, tzinfo=dt.timezone.utc)
    assert not cat.get("a").available  # checked when installed, not when read
    assert [b.id for b in cat.between("a", "c")] == ["a", "b", "c"]
    assert [b.id for b in cat.between("b", "c")] == ["b", "c"]


def test_an_unknown_build_or_a_bisection_backwards_names_the_catalogue(tmp_path):
    path = catalogue(tmp_path, build("a", 1) + build("b", 2))
    cat = load_catalogue(path)
    with pytest.raises(ConfigError, match=rf"{path.resolve()}: no build 'zz'") as err:
        cat.get("zz")
    assert "builds: a, b" in str(err.value)
    with pytest.raises(CatalogueError, match="'b' \\(order 2\\) is not before 'a' \\(order 1\\)"):
        cat.between("b", "a")
    with pytest.raises(CatalogueError, match="is not before"):
        cat.between("a", "a")


@pytest.mark.parametrize("builds, says", [
    (build(sha256=None), r"\[\[build\]\] #1\.sha256: missing \(required\)"),
    (build(sha256='"1234"'), r"\[\[build\]\] #1\.sha256: expected 64 hex digits"),
    (build(order='"first"'), r"\[\[build\]\] #1\.order: expected an integer"),
    (build(date='"yesterday"'), r"\[\[build\]\] #1\.date: expected a date"),
    (build(shaa256='"x"'), r"\[\[build\]\] #1\.shaa256: unknown key"),
    (build(id='""'), r"\[\[build\]\] #1\.id: expected a printable build id"),
    (build(id='"a\\u001b[2Jb"'), r"\[\[build\]\] #1\.id: expected a printable build id"),
    (build("a", 1) + build("a", 2), r"\[\[build\]\] #2\.id: 'a' is already build #1's"),
    (build("a", 1) + build("b", 1), r"\[\[build\]\] #2\.order: 1 is already build #1's"),
    ("", r"\[\[build\]\]: expected at least one"),
    ("[[build]\n", r"not valid TOML"),
])
def test_a_malformed_catalogue_is_one_error_naming_the_file_and_key(tmp_path, builds, says):
    path = catalogue(tmp_path, builds)
    with pytest.raises(CatalogueError, match=rf"^{path.resolve() if 'TOML' not in says else path}: {says}"):
        load_catalogue(path)


def test_a_catalogue_of_another_format_or_none_at_all_is_refused(tmp_path):
    with pytest.raises(CatalogueError, match="format: expected 'phonebench-catalogue/1'"):
        load_catalogue(catalogue(tmp_path, build(), head='format = "other/2"\n'))
    with pytest.raises(CatalogueError, match="does not exist"):
        load_catalogue(tmp_path / "nothing")


def test_the_factory_writes_a_catalogue_the_bench_reads(tmp_path):
    path = write_catalogue(tmp_path, 8, {3: {"npu_time": 1.06, "models": ["SM8650"]}},
                           broken={1: "missing-artefact", 2: "digest-mismatch"})
    cat = load_catalogue(path)
    assert len(cat.builds) == 8 and [b.order for b in cat.builds] == sorted(b.order for b in cat.builds)
    assert not cat.builds[1].available and all(b.available for b in cat.builds if b is not cat.builds[1])
    assert not any("1.06" in b.notes for b in cat.builds)  # the catalogue does not give the culprit away


def test_a_culprit_carries_into_every_later_build_on_its_models_only():
    culprits = {3: {"npu_time": 1.06, "models": ["SM8650"]}, 5: {"npu_power": 1.1}}
    assert behaviour_at(2, culprits) == (Behaviour(), {})
    base, models = behaviour_at(4, culprits)
    assert base == Behaviour() and models == {"SM8650": Behaviour(npu_time=1.06)}
    base, models = behaviour_at(7, culprits)
    assert base == Behaviour(npu_power=1.1) and models == {"SM8650": Behaviour(npu_time=1.06, npu_power=1.1)}
