"""probes: run real agent-loop clients against the mock and turn what they do into evidence."""

__all__ = ["__version__"]

__version__ = "0.1.0"
