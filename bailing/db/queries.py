"""Query helpers every app's selectors use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet


def filter_by(queryset: QuerySet, filters: Mapping[str, Any] | None, lookups: Mapping[str, str]) -> QuerySet:
    """Narrow ``queryset`` by each filled value ``filters[name]`` as ``lookups[name]`` (one ``filter``
    call each, in ``lookups`` order). Empty values (None, ``""``) and names without a lookup are not
    applied; a selector handles those names itself."""
    filters = filters or {}
    for name, lookup in lookups.items():
        value = filters.get(name)
        if value not in (None, ""):
            queryset = queryset.filter(**{lookup: value})
    return queryset
