"""dreamer: the memory back office for AI agents."""

__version__ = "0.1.0"
