"""Form helpers every app's console pages use: lists typed as text, UTC datetimes, on/off toggles.

Forms only parse what the operator typed; rules about what a valid row *is* live with the owning
app's config validation (shared with ``bailing_apply``), so the console cannot accept a configuration
that the config file would reject, or the other way round.
"""

from __future__ import annotations

import re
from datetime import UTC
from typing import Any

from django import forms

_SPLIT = re.compile(r"[\s,]+")


def split_list(value: str) -> list[str]:
    """``"a, b  c"`` → ``["a", "b", "c"]``; order kept, duplicates left for the validator to reject."""
    return [item for item in _SPLIT.split(value.strip()) if item]


class UTCDateTimeField(forms.DateTimeField):
    """A ``datetime-local`` input read as UTC: the console shows every timestamp in UTC."""

    widget = forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}, format="%Y-%m-%dT%H:%M:%S")
    input_formats = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"]

    def to_python(self, value):
        result = super().to_python(value)
        if result is not None:
            result = result.replace(tzinfo=UTC)
        return result


class EnabledForm(forms.Form):
    """Enable or disable something (a client, a knowledge base): one POSTed choice."""

    enabled = forms.TypedChoiceField(
        choices=[("true", "enable"), ("false", "disable")], coerce=lambda v: v == "true"
    )


def form_filters(form: forms.Form) -> dict[str, Any]:
    """The filled values of a filter ``form``, by field name, for a selector's ``filters``: nothing
    when the form is unbound. Fields that failed to parse are left out (the form shows their errors);
    the others still apply."""
    if not form.is_bound:
        return {}
    form.is_valid()
    return {name: value for name, value in form.cleaned_data.items() if value not in (None, "")}
