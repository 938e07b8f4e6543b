"""The fault registry: deliberate, named deviations from the spec.

Each fault breaks exactly one catalogued requirement (``conformance/requirements.yaml``)
so the suite can prove it catches that deviation. Start the service with
``--fault NAME`` (repeatable); ``python -m reference faults`` lists them. With no fault
configured every check is a lookup in an empty frozenset.

To add a fault: append one ``Fault(...)`` line to ``_REGISTRY`` below (keep the table
sorted by owner, then name) and make the code path ask ``faults.on("name")``. A test
(``tests/reference/test_faults.py``) checks every id exists in the catalog and that every
fault changes behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["FAULTS", "Fault", "Faults", "UnknownFault"]


@dataclass(frozen=True)
class Fault:
    """One injectable deviation: its name, the requirement id it violates, what it does."""

    name: str
    requirement_id: str
    description: str


_REGISTRY: tuple[Fault, ...] = (
    # --- service core (engineer CORE) ---
    Fault("api-key-opens-console", "CONSOLE-KEY-05", "an API key opens /api console paths"),
    Fault("concurrency-not-enforced", "RATE-CONC-01", "the per-tier concurrency limit is ignored"),
    Fault("console-tier-differs", "CONSOLE-TIER-01", "GET /api/tier reports another tier"),
    Fault("credit-cap-not-enforced", "CREDIT-CAP-01", "the daily credit cap is ignored"),
    Fault("credits-not-spent", "CREDIT-SPEND-01", "generations spend no credits"),
    Fault(
        "credits-spent-before-validation",
        "TARGET-ID-03",
        "credits are spent before the delivery target is checked, and kept on 404/400",
    ),
    Fault(
        "enforced-limit-below-reported",
        "RATE-RPM-01",
        "the per-minute limit enforced is 5 below the tier record's requests_per_minute",
    ),
    Fault("failed-not-refunded", "CREDIT-REFUND-01", "a failed generation keeps its credits"),
    Fault(
        "failure-output-url-set",
        "EVT-DATA-06",
        "a failed generation carries an output_url (and no error_message)",
    ),
    Fault("generation-id-missing", "GEN-ID-01", "the 202 response of a submit has no id"),
    Fault("key-limit-not-enforced", "KEY-LIMIT-01", "an account may hold more than 10 keys"),
    Fault("key-prefix-wrong", "KEY-PREFIX-01", "new API keys lack the <key_prefix>_ prefix"),
    Fault("key-shown-again", "KEY-ONCE-02", "the key detail view repeats the full secret value"),
    Fault("missing-retry-after", "RATE-HDR-01", "429 responses lack the Retry-After header"),
    Fault(
        "model-category-not-enforced",
        "TIER-MODEL-01",
        "submits for a model category outside the tier are accepted",
    ),
    Fault("rate-limit-headers-missing", "RATE-HDR-03", "429 responses lack X-RateLimit-*"),
    Fault("rate-limit-never-enforced", "RATE-RPM-02", "the per-minute request limit is ignored"),
    Fault(
        "revocation-delayed",
        "KEY-REVOKE-01",
        "keys are cached for 60 s, so a revoked key keeps working for a while",
    ),
    Fault("revoked-key-accepted", "KEY-REVOKE-02", "a revoked key keeps working"),
    Fault("scope-not-enforced", "SCOPE-DENY-01", "keys may call endpoints outside their scopes"),
    Fault(
        "session-signature-not-checked",
        "CONSOLE-SESSION-02",
        "console JWTs are accepted without checking their signature",
    ),
    Fault(
        "signing-secret-on-v1",
        "SIG-KEY-05",
        "GET /v1/generations/{id} shows the key's webhook signing secret",
    ),
    Fault("status-200-instead-of-202", "GEN-IMAGE-07", "submits answer 200 instead of 202"),
    Fault(
        "tier-endpoint-wrong-type",
        "TIER-FIELD-02",
        "the tier record gives requests_per_minute as a string",
    ),
    Fault(
        "tier-allowed-model-types-wrong-type",
        "TIER-FIELD-06",
        "the tier record gives allowed_model_types as one comma-separated string",
    ),
    Fault(
        "tier-concurrent-limit-wrong-type",
        "TIER-FIELD-04",
        "the tier record gives concurrent_limit as a string",
    ),
    Fault(
        "tier-max-credits-wrong-type",
        "TIER-FIELD-05",
        "the tier record gives max_credits_per_day as a string",
    ),
    Fault(
        "tier-plan-code-wrong-type",
        "TIER-FIELD-01",
        "the tier record gives plan_code as an object instead of a string",
    ),
    Fault("tier-read-refused", "TIER-READ-01", "GET /v1/account/tier answers 404 to a valid key"),
    Fault(
        "tier-requests-per-day-wrong-type",
        "TIER-FIELD-03",
        "the tier record gives requests_per_day as a string",
    ),
    # --- authentication, scopes, console separation, keys (engineer CHECKS-AUTH) ---
    Fault("api-key-creates-webhooks", "CONSOLE-KEY-01", "POST /api/webhooks accepts an API key"),
    Fault(
        "api-key-deletes-webhooks",
        "CONSOLE-KEY-04",
        "DELETE /api/webhooks/{id} accepts an API key",
    ),
    Fault("api-key-lists-webhooks", "CONSOLE-KEY-02", "GET /api/webhooks accepts an API key"),
    Fault(
        "api-key-tests-webhooks",
        "CONSOLE-KEY-03",
        "POST /api/webhooks/{id}/test accepts an API key",
    ),
    Fault(
        "console-open-without-session",
        "CONSOLE-SESSION-01",
        "console paths without credentials act for the oldest account",
    ),
    Fault(
        "created-key-truncated",
        "KEY-ONCE-01",
        "the key returned at creation lacks its last 4 characters",
    ),
    Fault(
        "edit-needs-images-generate",
        "SCOPE-EDIT-02",
        "POST /v1/images/edit also demands images:generate",
    ),
    Fault("edit-scope-not-enforced", "SCOPE-EDIT-01", "POST /v1/images/edit ignores its scope"),
    Fault(
        "images-needs-all-scopes",
        "SCOPE-IMAGES-02",
        "POST /v1/images/generate demands every scope, not only images:generate",
    ),
    Fault(
        "images-scope-not-enforced",
        "SCOPE-IMAGES-01",
        "POST /v1/images/generate ignores its scope",
    ),
    Fault("key-detail-without-scopes", "KEY-VIEW-01", "the key detail view omits the scopes"),
    Fault("key-name-ignored", "KEY-NAME-01", "keys are stored without the name given"),
    Fault(
        "key-prefix-per-account",
        "KEY-PREFIX-02",
        "each account's keys get their own prefix (<key_prefix><account suffix>_)",
    ),
    Fault(
        "key-scope-wildcard",
        "KEY-SCOPE-01",
        "keys created in the console carry an extra scope 'all' beyond the five",
    ),
    Fault(
        "malformed-authorization-accepted",
        "AUTH-KEY-03",
        "the key is taken from any Authorization form (no scheme, another scheme)",
    ),
    Fault(
        "missing-key-accepted",
        "AUTH-KEY-01",
        "a /v1 request without Authorization acts with the oldest active key",
    ),
    Fault(
        "new-key-not-active",
        "KEY-CREATE-01",
        "keys created in the console do not authenticate (stored under another hash)",
    ),
    Fault(
        "scope-agent-run-refused",
        "SCOPE-NAMES-01",
        "creating a key with the agent:run scope is refused",
    ),
    Fault(
        "scope-images-edit-refused",
        "SCOPE-NAMES-02",
        "creating a key with the images:edit scope is refused",
    ),
    Fault("session-refused-on-tier", "CONSOLE-SESSION-03", "GET /api/tier refuses valid sessions"),
    Fault("tier-refuses-keys", "AUTH-BEARER-01", "GET /v1/account/tier refuses valid keys"),
    Fault(
        "unknown-key-accepted",
        "AUTH-KEY-02",
        "an unknown key of the right shape acts as the oldest active key",
    ),
    Fault(
        "video-needs-images-generate",
        "SCOPE-VIDEO-02",
        "POST /v1/videos/generate also demands images:generate",
    ),
    Fault(
        "video-scope-not-enforced",
        "SCOPE-VIDEO-01",
        "POST /v1/videos/generate ignores its scope",
    ),
    Fault(
        "webhook-created-without-secret",
        "CONSOLE-HOOK-01",
        "POST /api/webhooks answers without the signing secret",
    ),
    Fault(
        "webhook-delete-ignored",
        "CONSOLE-HOOK-05",
        "DELETE /api/webhooks/{id} answers 204 but keeps the webhook",
    ),
    Fault(
        "webhook-list-omits-newest",
        "CONSOLE-HOOK-02",
        "GET /api/webhooks leaves out the newest webhook",
    ),
    Fault("webhook-secret-listed", "HOOK-SECRET-02", "GET /api/webhooks shows each secret"),
    Fault(
        "webhook-secret-unprefixed",
        "HOOK-SECRET-01",
        "registered webhooks get a secret without the whsec_ prefix",
    ),
    Fault(
        "webhook-test-sends-nothing",
        "CONSOLE-HOOK-03",
        "POST /api/webhooks/{id}/test answers success without sending",
    ),
    Fault(
        "empty-scopes-accepted",
        "KEY-SCOPE-02",
        "a key can be created with no scope at all",
    ),
    Fault(
        "revoked-keys-count-toward-limit",
        "KEY-LIMIT-03",
        "revoked keys still count toward the 10-active-keys limit",
    ),
    Fault(
        "webhook-list-all-accounts",
        "CONSOLE-HOOK-07",
        "GET /api/webhooks lists the webhooks of every account",
    ),
    # --- webhooks (engineer WEBHOOKS) ---
    Fault(
        "accepts-private-callback",
        "URL-PRIV-01",
        "callback targets are not validated: private and loopback URLs are accepted",
    ),
    Fault("backoff-too-short", "DLV-BACKOFF-01", "retries follow after 0.1 s instead of 1 s / 2 s"),
    Fault(
        "callback-body-not-flattened",
        "TARGET-FLAT-02",
        "callback_url deliveries carry the strict envelope without top-level data fields",
    ),
    Fault(
        "cancelled-sent-unsubscribed",
        "EVT-CANCEL-01",
        "generation.cancelled is delivered to bindings that did not subscribe to it",
    ),
    Fault(
        "created-at-without-offset",
        "EVT-ENV-03",
        "the envelope's created_at carries no UTC offset",
    ),
    Fault(
        "delivery-header-mismatch",
        "DLV-HDR-03",
        "X-Service-Delivery differs from the body id",
    ),
    Fault("envelope-missing-api-version", "VER-ENV-01", "the envelope has no api_version"),
    Fault("follows-redirects", "DLV-REDIRECT-01", "deliveries follow 3xx redirects"),
    Fault("fourth-attempt", "DLV-EXHAUST-01", "a fourth automatic attempt follows the third"),
    Fault("no-retry", "DLV-RETRY-01", "a failed attempt is never retried"),
    Fault(
        "precedence-callback-first",
        "TARGET-ORDER-01",
        "callback_url wins over webhook.url and webhook.id",
    ),
    Fault(
        "redeliver-new-event-id",
        "REDLV-PAYLOAD-02",
        "a redelivery carries a new event id instead of the original one",
    ),
    Fault(
        "redeliver-skips-revalidation",
        "REDLV-REBIND-01",
        "redeliver resolves the target again but sends without checking the address",
    ),
    Fault(
        "signature-over-reserialized-body",
        "SIG-STRING-01",
        "the signature is computed over a re-serialized body, not the bytes sent",
    ),
    Fault(
        "signature-wrong-key",
        "SIG-KEY-01",
        "deliveries are signed with a secret other than the webhook's or the key's",
    ),
    Fault(
        "unknown-outcome-accepted",
        "REC-HOOK-05",
        "an unknown outcome filter value is ignored instead of answered 400",
    ),
    Fault(
        "webhook-id-not-null-inline",
        "EVT-ENV-05",
        "inline (webhook.url) envelopes carry a webhook_id",
    ),
    # --- callback URL rules, target selection (engineer CHECKS-URL; webhooks/url_faults.py) ---
    Fault("bad-target-422", "TARGET-URL-01", "a callback target failing validation gets 422"),
    Fault("callback-hostless-accepted", "URL-RESOLVE-07", "a URL without a host is accepted"),
    Fault("callback-http-refused", "URL-SCHEME-01", "http callback URLs are refused"),
    Fault("callback-https-refused", "URL-SCHEME-02", "https callback URLs are refused"),
    Fault(
        "callback-ipv4-special-accepted",
        "URL-IANA-01",
        "IPv4 documentation, benchmarking, IETF, reserved and broadcast hosts are accepted",
    ),
    Fault(
        "callback-ipv4-spelling-unchecked",
        "URL-LOOP-03",
        "numeric spellings of loopback (127.2, 2130706434, 0x7f000002) are accepted",
    ),
    Fault("callback-ipv6-link-local-accepted", "URL-LINK-03", "fe80::/10 hosts are accepted"),
    Fault("callback-ipv6-loopback-accepted", "URL-LOOP-02", "the [::1] host is accepted"),
    Fault("callback-ipv6-metadata-accepted", "URL-LINK-04", "[fd00:ec2::254] is accepted"),
    Fault(
        "callback-ipv6-special-accepted",
        "URL-IANA-02",
        "IPv6 documentation, discard-only, benchmarking, IETF and SRv6 hosts are accepted",
    ),
    Fault("callback-ipv6-unspecified-accepted", "URL-UNSPEC-02", "the [::] host is accepted"),
    Fault("callback-length-unchecked", "URL-LEN-02", "callback URLs over 2048 characters pass"),
    Fault("callback-limit-2047", "URL-LEN-01", "callback URLs of 2048 characters are refused"),
    Fault("callback-link-local-accepted", "URL-LINK-01", "169.254.0.0/16 hosts are accepted"),
    Fault(
        "callback-loopback-accepted",
        "URL-LOOP-01",
        "dotted IPv4 loopback hosts (127.0.0.0/8) are accepted",
    ),
    Fault("callback-mapped-unchecked", "URL-MAPPED-01", "IPv4-mapped IPv6 hosts are accepted"),
    Fault("callback-metadata-accepted", "URL-LINK-02", "the metadata host 169.254.169.254 passes"),
    Fault(
        "callback-name-address-unchecked",
        "URL-RESOLVE-02",
        "the addresses a callback host name resolves to are not checked (literals are)",
    ),
    Fault("callback-private-172-accepted", "URL-PRIV-02", "172.16.0.0/12 hosts are accepted"),
    Fault("callback-private-192-accepted", "URL-PRIV-03", "192.168.0.0/16 hosts are accepted"),
    Fault("callback-scheme-unchecked", "URL-SCHEME-03", "callback URLs of any scheme pass"),
    Fault(
        "callback-shared-space-accepted",
        "URL-PRIV-04",
        "100.64.0.0/10 hosts (with the metadata address 100.100.100.200) are accepted",
    ),
    Fault("callback-unique-local-accepted", "URL-PRIV-05", "fc00::/7 hosts are accepted"),
    Fault(
        "callback-unresolvable-accepted",
        "URL-RESOLVE-01",
        "a callback host name that does not resolve is accepted",
    ),
    Fault(
        "callback-unspecified-accepted",
        "URL-UNSPEC-01",
        "0.0.0.0/8 hosts (0.0.0.0 included) are accepted",
    ),
    Fault("callback-url-ignored", "TARGET-ORDER-03", "a callback_url binds no target"),
    Fault(
        "credits-kept-on-bad-target",
        "TARGET-URL-02",
        "a submit refused for its callback target spends its credits all the same",
    ),
    Fault(
        "foreign-webhook-id-accepted",
        "TARGET-ID-02",
        "webhook.id may name another account's registered webhook",
    ),
    Fault(
        "inline-mode-mislabelled",
        "TARGET-BIND-05",
        'GET /v1/generations/{id} shows an inline binding with mode "callback"',
    ),
    Fault(
        "listed-events-dropped",
        "TARGET-BIND-04",
        "a binding that lists its events receives none of them",
    ),
    Fault(
        "losing-callback-unchecked",
        "TARGET-ORDER-05",
        "a callback_url that loses to webhook.id or webhook.url is not validated",
    ),
    Fault(
        "losing-target-notified",
        "TARGET-ORDER-04",
        "the targets that lose the resolution order receive the events as well",
    ),
    Fault(
        "precedence-callback-over-url",
        "TARGET-ORDER-02",
        "callback_url wins over webhook.url (webhook.id still first)",
    ),
    Fault(
        "redeliver-refusal-recorded",
        "REDLV-REBIND-03",
        "a redeliver refused for a now-private target records a failed attempt",
    ),
    Fault(
        "redeliver-refusal-sends-to-pinned",
        "REDLV-REBIND-02",
        "a redeliver refused for a now-private target still posts to the submit-time address",
    ),
    Fault(
        "redeliver-sends-before-checking",
        "REDLV-VALIDATE-01",
        "redeliver posts to where the target resolves now, then validates (and answers 400)",
    ),
    Fault("registered-webhook-ignored", "TARGET-BIND-01", "webhook.id binds no target"),
    Fault("unknown-webhook-id-400", "TARGET-ID-01", "an unknown webhook id is answered 400"),
    Fault("webhook-url-ignored", "TARGET-BIND-02", "webhook.url binds no target"),
    Fault(
        "webhook-url-unchecked",
        "TARGET-BIND-03",
        "webhook.url is not held to the callback URL rules (callback_url still is)",
    ),
    # interpretations (a failing check only warns)
    Fault(
        "callback-any-public-address",
        "URL-RESOLVE-03",
        "a callback name passes when one of its addresses is public",
    ),
    Fault(
        "registered-url-unchecked",
        "HOOK-URL-01",
        "POST /api/webhooks registers any URL (the callback URL rules are not applied)",
    ),
    Fault("callback-deprecated-range-accepted", "URL-DEPR-01", "fec0::/10, 192.88.99.0/24 pass"),
    Fault(
        "callback-embedded-ipv4-unchecked",
        "URL-MAPPED-02",
        "IPv4-compatible, SIIT, NAT64, 6to4 and Teredo forms of private IPv4 pass",
    ),
    Fault("callback-fragment-not-counted", "URL-LEN-03", "the fragment is not counted to 2048"),
    Fault("callback-multicast-accepted", "URL-MCAST-01", "multicast callback hosts pass"),
    Fault(
        "callback-parser-lenient",
        "URL-FORM-05",
        "backslashes, malformed IPv4 and percent-encoded hosts pass",
    ),
    Fault(
        "callback-non-string-accepted",
        "URL-FORM-07",
        "a callback_url that is not a string is accepted (as its text, unvalidated)",
    ),
    Fault("callback-port-unchecked", "URL-FORM-02", "port 0 and ports over 65535 pass"),
    Fault("callback-scheme-case-sensitive", "URL-SCHEME-04", "HTTP:// (upper case) is refused"),
    Fault("callback-unicode-host-unchecked", "URL-FORM-06", "hosts with non-ASCII characters pass"),
    Fault("callback-url-repaired", "URL-FORM-03", "http:/host (one slash) is accepted"),
    Fault("callback-whitespace-stripped", "URL-FORM-04", "whitespace and control characters pass"),
    Fault(
        "webhook-without-target-accepted",
        "TARGET-URL-03",
        "a webhook object with neither id nor url is accepted (no target)",
    ),
    # --- events and deliveries (engineer CHECKS-EVENTS; webhooks/event_faults.py) ---
    Fault("api-version-not-string", "EVT-ENV-04", "the envelope's api_version is an integer"),
    Fault(
        "api-version-varies",
        "VER-ENV-03",
        "generation.failed envelopes carry another api_version",
    ),
    Fault("api-version-wrong", "VER-ENV-02", "the envelope's api_version is 2025-01-01"),
    Fault("attempt-header-constant", "DLV-HDR-05", "every attempt carries X-Service-Attempt: 1"),
    Fault("attempt-header-from-zero", "DLV-HDR-04", "X-Service-Attempt counts from 0"),
    Fault(
        "body-not-json-object",
        "DLV-BODY-01",
        "the delivery body is a JSON array holding the envelope",
    ),
    Fault(
        "callback-body-without-webhook-id",
        "TARGET-FLAT-01",
        "callback_url bodies lack the envelope's webhook_id",
    ),
    Fault(
        "cancelled-never-sent",
        "EVT-CANCEL-02",
        "generation.cancelled is never sent, even when subscribed",
    ),
    Fault(
        "cancelled-status-wrong",
        "EVT-CANCEL-03",
        "generation.cancelled carries data.status 'canceled'",
    ),
    Fault(
        "completed-not-sent-by-default",
        "EVT-DEFAULT-01",
        "without an events field, generation.completed is not sent",
    ),
    Fault("content-type-text-plain", "DLV-HDR-01", "deliveries carry Content-Type: text/plain"),
    Fault("credits-used-not-integer", "EVT-DATA-09", "data.credits_used is a string"),
    Fault("data-generation-id-wrong", "EVT-DATA-01", "data.generation_id is not the submit's id"),
    Fault("data-model-not-string", "EVT-DATA-04", "data.model is null"),
    Fault("data-not-object", "EVT-ENV-07", "the envelope's data is a string"),
    Fault(
        "data-status-wrong",
        "EVT-DATA-02",
        "a successful generation's data.status is 'succeeded'",
    ),
    Fault("data-type-wrong", "EVT-DATA-03", "data.type is 'image' for every generation, video too"),
    Fault("delivery-method-put", "DLV-METHOD-01", "deliveries are sent with PUT"),
    Fault("edit-events-not-sent", "EVT-APPLY-03", "image edits send no events"),
    Fault(
        "error-message-empty-on-failure",
        "EVT-DATA-08",
        "a failed generation's data.error_message is empty",
    ),
    Fault(
        "error-message-on-success",
        "EVT-DATA-07",
        "a successful generation's data.error_message is set",
    ),
    Fault("event-field-wrong", "EVT-ENV-02", "the envelope's event drops the generation. prefix"),
    Fault(
        "event-header-mismatch",
        "DLV-HDR-02",
        "X-Service-Event is generation.completed whatever the event",
    ),
    Fault("event-id-not-evt-hex", "EVT-ENV-01", "event ids have the form event-<hex>"),
    Fault(
        "events-added-to-defaults",
        "EVT-SUB-01",
        "listed events are sent in addition to completed and failed",
    ),
    Fault(
        "failed-credits-not-zero",
        "EVT-DATA-10",
        "a failed generation's data.credits_used is not 0",
    ),
    Fault(
        "failed-not-sent-by-default",
        "EVT-DEFAULT-02",
        "without an events field, generation.failed is not sent",
    ),
    Fault(
        "generation-header-mismatch",
        "DLV-HDR-06",
        "X-Service-Generation is not the generation id",
    ),
    Fault(
        "headers-branded",
        "DLV-HDR-08",
        "delivery headers are named X-Acme-* instead of X-Service-*",
    ),
    Fault("image-events-not-sent", "EVT-APPLY-02", "image generations send no events"),
    Fault(
        "inline-body-flattened",
        "TARGET-INLINE-01",
        "webhook.url bodies have the data fields copied to the top",
    ),
    Fault(
        "key-detail-signing-secret-wrong",
        "SIG-KEY-04",
        "the key detail view shows a secret that signs nothing",
    ),
    Fault(
        "output-url-missing-in-callback-data",
        "TARGET-OUTPUT-01",
        "callback_url bodies lack data.output_url",
    ),
    Fault(
        "output-url-null-on-success",
        "EVT-DATA-05",
        "a successful generation's data.output_url is null",
    ),
    Fault("output-url-relative", "EVT-DATA-11", "data.output_url is a path, not an absolute URL"),
    Fault(
        "per-key-secret-rotates",
        "SIG-KEY-02",
        "a key's later deliveries are signed with another secret",
    ),
    Fault(
        "per-key-secret-shared",
        "SIG-KEY-03",
        "every key signs with the per-key secret of its account's first key",
    ),
    Fault(
        "registered-body-flattened",
        "TARGET-FLAT-03",
        "webhook.id bodies have the data fields copied to the top",
    ),
    Fault(
        "registered-signed-with-key-secret",
        "SIG-HOOK-01",
        "registered-webhook deliveries are signed with the per-key secret",
    ),
    Fault(
        "retries-signed-wrongly",
        "SIG-HMAC-02",
        "retries carry a signature that does not verify",
    ),
    Fault("retry-timestamp-stale", "SIG-TS-02", "every attempt is signed with the t of the first"),
    Fault("signature-header-reordered", "DLV-HDR-07", "X-Service-Signature is v1=<hex>,t=<unix>"),
    Fault("signature-hex-uppercase", "SIG-HEX-01", "the v1 hex digest is uppercase"),
    Fault(
        "signature-hmac-sha512",
        "SIG-HMAC-01",
        "v1 is HMAC-SHA512 cut to 64 hex digits, not HMAC-SHA256",
    ),
    Fault(
        "signature-standard-webhooks-keying",
        "SIG-HMAC-03",
        "the HMAC key is the base64-decoded secret after whsec_",
    ),
    Fault("signature-timestamp-milliseconds", "SIG-TS-01", "the signature's t is in milliseconds"),
    Fault(
        "unknown-event-names-accepted",
        "EVT-SUB-02",
        "unknown names in webhook.events are dropped silently",
    ),
    Fault("video-events-not-sent", "EVT-APPLY-01", "video generations send no events"),
    Fault(
        "webhook-id-null-registered",
        "EVT-ENV-06",
        "webhook.id deliveries carry webhook_id null",
    ),
    # --- contract fuzzing (engineer FUZZ; conformance/checks/test_contract_fuzz.py) ---
    Fault(
        "blank-prompt-server-error",
        "ERR-5XX-01",
        "a submit whose prompt is the empty string answers 500 instead of 400",
    ),
    Fault(
        "image-prompt-any-type",
        "GEN-IMAGE-02",
        "an image submit whose prompt is not a string is accepted (its JSON text is the prompt)",
    ),
    Fault(
        "image-prompt-optional",
        "GEN-IMAGE-01",
        "an image submit without prompt is accepted (with a default prompt)",
    ),
    Fault(
        "video-duration-any-type",
        "GEN-VIDEO-04",
        "a video submit whose duration is not a number is accepted (the duration ignored)",
    ),
    Fault(
        "video-prompt-optional",
        "GEN-VIDEO-01",
        "a video submit without prompt is accepted (with a default prompt)",
    ),
    # --- limits and generations (engineer CHECKS-LIMITS; conformance/checks/test_rate_limits.py,
    # test_generation_*.py) ---
    Fault(
        "credit-cap-429-bare",
        "CREDIT-429-01",
        "a 429 for the daily credit cap lacks the X-RateLimit-* headers",
    ),
    Fault(
        "credit-cap-refusal-charged",
        "CREDIT-CAP-06",
        "a submit refused for the daily credit cap still spends its credits",
    ),
    Fault(
        "credit-cap-without-retry-after",
        "CREDIT-CAP-02",
        "a 429 for the daily credit cap lacks Retry-After",
    ),
    Fault(
        "generation-read-404",
        "GEN-READ-01",
        "GET /v1/generations/{id} answers 404 for the key that submitted the generation",
    ),
    Fault(
        "ratelimit-remaining-not-zero",
        "RATE-HDR-04",
        "a rate-limit 429 gives X-RateLimit-Remaining as the whole limit instead of 0",
    ),
    Fault(
        "ratelimit-reset-milliseconds",
        "RATE-HDR-05",
        "X-RateLimit-Reset is a unix time in milliseconds",
    ),
    Fault(
        "retry-after-http-date",
        "RATE-HDR-02",
        "429 responses give Retry-After as an HTTP-date instead of seconds",
    ),
    Fault(
        "tier-path-unversioned",
        "VER-PATH-01",
        "the tier endpoint is served at /account/tier, without the /v1 prefix",
    ),
    Fault("video-status-200", "GEN-VIDEO-07", "video submits answer 200 instead of 202"),
    # --- delivery behaviour, records, redeliver (engineer CHECKS-DELIVERY;
    # conformance/checks/test_delivery_*.py, test_redeliver.py) ---
    Fault("attempt-at-missing", "REC-ATTEMPT-02", "delivery record attempts have no at"),
    Fault(
        "attempt-error-missing", "REC-ATTEMPT-06", "delivery record attempts have no error field"
    ),
    Fault(
        "attempt-ms-float", "REC-ATTEMPT-05", "delivery record attempts give ms as float seconds"
    ),
    Fault("attempt-n-from-zero", "REC-ATTEMPT-01", "delivery records number their attempts from 0"),
    Fault(
        "attempt-status-of-last",
        "REC-ATTEMPT-04",
        "every attempt of a record shows the last attempt's status",
    ),
    Fault(
        "callback-unlisted",
        "REC-GEN-05",
        "a generation's delivery list leaves out callback_url deliveries",
    ),
    Fault(
        "client-error-success",
        "DLV-SUCCESS-02",
        "a 4xx reply counts as success: the delivery is not retried",
    ),
    Fault(
        "delivered-without-sending",
        "DLV-ONCE-01",
        "deliveries are recorded as answered 200 but never sent",
    ),
    Fault(
        "delivery-id-per-attempt",
        "DLV-ID-01",
        "each retry carries a new delivery id (body id and X-Service-Delivery)",
    ),
    Fault(
        "duplicate-records", "REC-GEN-02", "a generation's delivery list shows each record twice"
    ),
    Fault(
        "event-type-short",
        "REC-FIELD-01",
        "delivery records give event_type without the generation. prefix",
    ),
    Fault(
        "exhausted-recorded-failed",
        "DLV-EXHAUST-02",
        "a delivery whose third attempt failed is recorded failed instead of exhausted",
    ),
    Fault(
        "generation-deliveries-403",
        "REC-GEN-01",
        "GET /v1/generations/{id}/deliveries refuses API keys with 403",
    ),
    Fault(
        "generation-list-total-missing", "REC-GEN-07", "a generation's delivery list has no total"
    ),
    Fault(
        "inline-unlisted",
        "REC-GEN-04",
        "a generation's delivery list leaves out webhook.url (inline) deliveries",
    ),
    Fault(
        "limit-ignored",
        "REC-HOOK-06",
        "a webhook's delivery list ignores limit and returns up to 100 records",
    ),
    Fault("list-total-string", "REC-LIST-01", "delivery lists give total as a string"),
    Fault(
        "list-unbounded",
        "REC-HOOK-07",
        "a webhook's delivery list asked without a limit returns every record (over 100)",
    ),
    Fault("only-200-success", "DLV-SUCCESS-01", "only a 200 reply counts as success, not any 2xx"),
    Fault(
        "outcome-filter-ignored",
        "REC-HOOK-04",
        "a webhook's delivery list ignores a valid outcome filter",
    ),
    Fault("outcome-success-word", "REC-FIELD-02", "delivered records show outcome success"),
    Fault("pending-filter-refused", "REC-HOOK-03", "outcome=pending_retry is answered 400"),
    Fault(
        "record-drops-first-attempt", "REC-GEN-03", "delivery records leave out their first attempt"
    ),
    Fault(
        "record-keeps-last-attempt",
        "REC-FIELD-06",
        "a delivery record's attempts hold only the latest attempt",
    ),
    Fault(
        "redeliver-answer-bare",
        "REDLV-RESP-01",
        "the redeliver answer has no outcome or status_code",
    ),
    Fault(
        "redeliver-answers-recorded-status",
        "REDLV-STATE-03",
        "redeliver answers the record's previous outcome and status, not the new attempt's",
    ),
    Fault("redeliver-needs-session", "REDLV-AUTH-01", "redeliver refuses API keys with 401"),
    Fault(
        "redeliver-payload-rebuilt",
        "REDLV-PAYLOAD-01",
        "a redelivery carries a rebuilt payload (a new created_at)",
    ),
    Fault(
        "redeliver-refuses-failed",
        "REDLV-STATE-02",
        "a delivery whose outcome is failed cannot be redelivered (409)",
    ),
    Fault(
        "redeliver-sends-nothing",
        "REDLV-STATE-01",
        "redeliver answers delivered without sending anything",
    ),
    Fault(
        "redelivery-outcome-kept",
        "REDLV-STATE-04",
        "a successful redelivery leaves the record's outcome as it was (exhausted or failed)",
    ),
    Fault(
        "redirect-success",
        "DLV-REDIRECT-02",
        "a 3xx reply counts as success (not followed, but not retried either)",
    ),
    Fault(
        "registered-unlisted",
        "REC-GEN-06",
        "a generation's delivery list leaves out registered-webhook deliveries",
    ),
    Fault(
        "retry-after-success",
        "DLV-OK-01",
        "a delivery whose first attempt got a 2xx is sent once more",
    ),
    Fault("retry-body-changes", "DLV-ID-03", "each retry carries a body with a new created_at"),
    Fault(
        "second-backoff-1s",
        "DLV-BACKOFF-02",
        "the backoff before the third attempt is 1 s instead of 2 s",
    ),
    Fault(
        "shared-delivery-id",
        "DLV-ID-02",
        "every delivery carries the same id (body id and X-Service-Delivery)",
    ),
    Fault("status-code-string", "REC-FIELD-03", "delivery records give status_code as a string"),
    Fault("success-recorded-failed", "DLV-OK-02", "a delivery answered 2xx is recorded failed"),
    Fault(
        "target-url-origin-only",
        "REC-FIELD-05",
        "delivery records give target_url without its path",
    ),
    Fault(
        "timeout-not-retried",
        "DLV-RETRY-02",
        "a timed-out attempt is not retried (the delivery ends exhausted)",
    ),
    Fault("timeout-too-long", "DLV-TIMEOUT-01", "the per-attempt timeout is 20 s instead of 10 s"),
    Fault("timeout-too-short", "DLV-TIMEOUT-02", "the per-attempt timeout is 5 s instead of 10 s"),
    Fault("two-attempts", "DLV-ATTEMPTS-01", "a failing delivery gets 2 attempts instead of 3"),
    Fault(
        "webhook-deliveries-403",
        "REC-HOOK-01",
        "GET /v1/webhooks/{id}/deliveries refuses API keys with 403",
    ),
    Fault("webhook-list-empty", "REC-HOOK-02", "a webhook's delivery list is always empty"),
    Fault("webhook-list-total-missing", "REC-HOOK-10", "a webhook's delivery list has no total"),
)

#: Every known fault by name.
FAULTS: Mapping[str, Fault] = MappingProxyType({fault.name: fault for fault in _REGISTRY})


class UnknownFault(ValueError):
    """A fault name that is not in the registry (refused at start-up)."""


class Faults:
    """The faults a running service has switched on."""

    def __init__(self, enabled: frozenset[str] = frozenset()) -> None:
        unknown = sorted(enabled - FAULTS.keys())
        if unknown:
            raise UnknownFault(
                f"unknown fault(s): {', '.join(unknown)}; "
                "`python -m reference faults` lists the known ones"
            )
        self.enabled = frozenset(enabled)

    def on(self, name: str) -> bool:
        """Whether fault ``name`` is active (``name`` must be registered)."""
        if name not in FAULTS:
            raise UnknownFault(f"code asks for unregistered fault {name!r}")
        return name in self.enabled

    # ARCHITECTURE.md spells the query ``faults.active(name)``.
    active = on

    def __repr__(self) -> str:
        return f"Faults({sorted(self.enabled)!r})"
