"""The embedding provider of a knowledge base (locked at creation: local, openai or none).

The local MiniLM provider is shared per process (the ONNX session is loaded once per thread count):
queries embed on ``BAILING_EMBEDDING_THREADS`` intra-op threads (default 1, so the web processes of a
small machine do not fight each other and PostgreSQL for its cores: one query is too small to gain
from more), indexing on ``BAILING_EMBEDDING_INDEX_THREADS`` (default 0, every physical core: a batch
of chunks does gain). An
OpenAI-compatible provider is built from the KB's ``embedding_config``; its API key is read from the
environment variable or file the config names, at use time, and never stored or logged.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from django.conf import settings

from knowledge.embeddings import (
    EmbeddingConfigError,
    EmbeddingProvider,
    LocalMiniLMProvider,
    OpenAICompatibleProvider,
)
from knowledge.models import KnowledgeBase

_LOCAL: dict[bool, LocalMiniLMProvider] = {}
_LOCAL_LOCK = threading.Lock()


def local_provider(*, for_indexing: bool = False) -> LocalMiniLMProvider:
    """The process's local MiniLM provider for queries, or (``for_indexing``) for batches of chunks."""
    with _LOCAL_LOCK:
        provider = _LOCAL.get(for_indexing)
        if provider is None:
            name = "BAILING_EMBEDDING_INDEX_THREADS" if for_indexing else "BAILING_EMBEDDING_THREADS"
            threads = getattr(settings, name)
            provider = _LOCAL[for_indexing] = LocalMiniLMProvider(threads=threads or None)
        return provider


def _api_key(config: dict) -> str:
    if config.get("secret_env"):
        return os.environ.get(config["secret_env"], "")
    if config.get("secret_file"):
        try:
            return Path(config["secret_file"]).read_text(encoding="utf-8").strip()
        except OSError:
            raise EmbeddingConfigError("the embedding secret_file cannot be read") from None
    return ""


def embedding_provider_for(
    kb: KnowledgeBase, *, timeout: float | None = None, for_indexing: bool = False
) -> EmbeddingProvider | None:
    """The provider that embeds ``kb``'s queries (or, ``for_indexing``, its chunks); ``None`` for a
    lexical-only KB.

    Raises ``EmbeddingConfigError`` when an OpenAI-compatible KB cannot be configured (e.g. its
    secret file is unreadable); callers treat that as the vector lane failing.
    """
    if kb.embedding_provider == KnowledgeBase.EmbeddingProvider.NONE:
        return None
    if kb.embedding_provider == KnowledgeBase.EmbeddingProvider.LOCAL:
        return local_provider(for_indexing=for_indexing)
    config = kb.embedding_config or {}
    return OpenAICompatibleProvider(
        base_url=config.get("base_url", ""),
        api_key=_api_key(config),
        model=kb.embedding_model,
        dimension=kb.embedding_dim,
        timeout=timeout if timeout is not None else float(config.get("timeout_seconds", 30)),
    )
