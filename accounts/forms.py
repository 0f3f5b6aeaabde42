from __future__ import annotations

from django import forms


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        label="Token name",
        help_text="What the token is for, e.g. 'laptop CLI' or 'CI'.",
        widget=forms.TextInput(attrs={"placeholder": "laptop CLI", "autocomplete": "off"}),
    )
