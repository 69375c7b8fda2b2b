#!/usr/bin/env bash
# Conformance check: runs schemathesis against a real `occ serve` (debug build, throwaway SQLite
# database) and fails when any response on an implemented route does not match the reference
# OpenAPI document (spec/reference-openapi.json, the reference's published document cut to our
# operations): 5xx, undocumented status codes, wrong content types or headers, bodies that
# violate the response schema, and the other checks listed where its configuration is written.
# No worker runs here, so the workspace-file operations answer from admission only (no active
# revision: 503); the real-gateway path is tested in crates/occ/tests.
#
# Installs schemathesis (pinned) into target/schemathesis-venv when it is missing, and python3-venv
# through apt-get when `python3 -m venv` cannot work. Everything else it makes lives in one temp
# dir that is removed on exit; the server is stopped by its PID. Reports (JUnit, NDJSON) are kept
# in target/schemathesis-report for inspection after a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

log() { printf '\n== %s\n' "$*" >&2; }

SCHEMATHESIS_VERSION=4.32.5
SPEC=${OCC_REFERENCE_OPENAPI:-$ROOT/spec/reference-openapi.json}
VENV=$ROOT/target/schemathesis-venv
REPORT_DIR=$ROOT/target/schemathesis-report
# Test cases per operation and phase; the coverage phase adds its own deterministic cases.
MAX_EXAMPLES=${SCHEMATHESIS_MAX_EXAMPLES:-25}
SEED=${SCHEMATHESIS_SEED:-20260101}

if [ ! -f "$SPEC" ]; then
  echo "reference OpenAPI document not found: $SPEC" >&2
  exit 1
fi

# --- tools -----------------------------------------------------------------------------------
# shellcheck source=lib/python-venv.sh
. "$ROOT/scripts/lib/python-venv.sh"
python_venv "$VENV" "schemathesis==$SCHEMATHESIS_VERSION"

# shellcheck source=lib/occ-binary.sh
. "$ROOT/scripts/lib/occ-binary.sh"
occ_binary

# --- a fresh installation --------------------------------------------------------------------
DIR=$(mktemp -d)
SERVER_PID=
MODELS_PID=
cleanup() {
  for pid in $SERVER_PID $MODELS_PID; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

DB=sqlite://$DIR/occ.db
"$OCC" migrate --database-url "$DB" >"$DIR/setup.log" 2>&1
printf 'schemathesis-admin-password' >"$DIR/pw"
"$OCC" bootstrap --database-url "$DB" --admin-password-file "$DIR/pw" \
  --service-key-file "$DIR/key.json" >>"$DIR/setup.log" 2>&1

# The bootstrap Namespace `default` starts `provisioning`; the worker (not written yet) makes it
# `ready`. Most namespaced routes answer 409 NAMESPACE_NOT_READY before that, so mark it ready
# directly to reach the success paths. provisioning → ready is an allowed transition of the
# `namespace_lifecycle` trigger; nothing else changes with it (deleted_at stays NULL).
python3 - "$DIR/occ.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
with db:
    n = db.execute("UPDATE namespaces SET status = 'ready' WHERE name = 'default' AND status = 'provisioning'").rowcount
if n != 1:
    sys.exit(f"expected to mark one Namespace ready, marked {n}")
PY

KEY=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["data"]["key"])' "$DIR/key.json")
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE=http://127.0.0.1:$PORT

# A model provider for model discovery: `GET /v1/models` answers one model (either provider's
# list shape), so discovery reaches its success path; no request leaves the machine.
MODELS_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$MODELS_PORT" >"$DIR/models.log" 2>&1 <<'PY' &
import http.server, json, sys
class Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": "gpt-test", "display_name": "GPT test"}]}).encode()
        self.send_response(200 if self.path.split("?")[0] == "/v1/models" else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Models).serve_forever()
PY
MODELS_PID=$!

OCC_OPENAI_BASE_URL=http://127.0.0.1:$MODELS_PORT/v1 OCC_ANTHROPIC_BASE_URL=http://127.0.0.1:$MODELS_PORT/v1 \
OCC_DATABASE_URL=$DB OCC_DATA_DIR=$DIR/data OCC_PORT=$PORT OCC_HOST=127.0.0.1 \
  OCC_AUTH_BASE_URL=$BASE \
  OCC_LOG=${OCC_LOG:-warn} OCC_AUTH_SECRET=$(python3 -c 'import secrets; print(secrets.token_hex(32))') \
  "$OCC" serve >"$DIR/serve.log" 2>&1 &
