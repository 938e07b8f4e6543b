"""Signed results: an in-toto Statement over a run's reports, in a DSSE envelope.

A report folder is files anyone can edit; an attestation lets a reader trust a result
without re-running it. :func:`statement` builds an in-toto Statement v1 whose subjects
are the run's reports (``results.json``, ``report.html``, ``junit.xml``, by sha256) and
whose predicate says what was checked, against what, with what (suite version and the
digest of its installed files, spec version, catalog digest, target base URL and
``api_version``, the redacted profile's hash, every requirement's verdict, start and end
times, the baseline if the run had one), all taken from ``results.json``. :func:`sign`
wraps it in a DSSE envelope signed with Ed25519 over DSSE's pre-authentication encoding
(:func:`pae`); :func:`verify` checks an envelope offline and, given the run folder, that
its files are still the attested ones. Every failure is an :class:`AttestationError`
whose message says what did not hold.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from conformance.reports import HTML_NAME, JSON_NAME, JUNIT_NAME

__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "SUBJECTS",
    "AttestationError",
    "Verified",
    "file_sha256",
    "generate_key",
    "key_id",
    "load_private_key",
    "load_public_key",
    "pae",
    "sign",
    "statement",
    "verify",
]

#: The in-toto Statement layer, version 1.
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
#: The DSSE payload type of an in-toto Statement.
PAYLOAD_TYPE = "application/vnd.in-toto+json"
#: What the predicate is: this suite's verdicts on one run (bumped when its shape changes).
PREDICATE_TYPE = "urn:genapi-conformance:predicate:results:v1"
#: The attested reports of a run folder, by file name.
SUBJECTS = (JSON_NAME, HTML_NAME, JUNIT_NAME)
#: Bound on what is read as an envelope or a key: a run's envelope is a few kilobytes
#: per hundred requirements.
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024


class AttestationError(Exception):
    """An attestation that cannot be made or does not verify; the message says why."""


@dataclass(frozen=True)
class Verified:
    """A verified attestation: the signer's key id and the Statement it signed."""

    key_id: str
    statement: Mapping[str, Any]

    @property
    def verdicts(self) -> Mapping[str, str]:
        verdicts: Mapping[str, str] = self.statement["predicate"]["verdicts"]
        return verdicts


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding, the bytes a signature covers:
    ``"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body``, lengths in bytes, in decimal."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def statement(run_dir: Path) -> dict[str, Any]:
    """The in-toto Statement of the run in *run_dir* (its reports must all be there)."""
    missing = [name for name in SUBJECTS if not (run_dir / name).is_file()]
    if missing:
        raise AttestationError(f"{run_dir}: no {', '.join(missing)} (not a run's report folder?)")
    try:
        results = json.loads((run_dir / JSON_NAME).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AttestationError(f"{run_dir / JSON_NAME}: not JSON ({error})") from error
    try:
        predicate = _predicate(results)
    except (KeyError, TypeError) as error:
        raise AttestationError(
            f"{run_dir / JSON_NAME}: lacks {error} (an older format?)"
        ) from error
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": file_sha256(run_dir / name)}} for name in SUBJECTS
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def _predicate(results: Mapping[str, Any]) -> dict[str, Any]:
    profile = results["profile"]
    return {
        "suite": {
            "version": results["suite_version"],
            "distribution_sha256": results["suite_sha256"],
        },
        "spec_version": results["spec_version"],
        "catalog_sha256": results["catalog_sha256"],
        "target": {
            "base_url": profile["base_url"],
            "api_version": results["api_version"],
            "profile_sha256": profile["sha256"],
        },
        "started_at": results["started_at"],
        "finished_at": results["finished_at"],
        # A run compared against a baseline names it in results.json; most runs have none.
        "baseline": results.get("baseline"),
        "ok": results["ok"],
        "verdicts": {entry["id"]: entry["verdict"] for entry in results["requirements"]},
    }


def generate_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def key_id(public_key: Ed25519PublicKey) -> str:
    """The envelope's ``keyid``: the sha256 of the raw public key, in hex."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def load_private_key(path: Path) -> Ed25519PrivateKey:
    key = _load_key(path, serialization.load_pem_private_key, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise AttestationError(f"{path}: not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    key = _load_key(path, serialization.load_pem_public_key)
    if not isinstance(key, Ed25519PublicKey):
        raise AttestationError(f"{path}: not an Ed25519 public key")
    return key


def _load_key(path: Path, loader: Any, **kwargs: Any) -> Any:
    try:
        data = _read_bounded(path)
        return loader(data, **kwargs)
    except (ValueError, TypeError) as error:
        raise AttestationError(f"{path}: not a PEM key ({error})") from error


def _read_bounded(path: Path) -> bytes:
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_ENVELOPE_BYTES + 1)
    except OSError as error:
        raise AttestationError(f"{path}: {error.strerror or error}") from error
    if len(data) > MAX_ENVELOPE_BYTES:
        raise AttestationError(f"{path}: larger than {MAX_ENVELOPE_BYTES} bytes")
    return data


def sign(document: Mapping[str, Any], private_key: Ed25519PrivateKey) -> dict[str, Any]:
    """The DSSE envelope of *document* (a Statement), signed by *private_key*."""
    payload = json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8")
    signature = private_key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {
                "keyid": key_id(private_key.public_key()),
                "sig": base64.b64encode(signature).decode("ascii"),
            }
        ],
    }


def verify(
    envelope_path: Path, public_key: Ed25519PublicKey, run_dir: Path | None = None
) -> Verified:
    """Check the envelope in *envelope_path* offline: its shape, its signature by
    *public_key*, the Statement it carries and, given *run_dir*, that every subject file
    there still has its attested digest. Raises :class:`AttestationError` saying why not."""
    envelope = _envelope(envelope_path)
    payload = _b64(envelope["payload"], "payload")
    wanted = key_id(public_key)
    signatures = [s for s in envelope["signatures"] if isinstance(s, Mapping)]
    for entry in signatures:
        if "sig" not in entry or not isinstance(entry["sig"], str):
            raise AttestationError("a signature has no 'sig'")
        signature = _b64(entry["sig"], "signature")
        try:
            public_key.verify(signature, pae(envelope["payloadType"], payload))
        except InvalidSignature:
            continue
        document = _statement(payload)
        if run_dir is not None:
            _check_subjects(document, run_dir)
        return Verified(key_id=wanted, statement=document)
    keyids = ", ".join(str(s.get("keyid", "?")) for s in signatures) or "none"
    raise AttestationError(
        f"no signature verifies with this public key (keyid {wanted}; the envelope's: "
        f"{keyids}): the key is not the signer's, or the envelope was altered after signing"
    )


def _envelope(path: Path) -> Mapping[str, Any]:
    data = _read_bounded(path)
    try:
        envelope = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AttestationError(
            f"{path}: not a DSSE envelope: not valid JSON ({error}); truncated or corrupted?"
        ) from error
    if not isinstance(envelope, Mapping):
        raise AttestationError(f"{path}: not a DSSE envelope: not a JSON object")
    missing = [f for f in ("payloadType", "payload", "signatures") if f not in envelope]
    if missing:
        raise AttestationError(f"{path}: not a DSSE envelope: no {', '.join(missing)}")
    if envelope["payloadType"] != PAYLOAD_TYPE:
        raise AttestationError(
            f"{path}: payloadType is {envelope['payloadType']!r}, expected {PAYLOAD_TYPE!r}"
        )
    if not isinstance(envelope["payload"], str):
        raise AttestationError(f"{path}: payload is not a string")
    if not isinstance(envelope["signatures"], list) or not envelope["signatures"]:
        raise AttestationError(f"{path}: the envelope has no signatures")
    return envelope


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise AttestationError(f"the {what} is not valid base64 ({error})") from error


def _statement(payload: bytes) -> Mapping[str, Any]:
    """The signed Statement; signed yet malformed means a signer's bug, still refused."""
    try:
        document = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AttestationError(f"the signed payload is not JSON ({error})") from error
    if not isinstance(document, Mapping) or document.get("_type") != STATEMENT_TYPE:
        raise AttestationError(f"the signed payload is not an in-toto Statement ({STATEMENT_TYPE})")
    if document.get("predicateType") != PREDICATE_TYPE:
        raise AttestationError(
            f"predicateType is {document.get('predicateType')!r}, expected {PREDICATE_TYPE!r}"
        )
    predicate = document.get("predicate")
    if not isinstance(predicate, Mapping) or not isinstance(predicate.get("verdicts"), Mapping):
        raise AttestationError("the Statement's predicate has no verdicts")
    return document


def _check_subjects(document: Mapping[str, Any], run_dir: Path) -> None:
    problems = []
    for subject in document.get("subject", ()):
        name, digest = subject.get("name"), subject.get("digest", {}).get("sha256")
        path = run_dir / str(name)
        # A subject's name is a file name of the folder, never a path out of it.
        if not isinstance(name, str) or Path(name).name != name or not digest:
            problems.append(f"subject {name!r}: not a file name with a sha256 digest")
        elif not path.is_file():
            problems.append(f"{name}: missing from {run_dir}")
        elif file_sha256(path) != digest:
            problems.append(f"{name}: sha256 {file_sha256(path)} is not the attested {digest}")
            if name == JSON_NAME:
                problems += _verdict_changes(path, document["predicate"]["verdicts"])
    if problems:
        raise AttestationError(
            f"{run_dir} is not the attested run (changed after it was signed): "
            + "; ".join(problems)
        )


def _verdict_changes(results_path: Path, attested: Mapping[str, str]) -> list[str]:
    """Which verdicts of an altered ``results.json`` differ from the attested ones."""
    try:
        results = json.loads(results_path.read_text(encoding="utf-8"))
        found = {entry["id"]: entry["verdict"] for entry in results["requirements"]}
    except (ValueError, KeyError, TypeError):
        return [f"{JSON_NAME}: no longer readable as results"]
    return [
        f"{JSON_NAME}: verdict of {rid} is {found.get(rid, 'absent')!r}, attested {verdict!r}"
        for rid, verdict in attested.items()
        if found.get(rid) != verdict
    ] + [f"{JSON_NAME}: {rid} was not attested" for rid in found if rid not in attested]
