"""Readiness checks of the knowledge app, registered from ``KnowledgeConfig.ready`` (``bailing.health``).

``embedding``: every embedding provider a knowledge base uses can embed. The local ONNX model must
load (verified files, an onnxruntime session); the positive answer is kept for the process, since
installed files do not change under it. An OpenAI-compatible endpoint must embed one probe word
within :data:`PROBE_TIMEOUT_SECONDS`; a positive answer is kept :data:`REMOTE_OK_SECONDS`, so the
endpoint sees at most one probe a minute per process however often readiness is polled.

``knowledge_worker``: see :func:`knowledge.services.heartbeat.worker_heartbeat_check`.
"""

from __future__ import annotations

import threading
import time

from knowledge.embeddings import EmbeddingConfigError, EmbeddingError
from knowledge.models import KnowledgeBase

PROBE_TIMEOUT_SECONDS = 5.0
REMOTE_OK_SECONDS = 60.0

_lock = threading.Lock()
_local_loaded = False
_remote_ok_until: dict[tuple[str, str], float] = {}


def _local_ready() -> str | None:
    global _local_loaded
    if _local_loaded:
        return None
    from knowledge.services.providers import local_provider

    try:
        local_provider().load()
    except EmbeddingError as exc:
        return exc.code
    with _lock:
        _local_loaded = True
    return None


def _remote_ready(kb: KnowledgeBase) -> str | None:
    from knowledge.services.providers import embedding_provider_for

    key = (str((kb.embedding_config or {}).get("base_url", "")), kb.embedding_model)
    if _remote_ok_until.get(key, 0.0) > time.monotonic():
        return None
    try:
        provider = embedding_provider_for(kb, timeout=PROBE_TIMEOUT_SECONDS)
    except EmbeddingConfigError:
        return "embedding_config_invalid"
    try:
        provider.embed(["readiness"])
    except EmbeddingError as exc:
        return exc.code
    finally:
        provider.close()
    with _lock:
        _remote_ok_until[key] = time.monotonic() + REMOTE_OK_SECONDS
    return None


def embedding_check() -> dict:
    """``{"ok", "providers": {"local": "ok" | code, "openai:<kb_id>": "ok" | code}}``."""
    providers: dict[str, str] = {}
    bases = KnowledgeBase.objects.exclude(embedding_provider=KnowledgeBase.EmbeddingProvider.NONE).order_by(
        "kb_id"
    )
    for kb in bases:
        if kb.embedding_provider == KnowledgeBase.EmbeddingProvider.LOCAL:
            if "local" not in providers:
                providers["local"] = _local_ready() or "ok"
        else:
            providers[f"openai:{kb.kb_id}"] = _remote_ready(kb) or "ok"
    return {"ok": all(state == "ok" for state in providers.values()), "providers": providers}
