"""probes: run real agent-loop clients against the mock and turn what they do into evidence."""

import importlib.metadata

__all__ = ["__version__"]

try:  # the one version: the installed distribution's (pyproject.toml's [project] version)
    __version__ = importlib.metadata.version("loopprobe")
except importlib.metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"
