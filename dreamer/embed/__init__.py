"""Embedders: the `Embedder` protocol, the packaged MiniLM run by NumPy, and the hashed fallback.

May import: `dreamer.core`."""