SERVER_PID=$!

# Wait for it, then seed one of each resource so the run reaches success paths (GET, PATCH,
# deploy, revisions, deployments, bindings) instead of only 404s on random ids. Writes the
# schemathesis configuration: ids are drawn from these dictionaries part of the time.
if ! python3 - "$BASE" "$KEY" "$DIR/key.json" "$DIR/schemathesis.toml" "$SERVER_PID" "$DIR/occ.db" <<'PY'; then
import json, os, sqlite3, sys, time, urllib.error, urllib.request

base, key, key_file, config_path, pid, db_path = sys.argv[1:7]


def call(method, path, body=None, expect=(200, 201, 202)):
    data = None if body is None else json.dumps(body).encode()
    headers = {"x-api-key": key}
    if data is not None:
        headers["content-type"] = "application/json"
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    if status not in expect:
        sys.exit(f"seeding: {method} {path} -> {status} {text}")
    return json.loads(text)["data"]


deadline = time.monotonic() + 60
while True:
    try:
        os.kill(int(pid), 0)
    except OSError:
        sys.exit("occ serve exited before answering")
    try:
        call("GET", "/installation")
        break
    except (urllib.error.URLError, ConnectionError, OSError):
        if time.monotonic() > deadline:
            sys.exit("occ serve did not answer within 60 s")
        time.sleep(0.1)

