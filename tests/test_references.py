"""The golden references the bench ships are the emulated model's exact (wide) outputs, and the
repair payload the emulated station offers is the update its phones have installed."""
from __future__ import annotations

from phonebench.bench.specs.references import find_reference, golden_folder
from phonebench.emulation import tinymodel
from phonebench.emulation.weights import SALT, update_package


def test_shipped_golden_reference_matches_the_model_it_names():
    model = tinymodel.shared_model()
    ref = find_reference(tinymodel.MODEL_NAME, model.sha256)
    assert ref is not None, f"no reference for {tinymodel.MODEL_NAME} in {golden_folder()}"
    for case in ref.cases:
        assert list(case.golden) == model.generate(list(case.prompt), ref.max_tokens, case.seed)
    assert find_reference(tinymodel.MODEL_NAME, "0" * 64) is None  # another build of the weights: none


def test_payload_is_found_by_root_not_by_name(tmp_path):
    from phonebench.bench.specs.payloads import find_payload

    pkg = update_package()
    (tmp_path / "release-7.bin").write_bytes(pkg.data)
    (tmp_path / "other.bin").write_bytes(b"\0" * len(pkg.data))
    found = find_payload(tmp_path, pkg.tree.root, SALT, len(pkg.data))
    assert found is not None and found.path.name == "release-7.bin" and found.page(3) == pkg.page(3)
    assert find_payload(tmp_path, bytes(32), SALT, len(pkg.data)) is None
    assert find_payload(None, pkg.tree.root, SALT, len(pkg.data)) is None


def test_every_bench_module_has_a_layer():
    """A new module under bench/ must be placed in the layer contracts (pyproject.toml), or
    import-linter would leave it unchecked."""
    import tomllib

    from phonebench.core.paths import SOURCE_ROOT

    config = tomllib.loads((SOURCE_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layered = {name.strip() for contract in config if contract["type"] == "layers"
               for layer in contract["layers"] for name in layer.split(":")}
    modules = {f"bench.{p.stem}" for p in (SOURCE_ROOT / "bench").glob("*.py") if p.stem != "__init__"} | \
              {f"bench.{p.name}" for p in (SOURCE_ROOT / "bench").iterdir() if (p / "__init__.py").exists()}
    assert modules - layered == set()
