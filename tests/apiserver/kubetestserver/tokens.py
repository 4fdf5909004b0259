"""Service account tokens: the TokenRequest API (`POST
/api/v1/namespaces/{ns}/serviceaccounts/{name}/token`) and TokenReview (`POST
/apis/authentication.k8s.io/v1/tokenreviews`), with what kube-apiserver 1.20 checks
(pkg/registry/core/serviceaccount/storage/token.go, pkg/apis/authentication/validation,
plugin/pkg/admission/noderestriction), in its order:

* NodeRestriction, for a node's requests (the Node authorizer let them through only for a service
  account that a pod bound to the node runs as): the token must be bound to a Pod (`apiVersion`
  v1, a name) with a UID, the pod must exist (else its 404), have that UID and be bound to this
  node (else 403 with the plugin's messages);
* validation: `spec.expirationSeconds` (default 3600) at least 600 and at most 2^32 (422);
* the service account must exist (404);
* the bound object, for anyone: a Pod running as that service account (else 400 "cannot bind
  token for serviceaccount ... to pod running with different serviceaccount name.") or a Secret,
  with the UID given when one is (else 409 Conflict); any other kind 400;
* no audience: the server's own (`https://kubernetes.default.svc`, its issuer);
* `spec.expirationSeconds` capped by the setting `token_max_expiration_seconds` (the server's
  --service-account-max-token-expiration; 0: none): a test lowers it to a few seconds to see a
  token renewed, which is the one thing here a real server would not do (it refuses a cap that
  low at start).

A token is a JWT (RS256 header, the claims a bound service account token carries: iss, sub, aud,
exp, iat, nbf, kubernetes.io {namespace, pod {name, uid}, serviceaccount {name, uid}}) signed
here with a key of the server's own (HMAC, so only this server can check it). It authenticates
as its service account (`system:serviceaccount:<ns>:<name>`, groups system:serviceaccounts and
system:serviceaccounts:<ns>) until it expires, when its audience includes the server's, and
TokenReview answers for it as kube-apiserver does: authenticated, the user with the extra
`authentication.kubernetes.io/pod-name` and `pod-uid`, the audiences matched. Tokens are never
logged (the request log has no bodies).
"""

import base64
import hashlib
import hmac
import json
import os
import time

from . import status as st

ISSUER = "https://kubernetes.default.svc"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32
POD_NAME_KEY = "authentication.kubernetes.io/pod-name"
POD_UID_KEY = "authentication.kubernetes.io/pod-uid"


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def claims_of(token):
    """The claims of a token's payload, unverified (tests read what a token says)."""
    return json.loads(_unb64(token.split(".")[1]))


def _invalid(causes):
    """422 as errors.NewInvalid(GroupKind TokenRequest.authentication.k8s.io, "", causes)."""
    err = st.invalid("TokenRequest", "authentication.k8s.io", "", causes)
    err.message = err.message.replace('TokenRequest ""', 'TokenRequest.authentication.k8s.io ""', 1)
    return err


def _admission_forbidden(name, message):
    return st.ApiError(403, f'serviceaccounts "{name}" is forbidden: {message}', "Forbidden",
                       {"name": name, "kind": "serviceaccounts"})


