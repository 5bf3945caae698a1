"""Who a signed-in hub user is as an agent's principal (the hub's own consent page)."""

from __future__ import annotations

from typing import Any


def user_principal(*, user: Any) -> dict[str, Any]:
    """The signed-in user as the agent's principal: their user name and their roles (the groups they
    are in, by name), so they can grant no more than they are."""
    return {"id": user.get_username(), "roles": sorted(user.groups.values_list("name", flat=True))}
