"""Optional parts (issue 46's lean install): a command needing a package this install lacks
says which extra brings it, in one line; an import error inside an installed package is not
hidden behind that sentence."""

import sys

import pytest

from gpupool.extras import MissingExtra, have, require


def test_a_missing_optional_package_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # as if not installed
    with pytest.raises(MissingExtra) as caught:
        require("kubernetes", "gpupool kube scheduler")
    assert str(caught.value) == (
        "gpupool kube scheduler needs the Python package kubernetes, which this install "
        "lacks: pip install 'gpupool[kube]'"
    )
    assert not have("kubernetes")


def test_a_submodule_of_a_missing_package_counts_as_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    with pytest.raises(MissingExtra, match=r"gpupool\[kube\]"):
        require("google.protobuf", "the device plugin")


def test_a_broken_import_inside_an_installed_package_is_not_called_missing(monkeypatch):
    # aiohttp installed but importing a dependency that is gone: that error is shown as it is,
    # not "install gpupool[bench]" (which would not mend it)
    monkeypatch.setattr("gpupool.extras.import_module", _importing("yarl"))
    with pytest.raises(ImportError) as caught:
        require("aiohttp", "gpupool bench agents")
    assert not isinstance(caught.value, MissingExtra) and caught.value.name == "yarl"


def _importing(missing: str):
    def fail(name: str):
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    return fail
