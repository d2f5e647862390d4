"""The search index: memories as Qdrant points, searched by dense vector, BM25 and the vectors
of the messages they rest on, always within a user's scope.

`contract` holds what callers use (`MemoryIndex`, `IndexPoint`, `Hit`, `SearchFilter`); `build`
picks the backend: `edge.EdgeIndex` (an embedded Qdrant Edge shard in a folder) or
`server.QdrantClientIndex` (a `qdrant_client.QdrantClient`, server or local mode). Both are thin
translations of `qdrant.QdrantIndex`, which writes every search once over the conditions of
`query` and the points of `points`; `bm25` gives both the same sparse vectors.
"""
