"""Client writes: creation from the console, token rotation and enabling/disabling (creation and
update from config files live in ``agent_runtime.services.config_apply``).
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from agent_runtime.config import ConfigError
from agent_runtime.config.clients import CLIENT_FIELDS
from agent_runtime.errors import ClientExists
from agent_runtime.models import Client
from agent_runtime.secrets_box import SealedKind, SealedSecretError
from agent_runtime.tokens import CLIENT_TOKEN_PREFIX, display_prefix, new_secret, secret_hash
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record

# A sealed Client Token (context: the client's app_id). A token is its prefix and 43 base64url
# characters (``new_secret``); the bound leaves room for a longer format without admitting much more.
CLIENT_TOKEN = SealedKind("client.token", max_plaintext_bytes=256)


def client_create(*, data: dict, actor: Actor) -> Client:
    """Create the client ``data["app_id"]`` (validated by ``validate_client_config``); 409
    ``client_exists`` if that App ID is taken.

    Unlike a config file's upsert, creating never overwrites: the unique App ID decides in the
    database, so of two concurrent creates exactly one wins and the other gets the error. The new
    client has no Client Token until one is rotated. ``mcp_sign_in`` while another client has it is
    a ``ConfigError`` at ``client.mcp_sign_in`` (at most one client has it).
    """
    taken = ConfigError("client.mcp_sign_in", "another client already has it")
    if data.get("mcp_sign_in") and Client.objects.filter(mcp_sign_in=True).exists():
        raise taken
    try:
        with transaction.atomic():
            client = Client.objects.create(
                app_id=data["app_id"], **{name: data[name] for name in CLIENT_FIELDS}
            )
            audit_record(
                action="agent_runtime.client.created",
                actor=actor,
                client_app_id=client.app_id,
                target_type="client",
                target_id=client.app_id,
                data={"fields": list(CLIENT_FIELDS)},
            )
    except IntegrityError as exc:
        if _violated_constraint(exc) == "one_mcp_sign_in_client":
            raise taken from None
        raise ClientExists() from None
    return client


def _violated_constraint(exc: IntegrityError) -> str | None:
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None)


def client_token_rotate(*, client: Client, actor: Actor) -> str:
    """Give ``client`` a new Client Token; the old one stops working at once. Returns the plaintext once."""
    token = new_secret(CLIENT_TOKEN_PREFIX)
    _client_token_store(client=client, token=token, actor=actor)
    return token


def client_token_set(*, client: Client, token: str, actor: Actor) -> None:
    """Give ``client`` a Client Token chosen elsewhere (the demo seed shares one with the Demo Shop
    through a 0600 file). The same rules as a rotation: hashed, sealed, audited, shown nowhere."""
    if (
        not isinstance(token, str)
        or not 20 <= len(token) <= 256
        or not token.isascii()
        or not token.isprintable()
    ):
        raise ValueError("a Client Token is 20-256 printable ASCII characters")
    _client_token_store(client=client, token=token, actor=actor)


def client_token_plaintext(client: Client) -> str | None:
    """The client's current Client Token, for signing approval webhooks and verifying signed
    decisions with the token the business system holds; None when no sealed copy exists (a token
    issued before the hub kept one: rotate it) or it cannot be opened (``SECRET_KEY`` changed)."""
    if not client.token_sealed:
        return None
    try:
        return CLIENT_TOKEN.open(client.token_sealed, context=client.app_id)
    except SealedSecretError:
        return None


def _client_token_store(*, client: Client, token: str, actor: Actor) -> None:
    with transaction.atomic():
        locked = Client.objects.select_for_update().get(pk=client.pk)
        locked.token_hash = secret_hash(token)
        locked.token_prefix = display_prefix(token)
        locked.token_sealed = CLIENT_TOKEN.seal(token, context=locked.app_id)
        locked.token_rotated_at = timezone.now()
        locked.save(
            update_fields=["token_hash", "token_prefix", "token_sealed", "token_rotated_at", "updated_at"]
        )
        audit_record(
            action="agent_runtime.client.token_rotated",
            actor=actor,
            client_app_id=locked.app_id,
            target_type="client",
            target_id=locked.app_id,
            data={"token_prefix": locked.token_prefix},
        )
    client.refresh_from_db()


def client_set_enabled(*, client: Client, enabled: bool, actor: Actor) -> Client:
    """Enable or disable a client. Disabling makes every agent session of it unusable on the next
    request (sessions are revalidated, not revoked, so re-enabling restores them)."""
    with transaction.atomic():
        locked = Client.objects.select_for_update().get(pk=client.pk)
        if locked.enabled != enabled:
            locked.enabled = enabled
            locked.save(update_fields=["enabled", "updated_at"])
            audit_record(
                action="agent_runtime.client.enabled" if enabled else "agent_runtime.client.disabled",
                actor=actor,
                client_app_id=locked.app_id,
                target_type="client",
                target_id=locked.app_id,
            )
    client.refresh_from_db()
    return client