class TokenIssuer:
    def __init__(self, store, settings):
        self.store = store
        self.settings = settings
        self.key = os.urandom(32)
        self.issued = 0

    # ---- TokenRequest ------------------------------------------------------------------------

    def create(self, node, namespace, name, body):
        """The answer (a TokenRequest with its status) to a create of serviceaccounts/<name>/token
        in `namespace`; `node` is the requesting node's name, or None for any other user."""
        if not isinstance(body, dict) or body.get("kind", "TokenRequest") != "TokenRequest" or \
                body.get("apiVersion", "authentication.k8s.io/v1") != "authentication.k8s.io/v1":
            raise st.bad_request("the body of the request was in an unknown format")
        spec = body.get("spec") or {}
        if not isinstance(spec, dict):
            raise st.bad_request("the body of the request was in an unknown format")
        ref = spec.get("boundObjectRef")
        if node is not None:
            self._admit_node(node, namespace, name, ref)
        seconds = spec.get("expirationSeconds", DEFAULT_EXPIRATION)
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise st.bad_request("spec.expirationSeconds: expected an integer")
        if seconds < MIN_EXPIRATION:
            raise _invalid([("spec.expirationSeconds", f"Invalid value: {seconds}: may not "
                             "specify a duration less than 10 minutes", "FieldValueInvalid")])
        if seconds > MAX_EXPIRATION:
            raise _invalid([("spec.expirationSeconds", f"Invalid value: {seconds}: may not "
                             "specify a duration larger than 2^32 seconds", "FieldValueInvalid")])
        account = self.store.get("serviceaccounts", namespace, name)
        pod = None
        if ref is not None:
            kind, api_version = ref.get("kind", ""), ref.get("apiVersion", "")
            group = api_version.split("/")[0] if "/" in api_version else ""
            if group == "" and kind == "Pod":
                pod = self.store.get("pods", namespace, ref.get("name", ""))
                if (pod.get("spec") or {}).get("serviceAccountName") != name:
                    raise st.bad_request(f'cannot bind token for serviceaccount "{name}" to pod '
                                         "running with different serviceaccount name.")
                bound = pod
            elif group == "" and kind == "Secret":
                bound = self.store.get("secrets", namespace, ref.get("name", ""))
            else:
                raise st.bad_request(f"cannot bind token to object of type {group}/"
                                     f"{api_version.split('/')[-1]}, Kind={kind}")
            if ref.get("uid") and ref["uid"] != bound["metadata"]["uid"]:
                raise st.ApiError(409, f'Operation cannot be fulfilled on {kind} '
                                  f'"{ref.get("name", "")}": the UID in the bound object reference '
                                  f'({ref["uid"]}) does not match the UID in record. The object '
                                  "might have been deleted and then recreated", "Conflict",
                                  {"name": ref.get("name", ""), "kind": kind})
        audiences = spec.get("audiences") or [ISSUER]
        cap = int(self.settings.get("token_max_expiration_seconds") or 0)
        if cap > 0 and seconds > cap:
            seconds = cap
        now = time.time()
        claims = {"iss": ISSUER, "sub": f"system:serviceaccount:{namespace}:{name}",
                  "aud": audiences, "iat": int(now), "nbf": int(now), "exp": int(now) + seconds,
                  "kubernetes.io": {"namespace": namespace,
                                    "serviceaccount": {"name": name,
                                                       "uid": account["metadata"]["uid"]}}}
        if pod is not None:
            claims["kubernetes.io"]["pod"] = {"name": pod["metadata"]["name"],
                                              "uid": pod["metadata"]["uid"]}
        self.issued += 1
        out_spec = dict(spec, audiences=audiences, expirationSeconds=seconds)
        return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
                "spec": out_spec,
                "status": {"token": self._sign(claims),
                           "expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                time.gmtime(now + seconds))}}

    def _admit_node(self, node, namespace, name, ref):
        if not isinstance(ref, dict) or ref.get("apiVersion") != "v1" or \
                ref.get("kind") != "Pod" or not ref.get("name"):
            raise _admission_forbidden(name, "node requested token not bound to a pod")
        if not ref.get("uid"):
            raise _admission_forbidden(name, "node requested token with a pod binding without "
                                       "a uid")
        pod = self.store.get("pods", namespace, ref["name"])  # its own 404
        if ref["uid"] != pod["metadata"]["uid"]:
            raise _admission_forbidden(name, f"the UID in the bound object reference "
                                       f"({ref['uid']}) does not match the UID in record "
                                       f"({pod['metadata']['uid']}). The object might have been "
                                       "deleted and then recreated")
        if (pod.get("spec") or {}).get("nodeName") != node:
            raise _admission_forbidden(name, "node requested token bound to a pod scheduled on a "
                                       "different node")

    def _sign(self, claims):
        head = _b64(json.dumps({"alg": "RS256", "kid": "kube-test-apiserver"}).encode())
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(self.key, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(signature)}"

    # ---- authentication and TokenReview ------------------------------------------------------

    def verify(self, token, audiences=(ISSUER,)):
        """(claims, matched audiences) for a token this server issued that is unexpired and meant
        for one of `audiences`, else None."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        expected = hmac.new(self.key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        try:
            if not hmac.compare_digest(_unb64(parts[2]), expected):
                return None
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, TypeError):
            return None
        if time.time() >= claims.get("exp", 0):
            return None
        matched = [a for a in audiences if a in claims.get("aud", [])]
        if not matched:
            return None
        return claims, matched

    def authenticate(self, token):
        """(user, groups) for a valid token of this server meant for it, else None."""
        verified = self.verify(token)
        if verified is None:
            return None
        claims, _ = verified
        namespace = claims["kubernetes.io"]["namespace"]
        return claims["sub"], ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]

    def review(self, body):
        """The TokenReview answer for `body` (spec.token, spec.audiences)."""
        if not isinstance(body, dict) or body.get("kind", "TokenReview") != "TokenReview":
            raise st.bad_request("the body of the request was in an unknown format")
        spec = body.get("spec") or {}
        audiences = spec.get("audiences") or [ISSUER]
        verified = self.verify(spec.get("token") or "", audiences)
        out = {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
               "metadata": {"creationTimestamp": None}, "spec": spec}
        if verified is None:
            # As kube-apiserver's JSON: `authenticated` false is left out (omitempty).
            out["status"] = {"user": {}, "error": "[invalid bearer token, token lookup failed]"}
            return out
        claims, matched = verified
        k8s = claims["kubernetes.io"]
        user = {"username": claims["sub"], "uid": k8s["serviceaccount"]["uid"],
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{k8s['namespace']}",
                           "system:authenticated"]}
        if "pod" in k8s:
            user["extra"] = {POD_NAME_KEY: [k8s["pod"]["name"]], POD_UID_KEY: [k8s["pod"]["uid"]]}
        out["status"] = {"authenticated": True, "user": user, "audiences": matched}
        return out
