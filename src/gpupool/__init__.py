"""gpupool: pool every accelerator of every server, cut it into slices, schedule and meter it."""

from importlib.metadata import PackageNotFoundError, version


def _installed_version() -> str:
    """The version the package was built with (from git by hatch-vcs: a tag vX.Y.Z is X.Y.Z,
    a later commit X.Y.(Z+1).devN+gHASH); ``0.0.0+unknown`` for a tree run uninstalled."""
    try:
        return version("gpupool")
    except PackageNotFoundError:
        return "0.0.0+unknown"


__version__ = _installed_version()
