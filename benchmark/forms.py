"""The kernel upload form: a problem (or the user's own reference file), a platform, and the source; the
FlashInfer-Bench import form."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from benchmark.models import Problem
from benchmark.services import kernel_source_limit
from benchmark.services.flashinfer import MAX_FILE_BYTES as FLASHINFER_MAX_FILE_BYTES
from benchmark.sizes import human_bytes
from engine.platforms.registry import DEFAULT_PLATFORM, FLASHINFER_FORMAT, platform_choices, platforms_storing


def _read_text_upload(upload: UploadedFile, what: str) -> str:
    limit = kernel_source_limit()
    if upload.size is not None and upload.size > limit:
        raise forms.ValidationError(f"the {what} is {human_bytes(upload.size)}; the limit is {human_bytes(limit)}")
    data = upload.read(limit + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise forms.ValidationError(
            f"the {what} is not UTF-8 text (byte {error.start}); upload a Python source file"
        ) from None


class KernelUploadForm(forms.Form):
    problem = forms.ModelChoiceField(
        queryset=Problem.objects.none(),
        required=False,
        empty_label="— choose a problem —",
        help_text="The problem and shape case the kernel solves.",
    )
    reference_file = forms.FileField(
        required=False,
        label="…or your own reference",
        help_text="A reference in NKIBench's format (get_inputs, forward, transform_to_nki_inputs, "
        "transform_nki_outputs). It becomes a private problem. Its peak counts are the three below when you give "
        "them; otherwise the bytes of its inputs and outputs are measured and FLOPs not counted (the HBM roofline).",
    )
    vector_flops = forms.IntegerField(required=False, min_value=0, label="Vector FLOPs (own reference)")
    matmul_flops = forms.IntegerField(required=False, min_value=0, label="Matmul FLOPs (own reference)")
    hbm_bytes = forms.IntegerField(required=False, min_value=1, label="HBM bytes (own reference)")
    platform = forms.ChoiceField(choices=platform_choices, initial=DEFAULT_PLATFORM)
    kernel_file = forms.FileField(required=False, label="Kernel file (.py)")
    source = forms.CharField(
        required=False,
        strip=False,  # the source is stored exactly as given (its sha256 identifies the kernel)
        label="…or paste the source",
        widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false", "class": "code-input"}),
    )

    def __init__(self, *args: Any, problems: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if problems is not None:
            self.fields["problem"].queryset = problems
        self.fields["problem"].label_from_instance = lambda problem: (
            f"{problem.address} — {problem.shape_text}" if problem.shape_text else problem.address
        )

    def clean(self) -> dict[str, Any]:
        # Every missing piece is reported at once, on its own field: an empty form says both what problem and
        # what kernel are missing, instead of one error per submit.
        data = super().clean()
        kernel_file, pasted = data.get("kernel_file"), (data.get("source") or "")
        if kernel_file and pasted.strip():
            self.add_error(None, "give the kernel either as a file or pasted, not both")
        elif kernel_file:
            data["kernel_source"] = _read_text_upload(kernel_file, "kernel file")
            data["kernel_name"] = kernel_file.name
        elif pasted.strip():
            data["kernel_source"] = pasted.replace("\r\n", "\n")  # browsers send textarea lines with CRLF
            data["kernel_name"] = ""
        elif "kernel_file" not in self.errors:
            self.add_error("source", "upload a kernel file or paste its source")
        reference = data.get("reference_file")
        if data.get("problem") and reference:
            self.add_error(None, "choose a problem or upload a reference, not both")
        counts = [data.get(name) for name in ("vector_flops", "matmul_flops", "hbm_bytes")]
        data["peak_counts"] = None
        if any(count is not None for count in counts):
            if not reference:
                self.add_error(None, "FLOP and byte counts are for your own reference; a built-in problem has its own")
            elif None in counts:
                self.add_error(None, "give all three counts (vector FLOPs, matmul FLOPs, HBM bytes), or none")
            else:
                data["peak_counts"] = tuple(counts)
        if reference:
            data["reference_source"] = _read_text_upload(reference, "reference file")
            data["reference_name"] = reference.name
        elif not data.get("problem") and "problem" not in self.errors:
            self.add_error("problem", "choose a problem, or upload your own reference file")
        return data


class _MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class _MultipleFileField(forms.FileField):
    """Several files in one field (Django's FileField takes one): the cleaned value is a list."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", _MultipleFileInput(attrs={"accept": ".json,.jsonl"}))
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        files = data if isinstance(data, (list, tuple)) else [data]
        return [super(_MultipleFileField, self).clean(item, initial) for item in files]


class FlashInferImportForm(forms.Form):
    """FlashInfer-Bench files for `services.import_flashinfer`: definitions, workloads and solutions at once."""

    files = _MultipleFileField(
        label="FlashInfer-Bench files",
        help_text="Definitions (.json: axes, inputs, outputs, reference), workloads (.jsonl, one per line) and "
        "solutions (.json: spec, sources). Select several at once. Nothing is stored if any file is wrong.",
    )
    platform = forms.ChoiceField(choices=[(p.value, p.label) for p in platforms_storing(FLASHINFER_FORMAT)],
                                 help_text="The GPU the problems are for.")
    evaluate = forms.BooleanField(required=False, initial=True,
                                  help_text="Evaluate every imported solution on the platform's default backend.")

    def clean_files(self) -> list[tuple[str, str]]:
        uploads = self.cleaned_data["files"]
        named = []
        for upload in uploads:
            if upload.size is not None and upload.size > FLASHINFER_MAX_FILE_BYTES:
                raise forms.ValidationError(
                    f"{upload.name} is {upload.size / 2**20:.1f} MiB; the limit is {FLASHINFER_MAX_FILE_BYTES // 2**20} MiB"
                )
            try:
                named.append((upload.name, upload.read().decode("utf-8")))
            except UnicodeDecodeError as error:
                raise forms.ValidationError(f"{upload.name} is not UTF-8 text (byte {error.start})") from None
        return named
