"""Tool providers (business systems whose OpenAPI + ACC specs the hub compiles) and their compiled tools."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from bailing.api.limits import SHORT_TEXT_MAX_CHARS


class ToolProvider(models.Model):
    """A business system whose OpenAPI + ACC spec the hub compiles into tools.

    The spec comes from a URL on the provider (``spec_source="url"``, fetched with a signed GET and,
    under ``signed_required``, negative probes; docs/protocol.md "Tool provider refresh") or inline
    from config. ``spec_json`` always holds the last spec that compiled: a failed refresh records why
    in ``last_refresh_*`` and keeps it. The HMAC secret is stored only encrypted
    (``secret_encrypted``, see ``agent_runtime.secrets_box``).
    """

    class SpecSource(models.TextChoices):
        URL = "url"
        INLINE = "inline"

    class AccessPolicy(models.TextChoices):
        SIGNED_REQUIRED = "signed_required"
        PUBLIC_ALLOWED = "public_allowed"

    name = models.CharField(max_length=64, unique=True)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    base_url = models.CharField(max_length=2048)
    spec_source = models.CharField(max_length=8, choices=SpecSource.choices, default=SpecSource.URL)
    spec_url = models.CharField(max_length=2048, blank=True, default="/.well-known/bailing/tools.json")
    spec_inline = models.JSONField(null=True, blank=True)
    spec_access_policy = models.CharField(
        max_length=16, choices=AccessPolicy.choices, default=AccessPolicy.SIGNED_REQUIRED
    )
    secret_encrypted = models.TextField(blank=True, default="", editable=False)
    secret_set_at = models.DateTimeField(null=True, blank=True, editable=False)
    timeout_ms = models.PositiveIntegerField(default=10000)
    rate_limit_per_min = models.PositiveIntegerField(default=120)
    # At most this many calls of this provider in flight per hub process (its bulkhead); NULL = the
    # hub's default, BAILING_PROVIDER_MAX_CONCURRENT_CALLS.
    max_concurrent_calls = models.PositiveIntegerField(null=True, blank=True)
    auto_refresh_min = models.PositiveIntegerField(default=0)
    # Last good spec and what compiling it said.
    spec_json = models.JSONField(null=True, blank=True, editable=False)
    spec_sha256 = models.CharField(max_length=64, blank=True, default="", editable=False)
    spec_refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)
    compile_warnings = models.JSONField(default=list, blank=True, editable=False)
    # The most recent refresh attempt, successful or not.
    last_refresh_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_refresh_status = models.CharField(max_length=16, default="never", editable=False)
    last_refresh_error = models.CharField(max_length=500, blank=True, default="", editable=False)
    access_probe = models.JSONField(default=dict, blank=True, editable=False)
    # The authorization probe after the latest successful refresh (agent_runtime.services.authz_probe).
    authz_probe = models.JSONField(default=dict, blank=True, editable=False)
    # Bumped by a database trigger on every INSERT/UPDATE of the provider or any write of its tools
    # (a value of one shared sequence, never reused), so per-process caches keyed by it see any
    # change, even one made with raw SQL (bailing.versioned, migration 0008).
    version = models.BigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ProviderTool(models.Model):
    """One compiled tool of a provider's last good spec.

    ``compiled`` is ``CompiledTool.as_dict()``; the projection, guidance, fingerprint and material
    digest are derived from it when the spec is stored, so reads never recompile. Rows are replaced
    as a set whenever a refresh succeeds.
    """

    provider = models.ForeignKey(ToolProvider, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=64)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=2048)
    scope = models.CharField(max_length=SHORT_TEXT_MAX_CHARS)
    risk = models.CharField(max_length=8)
    readonly = models.BooleanField()
    idempotent = models.BooleanField()
    approval_required = models.BooleanField()
    requires_subject = models.BooleanField()
    compiled = models.JSONField()
    projection = models.JSONField()
    usage_guidance = models.JSONField()
    execution_fingerprint = models.CharField(max_length=64)
    material_digest = models.CharField(max_length=64)
    warnings = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["provider_id", "name"]
        constraints = [models.UniqueConstraint(fields=["provider", "name"], name="provider_tool_unique_name")]

    def __str__(self) -> str:
        return f"{self.provider_id}:{self.name}"
