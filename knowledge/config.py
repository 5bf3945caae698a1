"""Knowledge bases as code: validating a ``knowledge_bases[]`` item of a config document.

The section itself (validation and apply, between clients and routes) is registered with the
agent runtime's config document in ``knowledge.apps``.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.config.fields import (
    ConfigError,
    field_path,
    read_base_url,
    read_boolean,
    read_choice,
    read_integer,
    read_list,
    read_object,
    read_resource_name,
    read_secret_reference,
    read_string,
)
from knowledge.embeddings import LOCAL_DIMENSION, LOCAL_MODEL_ID

KB_EMBEDDING_PROVIDERS = ("local", "openai", "none")
_KB_KEYS = ("kb_id", "name", "description", "enabled", "embedding", "writers")
_KB_EMBEDDING_KEYS = ("provider", "model", "dim", "base_url", "secret_env", "secret_file", "timeout_seconds")


def _kb_embedding(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=_KB_EMBEDDING_KEYS)
    provider = read_choice(
        data.get("provider", "local"), field_path(path, "provider"), KB_EMBEDDING_PROVIDERS
    )
    result: dict[str, Any] = {"provider": provider, "model": "", "dim": 0, "config": {}}
    if provider == "local":
        for name in ("base_url", "secret_env", "secret_file", "timeout_seconds"):
            if name in data:
                raise ConfigError(field_path(path, name), "is only for the openai provider")
        if "model" in data and data["model"] != LOCAL_MODEL_ID:
            raise ConfigError(field_path(path, "model"), f"the local provider serves {LOCAL_MODEL_ID} only")
        if "dim" in data and data["dim"] != LOCAL_DIMENSION:
            raise ConfigError(field_path(path, "dim"), f"the local model has {LOCAL_DIMENSION} dimensions")
        result.update(model=LOCAL_MODEL_ID, dim=LOCAL_DIMENSION)
    elif provider == "none":
        for name in _KB_EMBEDDING_KEYS[1:]:
            if name in data:
                raise ConfigError(
                    field_path(path, name), "a knowledge base without embeddings takes no settings"
                )
    else:
        for required in ("model", "dim", "base_url"):
            if required not in data:
                raise ConfigError(field_path(path, required), "is required for the openai provider")
        result["model"] = read_string(data["model"], field_path(path, "model"), max_len=128)
        result["dim"] = read_integer(data["dim"], field_path(path, "dim"), lo=1, hi=16_000)
        config: dict[str, Any] = {"base_url": read_base_url(data["base_url"], field_path(path, "base_url"))}
        config.update(read_secret_reference(data, path))
        if "timeout_seconds" in data:
            config["timeout_seconds"] = read_integer(
                data["timeout_seconds"], field_path(path, "timeout_seconds"), lo=1, hi=300
            )
        result["config"] = config
    return result


def validate_knowledge_base_config(data: dict, *, path: str) -> dict:
    """Validate one ``knowledge_bases[]`` item; return ``KnowledgeBase`` column values plus ``writers``
    (client app ids). The embedding provider, model, dimension and endpoint are locked once the knowledge
    base exists (``config_apply`` refuses a change); ``writers`` name clients that may push documents
    with their Client Token.
    """
    if isinstance(data, dict) and isinstance(data.get("embedding"), dict) and "api_key" in data["embedding"]:
        raise ConfigError(
            field_path(field_path(path, "embedding"), "api_key"),
            "secrets are never written in configuration files; use secret_env or secret_file",
        )
    data = read_object(data, path, allowed=_KB_KEYS)
    for required in ("kb_id", "name"):
        if required not in data:
            raise ConfigError(field_path(path, required), "is required")
    embedding = _kb_embedding(data.get("embedding", {}), field_path(path, "embedding"))
    return {
        "kb_id": read_resource_name(data["kb_id"], field_path(path, "kb_id")),
        "name": read_string(data["name"], field_path(path, "name"), max_len=128, display=True),
        "description": read_string(
            data.get("description", ""),
            field_path(path, "description"),
            max_len=1000,
            min_len=0,
            multiline=True,
            display=True,
        ),
        "enabled": read_boolean(data.get("enabled", True), field_path(path, "enabled")),
        "embedding_provider": embedding["provider"],
        "embedding_model": embedding["model"],
        "embedding_dim": embedding["dim"],
        "embedding_config": embedding["config"],
        "writers": read_list(data.get("writers", []), field_path(path, "writers"), read_resource_name),
    }
