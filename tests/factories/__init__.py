"""factory-boy factories shared by every test layer."""

from __future__ import annotations

from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone

from agent_runtime.models import AgentRefreshToken, AgentSession, Client, Route, ToolInvocation, ToolProvider
from agent_runtime.services.tool_specs import provider_spec_store
from agent_runtime.tokens import (
    ACCESS_TOKEN_PREFIX,
    CLIENT_TOKEN_PREFIX,
    REFRESH_TOKEN_PREFIX,
    display_prefix,
    new_secret,
    secret_hash,
)
from agent_runtime.tools import compile_spec
from bailing.audit.actor import Actor


class ClientFactory(factory.django.DjangoModelFactory):
    """A hub-consent agent client allowed every route. ``client._token`` holds its Client Token."""

    class Meta:
        model = Client
        # The post-generation hook saves what it changes itself.
        skip_postgeneration_save = True

    app_id = factory.Sequence(lambda n: f"client-{n}")
    name = factory.Sequence(lambda n: f"Client {n}")
    allowed_routes = factory.LazyFunction(lambda: ["*"])
    hub_consent = True

    @factory.post_generation
    def token(obj, create, extracted, **kwargs):
        plaintext = extracted or new_secret(CLIENT_TOKEN_PREFIX)
        obj.token_hash = secret_hash(plaintext)
        obj.token_prefix = display_prefix(plaintext)
        obj._token = plaintext
        if create:
            obj.save(update_fields=["token_hash", "token_prefix"])


class RouteFactory(factory.django.DjangoModelFactory):
    """An enabled agent workspace with defaults everywhere else."""

    class Meta:
        model = Route

    route_key = factory.Sequence(lambda n: f"workspace-{n}")
    name = factory.Sequence(lambda n: f"Workspace {n}")
    target_config = factory.LazyFunction(lambda: {"system_prompt": "You help with orders."})
    agent_client = factory.LazyFunction(lambda: {"enabled": True})


class AgentSessionFactory(factory.django.DjangoModelFactory):
    """A live agent session. ``session._access`` / ``session._refresh`` hold its plaintext tokens."""

    class Meta:
        model = AgentSession
        skip_postgeneration_save = True

    client = factory.SubFactory(ClientFactory)
    device_label = "test laptop"
    principal = factory.LazyFunction(lambda: {"id": "alice", "roles": []})
    on_behalf_of = "alice"
    allowed_routes = factory.LazyFunction(list)
    access_expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(seconds=900))
    refresh_expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(days=30))

    @factory.post_generation
    def tokens(obj, create, extracted, **kwargs):
        access = new_secret(ACCESS_TOKEN_PREFIX)
        refresh = new_secret(REFRESH_TOKEN_PREFIX)
        obj.access_token_hash = secret_hash(access)
        obj._access = access
        obj._refresh = refresh
        if create:
            obj.save(update_fields=["access_token_hash"])
            AgentRefreshToken.objects.create(
                token_hash=secret_hash(refresh), session=obj, expires_at=obj.refresh_expires_at
            )


class UserFactory(factory.django.DjangoModelFactory):
    """A console user; ``roles=["administrator"]`` puts them in role groups.

    Password: ``correct-horse-battery``.
    """

    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "correct-horse-battery")

    @factory.post_generation
    def roles(obj, create, extracted, **kwargs):
        obj.save()
        for role in extracted or []:
            obj.groups.add(Group.objects.get(name=role))


class ToolProviderFactory(factory.django.DjangoModelFactory):
    """An enabled inline tool provider. ``spec=<OpenAPI dict>`` compiles it and stores it as the
    provider's current spec through ``provider_spec_store`` (the only writer of tool rows)."""

    class Meta:
        model = ToolProvider
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"provider-{n}")
    base_url = "https://business.example.test"
    spec_source = ToolProvider.SpecSource.INLINE

    @factory.post_generation
    def spec(obj, create, extracted, **kwargs):
        if create and extracted is not None:
            result = compile_spec(extracted, provider=obj.name)
            provider_spec_store(provider=obj, spec=extracted, result=result, actor=Actor.system("tests"))


class KnowledgeBaseFactory(factory.django.DjangoModelFactory):
    """A knowledge base with the local MiniLM provider (pass ``embedding_provider="none"`` for a
    lexical-only one) and its statistics row; its HNSW index exists where pgvector does."""

    class Meta:
        model = "knowledge.KnowledgeBase"
        skip_postgeneration_save = True

    kb_id = factory.Sequence(lambda n: f"kb-{n}")
    name = factory.Sequence(lambda n: f"Knowledge base {n}")
    embedding_provider = "local"
    embedding_model = "all-MiniLM-L6-v2-onnx-int8"
    embedding_dim = 384

    @factory.post_generation
    def prepared(obj, create, extracted, **kwargs):
        if not create:
            return
        from knowledge.models import KnowledgeBaseStats
        from knowledge.vectors import vector_index_ensure, vector_storage_ready

        KnowledgeBaseStats.objects.get_or_create(kb=obj)
        if obj.has_embeddings and vector_storage_ready():
            vector_index_ensure(kb_pk=obj.pk, dim=obj.embedding_dim)


def knowledge_document(kb, source_key: str, title: str, content: str, *, index: bool = True, **kwargs):
    """Put a document through the real service and (by default) index it now, as the worker would."""
    from bailing.audit.actor import Actor
    from knowledge.services.documents import document_put
    from knowledge.services.indexing import document_index

    result = document_put(
        kb=kb, source_key=source_key, title=title, content=content, actor=Actor.system("test"), **kwargs
    )
    if index:
        document_index(document_id=result.document.pk)
    result.document.refresh_from_db()
    return result.document


class ToolInvocationFactory(factory.django.DjangoModelFactory):
    """A finished read-only call row, for pages that list or count calls; the governed path itself is
    exercised through the API against a real business process (tests/agent_runtime/invocations)."""

    class Meta:
        model = ToolInvocation

    session = factory.SubFactory(AgentSessionFactory)
    client = factory.SelfAttribute("session.client")
    route = factory.SubFactory(RouteFactory)
    route_key = factory.SelfAttribute("route.route_key")
    request_id = factory.Sequence(lambda n: f"request-{n}")
    invocation_id = factory.Sequence(lambda n: f"call-{n}")
    tool = "list_orders"
    provider = "shop"
    scope = "shop.orders.read"
    risk = "low"
    readonly = True
    idempotent = True
    method = "GET"
    path = "/orders"
    request_hash = "0" * 64
    args_hash = "0" * 64
    arguments_sealed = ""
    capability_revision = "0" * 64
    execution_fingerprint = "0" * 64
    status = ToolInvocation.Status.EXECUTED
    business_status = 200
