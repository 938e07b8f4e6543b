"""The pinned public surfaces: each module's ``__all__``, exactly, one line a module.

A name added to or dropped from a pinned surface is a change to what other modules (and
users) may import, so it shows up here as a one-line diff.
"""

from __future__ import annotations

import importlib

import pytest

#: Module -> its ``__all__``, in order, names separated by spaces.
SURFACES = {
    "conformance.attestation": (
        "PAYLOAD_TYPE PREDICATE_TYPE STATEMENT_TYPE SUBJECTS AttestationError Verified "
        "file_sha256 generate_key key_id load_private_key load_public_key pae sign statement "
        "verify"
    ),
    "conformance.observe.canary": "Canary CanaryHit CanaryView",
    "conformance.observe.receiver": (
        "Canary CanaryHit CanaryView Delivery DeliveryTimeout Endpoint Receiver ReceiverError Reply"
    ),
    "conformance.load": (
        "CHUNK_RECORDS HEADERS MAX_RECORDS RECORDS_WAIT_S WINDOW_S LoadJudgement Record "
        "judge_concurrency judge_daily judge_load max_overlap max_served_in_window"
    ),
    "conformance.provenance": "CATALOG_RESOURCE catalog_sha256 distribution_sha256 tree_sha256",
    "conformance.reports": (
        "ALLURE_DIR HTML_NAME JSON_NAME JUNIT_NAME ReportWriteError Reproduction RunInfo "
        "new_report_dir prepare_report_dir redact_tree render_html results_document write_reports"
    ),
    "conformance.run.cli": (
        "DEFAULT_WORKERS EXIT_FAILED EXIT_HARNESS EXIT_OK EXIT_USAGE exit_code main pytest_args "
        "workers_of"
    ),
    "conformance.run.commands.load": "EXIT_HARNESS locust_request main register",
    "conformance.run.fixtures.client": "adapter api make_api recorder",
    "conformance.run.fixtures.labs": "Labs labs",
    "conformance.run.fixtures.profile": "foreign leases profile profile_path redactor",
    "conformance.run.fixtures.receiver": (
        "canary canary_listeners delivery_target dns_server endpoint final_events make_endpoint "
        "receiver"
    ),
    "conformance.run.launcher": (
        "REFERENCE_COMMAND_ENV EmbeddedReference LaunchError reference_command"
    ),
    "conformance.run.plugin": (
        "CHECK_RESULT_KEY NEEDS_MARKERS REQUIREMENTS_KEY RUN_KEY WORKER_PYTHON_ENV RunState "
        "is_warning run_state"
    ),
    "conformance.secrets": "MASK_PATTERN SENSITIVE_FIELDS Redactor Secret mask_for redact_logs",
    "conformance.target.client": (
        "EXCHANGES_KEY ApiClient BudgetExceeded Recorder ResponseTooLarge parse_retry_after"
    ),
    "conformance.verdicts": (
        "MAX_EXCHANGES SEVERITY CheckResult Coverage Outcome RequirementVerdict RunVerdicts "
        "Verdict aggregate check_judgement check_verdict judge trim_exchanges"
    ),
    "conformance.webhooks": (
        "DEFAULT_TOLERANCE_S DeliveryDeduper WebhookCheck delivery_id_of verify_webhook"
    ),
    "reference.netguard": (
        "MAX_URL_LENGTH PINNED_ADDRESS_EXTENSION CallbackPolicy CallbackRejected "
        "Classification DnsServerResolver EgressRefused GuardedTransport HostNotResolved "
        "HostsFileResolver IPAddress Resolver SystemResolver ValidatedTarget classify "
        "make_delivery_client mask_userinfo"
    ),
}


@pytest.mark.parametrize(("name", "names"), SURFACES.items(), ids=list(SURFACES))
def test_public_surface_is_exactly_the_pinned_names(name: str, names: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__ == names.split()
    for exported in module.__all__:
        assert getattr(module, exported) is not None, f"{name}.{exported}"