boot = json.load(open(key_file))["data"]
ns = next(n for n in call("GET", "/namespaces") if n["name"] == "default")["id"]
p = f"/namespaces/{ns}"
native = {"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}}


def seed(tag):
    """One of each resource; `tag` keeps names unique."""
    r = {}
    r["secret"] = call("POST", p + "/secrets", {"name": f"st-{tag}", "value": "sk-seed-value-123"})
    provider_key = call("POST", p + "/secrets", {"name": f"st-{tag}-provider", "value": "sk-seed-provider-1"})
    r["credential_source"] = call("POST", p + "/credential-sources", {
        "name": f"st-{tag}", "type": "openai",
        "secrets": {"api_key": {"kind": "secret", "namespaceId": ns, "id": provider_key["id"]}}})
    r["configuration"] = call("POST", p + "/configurations", {"kind": "agent", "values": native})
    r["agent"] = call("POST", p + "/agents", {
        "name": f"st-{tag}", "configurationId": r["configuration"]["id"],
        "harnessAuth": {"method": "runtime"}})
    r["service_account"] = call("POST", p + "/service-accounts", {"name": f"st-{tag}"})
    r["role"] = call("POST", p + "/iam/roles", {"name": f"st-{tag}", "permissions": [
        {"action": "read", "resourceKind": "agent"}, {"action": "read", "resourceKind": "configuration"}]})
    return r


keep = seed("keep")
agent = keep["agent"]
keep["revision"] = call("POST", f"{p}/agents/{agent['id']}/deploy")
keep["binding"] = call("POST", p + "/iam/access-bindings", {
    "subjectKind": "identity", "subjectId": agent["servicePrincipalId"], "roleId": keep["role"]["id"],
    "resourceKind": "agent", "resourceId": agent["id"]})
# A second key that the run may revoke: never the bootstrap key the run authenticates with.
keep["service_key"] = call("POST", "/api/auth/service-keys", {
    "servicePrincipalId": boot["servicePrincipalId"], "name": "st-spare"})
# The DELETE operations get their own resources, so the rest of the run keeps reaching the
# seeded ones whatever order the operations run in.
doomed = seed("doomed")
doomed["configuration"] = call("POST", p + "/configurations", {"kind": "agent", "values": native})
doomed["binding"] = call("POST", p + "/iam/access-bindings", {
    "subjectKind": "identity", "subjectId": agent["servicePrincipalId"], "roleId": keep["role"]["id"],
    "resourceKind": "configuration", "resourceId": keep["configuration"]["id"]})
doomed["namespace"] = call("POST", "/namespaces", {"name": "st-doomed"})
# The administrator's console session (getAgentNativeAdmin takes sessions only) with a runtime
# role on the kept Agent: the Control UI's status answers 200, and the runtime-role PATCH has a
# person's Agent-use binding to change (the other seeded binding is a service principal's: 409).
signin = urllib.request.Request(base + "/api/auth/sign-in/email", method="POST",
    data=json.dumps({"email": "admin@openclaw.local", "password": "schemathesis-admin-password"}).encode(),
    headers={"content-type": "application/json"})
with urllib.request.urlopen(signin, timeout=10) as r:
    session_token = r.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
me = urllib.request.Request(base + "/api/auth/session",
    headers={"cookie": f"openclaw_occ.session_token={session_token}"})
with urllib.request.urlopen(me, timeout=10) as r:
    admin_principal = json.loads(r.read().decode())["data"]["user"]["principalId"]
user_role = call("POST", p + "/iam/roles", {"name": "st-agent-user", "permissions": [
    {"action": "use", "resourceKind": "agent"}]})
keep["runtime_binding"] = call("POST", p + "/iam/access-bindings", {
    "subjectKind": "identity", "subjectId": admin_principal, "roleId": user_role["id"],
    "resourceKind": "agent", "resourceId": agent["id"], "runtimeRole": "platform-administrator"})


def session_call(method, path, body, token):
    req = urllib.request.Request(base + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json", "origin": base,
                 "cookie": f"openclaw_occ.session_token={token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers, json.loads(r.read().decode())["data"]


# Account administration takes a person's session: a second administrator (bound to the
# bootstrap administrator Role, read from the database: no route lists Installation Roles)
# administers a third account, so no case can end the session it runs with.
with sqlite3.connect(db_path) as db:
    admin_role = db.execute("SELECT id FROM iam_roles WHERE namespace_id IS NULL AND id LIKE 'role_admin_%'").fetchone()[0]
account_password = "schemathesis-account-password"
session_call("POST", "/api/auth/accounts", {"email": "st-accounts@openclaw.local",
    "password": account_password, "roleId": admin_role}, session_token)
_, victim = session_call("POST", "/api/auth/accounts", {"email": "st-victim@openclaw.local",
    "password": account_password}, session_token)
headers, _ = session_call("POST", "/api/auth/sign-in/email",
    {"email": "st-accounts@openclaw.local", "password": account_password}, "")
accounts_token = headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]

q = json.dumps
ids = lambda r, kinds: {k: [r[k]["id"]] for k in kinds}
dictionaries = {
    **ids(keep, ["agent", "configuration", "secret", "service_account", "role", "revision",
                 "service_key", "credential_source"]),
    "binding": [keep["binding"]["id"], keep["runtime_binding"]["id"]],
    "account": [victim["id"]],
    "principal": [boot["servicePrincipalId"], agent["servicePrincipalId"]],
    "resource_kind": ["agent"],
    "runtime_role": ["platform-administrator"],
    **{f"doomed_{k}": v for k, v in ids(doomed, ["agent", "configuration", "secret", "service_account",
                                                  "role", "binding", "credential_source"]).items()},
}
# How often a bound parameter takes a seeded id; the rest are generated (404s, 400s).
P = 0.6
bindings = {
    "path.agentId": "agent",
    "path.configurationId": "configuration",
    "path.secretId": "secret",
    "path.credentialSourceId": "credential_source",
    "path.serviceAccountId": "service_account",
    "path.roleId": "role",
    "path.bindingId": "binding",
    "path.revisionId": "revision",
    "path.deploymentId": "revision",
    "path.keyId": "service_key",
    "path.userId": "account",
    "body.configurationId": "configuration",
    "body.servicePrincipalId": "principal",
    "body.subjectId": "principal",
    "body.roleId": "role",
    "body.resourceKind": "resource_kind",
    "body.resourceId": "agent",
    "body.runtimeRole": "runtime_role",
}
deletes = {
    "deleteAgent": "agentId",
    "deleteConfiguration": "configurationId",
    "deleteSecret": "secretId",
    "deleteCredentialSource": "credentialSourceId",
    "deleteServiceAccount": "serviceAccountId",
    "deleteIAMRole": "roleId",
    "deleteIAMAccessBinding": "bindingId",
}
lines = [
    "# Generated by scripts/schemathesis.sh for one run.",
    "[auth.openapi.serviceApiKey]",
    f"api_key = {q(key)}",
    "",

    # Checks: all of them (set here, not on the command line, where they would override the
    # per-operation exceptions below) — no 5xx, documented status codes, content types and
    # headers, bodies valid against the response schema; schema-invalid requests rejected,
    # unsupported methods answered 405 with Allow, auth enforced, deleted resources gone and
    # created ones readable — except:
    # - positive_data_acceptance: it wants every schema-valid request accepted, but ids that name
    #   nothing, references to missing resources and semantic rules (an action a resource kind
    #   does not have, runtimeRole without a human subject) are refused with 400 by design, in
    #   the reference as in occ.
    # - object_level_authorization: needs a second identity; the authorization matrix has its
    #   own tests in crates/occ-api/tests.
    "[checks]",
    "enabled = true",
    "positive_data_acceptance = { enabled = false }",
    "object_level_authorization = { enabled = false }",
    # A value longer than the schema's maxLength makes the body larger than the route's limit:
    # 413 is a rejection too, and documented for these operations.
    "negative_data_rejection = { expected-statuses = "
    '[400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429, "5xx"] }',
    "",
    "[parameters]",
    f"{q('path.namespaceId')} = {q(ns)}",
]
lines += [f"{q(k)} = {{ dictionary = {q(v)}, probability = {P} }}" for k, v in bindings.items()]
lines.append("")
for name, values in dictionaries.items():
    lines += [f"[dictionaries.{name}]", f"values = {q(values)}", ""]
lines += [
    "[[operations]]",
    'include-operation-id = "deleteNamespace"',
    f"parameters = {{ {q('path.namespaceId')} = {q(doomed['namespace']['id'])} }}",
    "",
]
# Coverage and fuzzing also reuse ids captured from earlier responses; not for these DELETEs, or
# they would delete the seeded resources early (the stateful phase, last, still may).
no_reuse = "{ coverage = { extra-data-sources = { responses = false } }, fuzzing = { extra-data-sources = { responses = false } } }"
for op, param in deletes.items():
    dictionary = "doomed_" + bindings["path." + param]
    lines += [
        "[[operations]]",
        f"include-operation-id = {q(op)}",
        f"parameters = {{ {q('path.' + param)} = {{ dictionary = {q(dictionary)}, probability = {P} }} }}",
        f"phases = {no_reuse}",
        "",
    ]
lines += [
    # Account administration takes a person's session (with the console's Origin): these
    # operations send the second administrator's cookie, fixed like the Control UI's below.
    # The reference documents no 400 for them, yet a malformed id or body must be refused:
    # occ answers 400 naming the field, so the documented-status check is off here (bodies and
    # every other check still apply; the 400s are tested in crates/occ-api/tests).
    "[[operations]]",
    f"include-path-regex = {q('^/api/auth/accounts/')}",
    f"headers = {{ cookie = {q('openclaw_occ.session_token=' + accounts_token)}, origin = {q(base)} }}",
    "checks = { use_after_free = { enabled = false }, negative_data_rejection = { enabled = false }, "
    "status_code_conformance = { enabled = false } }",
    "",
    # The Control UI's status takes a console session only: this operation alone sends the
    # administrator's session cookie (as auth for every operation, schemathesis would send it
    # instead of the key everywhere, and session writes need the console's Origin). Listed
    # first: the first matching [[operations]] entry applies.
    "[[operations]]",
    'include-operation-id = "getAgentNativeAdmin"',
    f"headers = {{ cookie = {q('openclaw_occ.session_token=' + session_token)} }}",
    # The cookie is a fixed header here, so a case that "drops" it still carries it: the
    # missing-session refusal (401) is tested in crates/occ-api/tests instead.
    "checks = { use_after_free = { enabled = false }, negative_data_rejection = { enabled = false } }",
    "",
    # Without a worker no Agent has an active revision: the workspace-file operations answer
    # the documented 503 DEPENDENCY_UNAVAILABLE after validation and authorization, so the
    # "no 5xx" check does not apply to them (everything else is still checked). Listed first:
    # the first matching [[operations]] entry applies.
    "[[operations]]",
    f"include-path-regex = {q('/workspace/files/')}",
    "checks = { use_after_free = { enabled = false }, not_a_server_error = { enabled = false } }",
    "",
    # This server has no ServiceAccount Driver (no chatgpt Backend with an admin key): issuing a
    # credential answers the documented 503 DEPENDENCY_UNAVAILABLE after validation and
    # authorization, as the reference does without one.
    "[[operations]]",
    'include-operation-id = "createServiceAccountCredential"',
    "checks = { not_a_server_error = { enabled = false } }",
    "",
    # Model discovery of a ChatGPT personal access token (`authMethod: codex_pat`) is the
    # documented 501: occ lists models for API keys only (the API keys reach the local model
    # list above: 200).
    "[[operations]]",
    'include-operation-id = "discoverAgentModels"',
    "checks = { not_a_server_error = { enabled = false } }",
    "",
    # Without a worker no Agent serves a revision, and the runtime roles come from the revision
    # an Agent serves: the documented 503 DEPENDENCY_UNAVAILABLE after validation and
    # authorization.
    "[[operations]]",
    'include-operation-id = "listAgentRuntimeRoles"',
    "checks = { not_a_server_error = { enabled = false } }",
    "",
    # Runtime logs: without a worker no Agent has a gateway or a log, so a page is empty; the
    # per-caller rate limit answers the documented 429 once the run has spent its burst.
    "[[operations]]",
    'include-operation-id = "getAgentDeploymentRuntimeLogs"',
    "checks = { use_after_free = { enabled = false } }",
    "",
    # Deleting an Agent is asynchronous, in the reference as in occ: 202, and the Agent stays
    # readable (status `deleting`, revisions, deployments) until the worker removes it. The
    # Namespace is too, but every operation but deleteNamespace is pinned to `default`.
    "[[operations]]",
    f"include-path-regex = {q('^/namespaces/[{]namespaceId[}]/agents/[{]agentId[}]')}",
    "checks = { use_after_free = { enabled = false } }",
    "",
]
with open(config_path, "w") as f:
    f.write("\n".join(lines))
PY
  tail -n 50 "$DIR/serve.log" >&2 || true
  exit 1
fi

# --- the run ---------------------------------------------------------------------------------
rm -rf "$REPORT_DIR"
mkdir -p "$REPORT_DIR"
log "schemathesis $SCHEMATHESIS_VERSION against occ on $BASE (seed $SEED, $MAX_EXAMPLES examples per operation)"
set +e
(
  cd "$DIR" &&
    "$VENV/bin/schemathesis" --config-file "$DIR/schemathesis.toml" run "$SPEC" \
      --url "$BASE" \
      --max-examples "$MAX_EXAMPLES" \
      --seed "$SEED" \
      --generation-database none \
      --continue-on-failure \
      --workers 1 \
      --request-timeout 10 \
      --no-color \
      --report junit,ndjson --report-dir "$REPORT_DIR"
)
status=$?
set -e

# A short summary: responses per operation and status code, from the NDJSON report.
python3 - "$REPORT_DIR" <<'PY' || true
import collections, glob, json, sys
counts = collections.defaultdict(collections.Counter)
for path in glob.glob(sys.argv[1] + "/*.ndjson"):
    for line in open(path):
        event = json.loads(line).get("ScenarioFinished")
        if not event:
            continue
        label = event["recorder"]["label"]
        for i in (event["recorder"].get("interactions") or {}).values():
            if i.get("response") and label.split(" ", 1)[0] == i["request"]["method"]:
                counts[label][i["response"]["status_code"]] += 1
print("\nresponses by operation and status:")
for label in sorted(counts, key=lambda l: (l.split(" ", 1)[1], l)):
    row = " ".join(f"{s}×{n}" for s, n in sorted(counts[label].items()))
    print(f"  {label:78} {row}")
PY

if [ "$status" -ne 0 ]; then
  log "schemathesis: FAILED (exit $status); reports in $REPORT_DIR; server log follows"
  tail -n 50 "$DIR/serve.log" >&2 || true
  exit "$status"
fi
log "schemathesis: every response conforms to the reference OpenAPI document"
