"""The index: LanceDB tables (store), rows from documents, the in-memory row cache with its BM25
full text, hybrid search, and embeddings with their cache.
"""
