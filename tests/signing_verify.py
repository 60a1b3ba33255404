#!/usr/bin/env python3
"""Checks robots-guard's Web Bot Auth signatures with an independent RFC 9421
implementation: the `http-message-signatures` package (pyauth), 3.x, with
`http-sf` for the Structured Fields. Used by tests/signing.rs only.

Reads one JSON job on stdin, writes one JSON answer on stdout; exits 1 with the
reason on stderr when a signature does not verify.

Jobs:
- {"mode": "verify-request", "method", "url", "headers": [[name, value], ...],
   "jwks": {"keys": [...]}, "tag", "require": [component, ...], "clock_skew"?: seconds}
- {"mode": "verify-response", "status", "headers", "body",
   "request": {"method", "url", "headers"}, "tag", "require"}: the keys are the
   JWK Set in the body itself (the directory's proof of possession)
- {"mode": "sign-request", "method", "url", "headers", "private_key_pem",
   "label", "signature_agent"}: signs as a client would (Web Bot Auth profile,
   the key's own thumbprint as keyid) and answers {"headers": [...], "keyid"}

Keys are looked up by the RFC 7638 thumbprint computed here, so a keyid that is
not the key's thumbprint fails, as it would at a site.
"""

import base64
import datetime
import hashlib
import importlib.metadata
import json
import sys

import http_message_signatures as hms
import http_sf
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from http_message_signatures import algorithms


class Headers:
    """Field lines in wire order, repeats kept (what the verifier reads)."""

    def __init__(self, lines):
        self.lines = [(name, value) for name, value in lines]

    def items(self):
        return list(self.lines)

    def __iter__(self):
        return iter([name for name, _ in self.lines])

    def __contains__(self, name):
        return any(n.lower() == name.lower() for n, _ in self.lines)

    def __getitem__(self, name):
        values = [v for n, v in self.lines if n.lower() == name.lower()]
        if not values:
            raise KeyError(name)
        return ", ".join(values)

    def __setitem__(self, name, value):
        self.__delitem__(name)
        self.lines.append((name, value))

    def __delitem__(self, name):
        self.lines = [(n, v) for n, v in self.lines if n.lower() != name.lower()]


class Request:
    def __init__(self, method, url, headers):
        self.method = method
        self.url = url
        self.headers = Headers(headers)


class Response:
    def __init__(self, status, headers, request):
        self.status_code = status
        self.headers = Headers(headers)
        self.request = request


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def thumbprint(jwk):
    """RFC 7638 §3 for an OKP key (RFC 8037 §2): crv, kty, x in that order."""
    canonical = json.dumps(
        {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}, separators=(",", ":"), sort_keys=True
    )
    digest = hashlib.sha256(canonical.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def keys_of(jwks):
    keys = {}
    for jwk in jwks["keys"]:
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            raise SystemExit(f"unexpected key type in the directory: {jwk}")
        kid = thumbprint(jwk)
        if "kid" in jwk and jwk["kid"] != kid:
            raise SystemExit(f"kid {jwk['kid']} is not the key's thumbprint {kid}")
        keys[kid] = ed25519.Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
    return keys


def verifier(keys, clock_skew=None):
    resolver = hms.MappingKeyResolver(public_keys=keys, private_keys={})
    verifier = hms.HTTPMessageVerifier(signature_algorithm=algorithms.ED25519, key_resolver=resolver)
    if clock_skew is not None:
        # The package forgives 5 s of skew by default; a test of `expires`
        # may ask for none.
        verifier.max_clock_skew = datetime.timedelta(seconds=clock_skew)
    return verifier


def result(verified):
    return [
        {
            "label": r.label,
            "keyid": r.parameters.get("keyid"),
            "parameters": r.parameters,
            "covered": r.covered_components,
        }
        for r in verified
    ]


def signature_agents(headers):
    """The Signature-Agent Dictionary: label -> URL (draft §5.2.1)."""
    if "signature-agent" not in headers:
        return {}
    parsed = http_sf.parse(headers["signature-agent"].encode(), tltype="dictionary")
    agents = {}
    for label, (value, params) in parsed.items():
        if not isinstance(value, str) or params:
            raise SystemExit(f"Signature-Agent member {label} is not a bare String: {value!r} {params!r}")
        agents[label] = value
    return agents


def verify_request(job):
    request = Request(job["method"], job["url"], job["headers"])
    try:
        verified = verifier(keys_of(job["jwks"]), job.get("clock_skew")).verify(
            request, expect_tag=job["tag"], require_components=job.get("require", ())
        )
    except hms.InvalidSignature as e:
        print(f"invalid signature: {e}", file=sys.stderr)
        raise SystemExit(1)
    agents = signature_agents(request.headers)
    for r in verified:
        # Each signature covers the member keyed by its own label (draft §5.2.1).
        if f'"signature-agent";key="{r.label}"' not in r.covered_components:
            raise SystemExit(f"signature {r.label} does not cover its Signature-Agent member")
        if r.label not in agents:
            raise SystemExit(f"no Signature-Agent member for {r.label}")
    return {"verified": result(verified), "agents": agents}


def verify_response(job):
    req = job["request"]
    request = Request(req["method"], req["url"], req["headers"])
    response = Response(job["status"], job["headers"], request)
    body = job["body"].encode()
    keys = keys_of(json.loads(body))
    try:
        verified = verifier(keys).verify(
            response, expect_tag=job["tag"], require_components=job.get("require", ()), body=body
        )
    except hms.InvalidSignature as e:
        print(f"invalid signature: {e}", file=sys.stderr)
        raise SystemExit(1)
    if {r.parameters["keyid"] for r in verified} != set(keys):
        raise SystemExit("not one signature per key in the directory")
    return {"verified": result(verified)}


def sign_request(job):
    private = serialization.load_pem_private_key(job["private_key_pem"].encode(), password=None)
    public = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": base64.urlsafe_b64encode(public).rstrip(b"=").decode()}
    keyid = thumbprint(jwk)
    request = Request(job["method"], job["url"], job["headers"])
    label = job["label"]
    request.headers["Signature-Agent"] = f'{label}="{job["signature_agent"]}"'
    resolver = hms.MappingKeyResolver(public_keys={}, private_keys={keyid: private})
    signer = hms.HTTPMessageSigner(signature_algorithm=algorithms.ED25519, key_resolver=resolver)
    now = datetime.datetime.now(datetime.timezone.utc)
    signer.sign(
        request,
        key_id=keyid,
        created=now,
        expires=now + datetime.timedelta(minutes=5),
        label=label,
        tag="web-bot-auth",
        covered_component_ids=("@authority", f'"signature-agent";key="{label}"'),
    )
    return {"headers": request.headers.items(), "keyid": keyid, "jwks": {"keys": [jwk]}}


def main():
    version = importlib.metadata.version("http-message-signatures")
    if int(version.split(".")[0]) < 3:
        # 3.x resolves Dictionary members ("key") and request components of a
        # response ("req"), which these signatures cover.
        raise SystemExit(f"http-message-signatures {version} is too old; need 3.x")
    job = json.load(sys.stdin)
    mode = job["mode"]
    if mode == "verify-request":
        answer = verify_request(job)
    elif mode == "verify-response":
        answer = verify_response(job)
    elif mode == "sign-request":
        answer = sign_request(job)
    else:
        raise SystemExit(f"unknown mode {mode}")
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
