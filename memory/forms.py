"""Forms of the memory pages: the browser's search and filters, the curator's edit, the import upload."""

from __future__ import annotations

from typing import Any

from django import forms

from engine.platforms.registry import language_choices
from memory.models import EntryStatus, MemoryEntry, Polarity

MAX_IMPORT_BYTES = 20 * 1024 * 1024


class EntryFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search", help_text="title, summary or code")
    family = forms.ChoiceField(required=False)
    polarity = forms.ChoiceField(required=False, choices=[("", "any polarity"), *Polarity.choices])
    # The kernel language a lesson was learned in (a Planner sees its own language's, and transferring ones).
    language = forms.ChoiceField(required=False, choices=lambda: [("", "any language"), *language_choices()])
    status = forms.ChoiceField(required=False, choices=[("", "active and pinned"), *EntryStatus.choices, ("all", "all")])
    min_speedup = forms.FloatField(required=False, min_value=0, label="Speedup from")
    max_speedup = forms.FloatField(required=False, min_value=0, label="to")
    run = forms.IntegerField(required=False, min_value=1, label="Source run")

    def __init__(self, *args: Any, families: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["family"].choices = [("", "any family"), *((f, f) for f in families)]


class EntryEditForm(forms.ModelForm):
    class Meta:
        model = MemoryEntry
        fields = ["title", "summary"]
        widgets = {"summary": forms.Textarea(attrs={"rows": 8})}


class ImportForm(forms.Form):
    file = forms.FileField(label="AccelOpt experience file (JSON list)")

    def clean_file(self) -> Any:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_IMPORT_BYTES:
            raise forms.ValidationError(
                f"the file is {upload.size / 1e6:.1f} MB; the import limit is {MAX_IMPORT_BYTES / 1e6:.0f} MB"
            )
        return upload
