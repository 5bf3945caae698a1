"""Console forms of the operators' app: the audit history filter."""

from __future__ import annotations

from django import forms

from bailing.ui.forms import UTCDateTimeField


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=200)
    # "Action" and a placeholder rather than "Action (prefix)": the bar keeps its seven fields on one
    # line at 1280 px, and a wrapped label would push its field out of line.
    action = forms.CharField(
        required=False,
        max_length=100,
        help_text="prefix",
        label="Action",
        widget=forms.TextInput(attrs={"placeholder": "prefix"}),
    )
    client = forms.CharField(required=False, max_length=64)
    session = forms.UUIDField(required=False, label="Session ID")
    route = forms.CharField(required=False, max_length=128, label="Workspace")
    since = UTCDateTimeField(required=False, label="From (UTC)")
    until = UTCDateTimeField(required=False, label="To (UTC)")

    def clean(self):
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "must not be before From")
        return data
