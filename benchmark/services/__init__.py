"""What the benchmark app does: problems from suites, kernels, and cached, sandboxed evaluations.

Views, the ninja API and the management commands all call these functions; none of them does the work
itself. `from benchmark import services` and `from benchmark.services import X` reach every public name
below; each lives in the module of its concern, and the modules depend on each other in this order only:

    access        who may see and change what: can_create_kernels, visible_problems/kernels, shareable_kernels,
                  get_problem/kernel/evaluation_for_user, parse_problem_address, get_problem_by_address,
                  get_problem_by_reference (id or address), find_problems, other_cases, mini_sibling,
                  kernel_evaluations
    queue         where pending evaluations stand: queue_places, queue_order, QueuePlace, elapsed_text
    evaluations   the evaluation lifecycle and its executor: request_evaluation, check_platform_for, run_evaluation_now,
                  get/set_executor, save_result, cancel_evaluations, cancel_pending_evaluations, wait_for_evaluations, evaluation_is_stale,
                  evaluate_source, backend_version, limits_for, reference_limits, reference_size,
                  evaluation_request_for, finished_result, backend_options (a kernel page's backend choices)
    identical     the normalized-source cache: IdenticalSources (a twin's stored result), copy_evaluation
                  (uses evaluations)
    kernels       storing kernels and users' problems: create_kernel, create_custom_problem, upload_kernel,
                  source_sha256, kernel_source_limit, CUSTOM_SUITE  (uses access, evaluations)
    generations   the NKI generations: migrate_kernel (a legacy neuronxcc.nki kernel -> its NKI 0.6 version, a new
                  kernel evaluated like an upload), migration_of (what a migrated kernel changed, for its page)
                  (uses access, evaluations, kernels)
    ranking       what counts and what is best: best_evaluation, best_of, preferred_evaluation,
                  kernel_row_sort_key, theoretical_peaks, current_evaluations, problems_with_baselines,
                  problem_kernel_rows, find_kernels (uses access, evaluations)
    suites        problems in bulk: load_suite, import_nkibench, LoadSummary, ImportSummary, IMPORTED_SUITE
                  (uses evaluations, kernels)
    flashinfer    FlashInfer-Bench in and out: import_flashinfer (definitions, workloads, solutions as Triton
                  problems and kernels), flashinfer_items_from_paths/texts/payload, export_solution,
                  exportable_kernel, FLASHINFER_SUITE (uses evaluations, kernels, ranking)

`benchmark.review` (the curators' queue) builds on `access`; nothing here imports it.
"""

from __future__ import annotations

from benchmark.services.access import (
    can_create_kernels,
    find_problems,
    get_evaluation_for_user,
    get_kernel_for_user,
    get_problem_by_address,
    get_problem_by_reference,
    get_problem_for_user,
    kernel_evaluations,
    mini_sibling,
    other_cases,
    parse_problem_address,
    shareable_kernels,
    source_audience,
    visible_evaluations,
    visible_kernels,
    visible_problems,
)
from benchmark.services.evaluations import (
    CANCELLED_PREFIX,
    backend_options,
    backend_version,
    cancel_evaluations,
    cancel_pending_evaluations,
    check_platform_for,
    evaluate_source,
    evaluation_is_stale,
    evaluation_request_for,
    finished_result,
    get_executor,
    limits_for,
    reference_limits,
    reference_size,
    request_evaluation,
    run_evaluation_now,
    save_result,
    set_executor,
    wait_for_evaluations,
)
from benchmark.services.flashinfer import (
    FLASHINFER_SUITE,
    FlashInferImportSummary,
    FlashInferItems,
    export_solution,
    exportable_kernel,
    import_flashinfer,
)
from benchmark.services.flashinfer import items_from_paths as flashinfer_items_from_paths
from benchmark.services.flashinfer import items_from_payload as flashinfer_items_from_payload
from benchmark.services.flashinfer import items_from_texts as flashinfer_items_from_texts
from benchmark.services.generations import MigratedKernel, migrate_kernel, migration_of
from benchmark.services.identical import IdenticalSources, copy_evaluation
from benchmark.services.kernels import (
    CUSTOM_SUITE,
    create_custom_problem,
    create_kernel,
    kernel_source_limit,
    source_sha256,
    upload_kernel,
)
from benchmark.services.queue import QueuePlace, elapsed_text, queue_order, queue_places
from benchmark.services.ranking import (
    best_evaluation,
    best_of,
    current_evaluations,
    find_kernels,
    kernel_row_sort_key,
    preferred_evaluation,
    problem_kernel_rows,
    problems_with_baselines,
    theoretical_peaks,
)
from benchmark.services.suites import IMPORTED_SUITE, ImportSummary, LoadSummary, import_nkibench, load_suite

__all__ = [
    "MigratedKernel", "migrate_kernel", "migration_of", "source_audience", "shareable_kernels", "mini_sibling", "finished_result", "IdenticalSources", "copy_evaluation",
    "FLASHINFER_SUITE", "FlashInferImportSummary", "FlashInferItems", "export_solution", "exportable_kernel",
    "flashinfer_items_from_paths", "flashinfer_items_from_payload", "flashinfer_items_from_texts", "import_flashinfer",
    "CUSTOM_SUITE", "IMPORTED_SUITE", "ImportSummary", "LoadSummary", "backend_options", "backend_version", "best_evaluation",
    "CANCELLED_PREFIX", "cancel_evaluations", "cancel_pending_evaluations", "check_platform_for",
    "best_of", "can_create_kernels", "create_custom_problem", "create_kernel", "current_evaluations",
    "evaluate_source", "evaluation_is_stale", "evaluation_request_for", "find_kernels", "find_problems",
    "get_evaluation_for_user", "get_executor", "get_kernel_for_user", "get_problem_by_address",
    "get_problem_by_reference", "get_problem_for_user", "import_nkibench", "kernel_evaluations",
    "kernel_row_sort_key", "kernel_source_limit", "limits_for", "load_suite", "other_cases",
    "parse_problem_address", "preferred_evaluation", "problem_kernel_rows", "problems_with_baselines",
    "reference_limits", "reference_size", "request_evaluation", "run_evaluation_now", "save_result",
    "set_executor", "source_sha256", "theoretical_peaks", "upload_kernel", "visible_evaluations", "visible_kernels",
    "visible_problems", "wait_for_evaluations", "QueuePlace", "elapsed_text", "queue_order", "queue_places",
]
