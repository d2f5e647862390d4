"""How many threads the local embedder computes with: the BLAS library NumPy multiplies with
(the default MiniLM embedder) and torch's intra-op threads (the `torch` extra).

A process that embeds one short text at a time (a server answering recalls) is fastest with
one: the matrices are small, and a second thread mostly waits for a core the machine's other
work holds."""

from __future__ import annotations

from dreamer.embed.sentence_transformer import set_torch_threads


def set_embedder_threads(threads: int) -> int | None:
    """Limit this process's BLAS library and torch to `threads` each (<= 0 leaves their
    defaults). Returns the BLAS threads in effect, or None when NumPy uses no BLAS library that
    can be told."""
    from threadpoolctl import threadpool_info, threadpool_limits

    set_torch_threads(threads)
    if threads > 0:
        threadpool_limits(limits=threads, user_api="blas")
    counts = [int(pool["num_threads"]) for pool in threadpool_info() if pool.get("user_api") == "blas"]
    return min(counts) if counts else None
