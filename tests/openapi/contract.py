#!/usr/bin/env python3
"""The API's answers against its OpenAPI document (ctest: openapi_contract).

    python3 tests/openapi/contract.py SERVER_TEST_BINARY

Runs the API test suite (gnomon_server_test) with GNOMON_API_RECORD set, so that every answer
its servers give is recorded (src/server/test_api_server.h RecordingHandler), then checks each:
its path and method are an operation of src/server/openapi.json, its status is one the
operation documents, and a JSON body validates against the documented schema (the OpenAPI 3.0
schema read as JSON Schema draft 4, `nullable` included). Every failure is listed; exit 1 if
any. Needs python3-jsonschema.
"""
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:  # an interpreter of its own (pyenv, venv): Debian's python3-jsonschema
    sys.path.append("/usr/lib/python3/dist-packages")
    import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "src", "server", "openapi.json")


def draft4(node):
    """OpenAPI 3.0 schema -> JSON Schema draft 4: `nullable: true` adds null to the type."""
    if isinstance(node, list):
        return [draft4(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: draft4(v) for k, v in node.items() if k not in ("nullable", "example")}
    if node.get("nullable") and "type" in out:
        t = out["type"]
        out["type"] = (t if isinstance(t, list) else [t]) + ["null"]
    return out


def main():
    binary = sys.argv[1]
    doc = json.load(open(DOC))
    components = draft4(doc.get("components", {}))
    ops = []  # (regex, method, operation)
    for template, item in doc["paths"].items():
        pattern = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
        for method, op in item.items():
            if isinstance(op, dict) and "responses" in op:
                ops.append((re.compile(pattern), method.upper(), template, op))
    with tempfile.TemporaryDirectory() as tmp:
        record = os.path.join(tmp, "answers.jsonl")
        env = dict(os.environ, GNOMON_API_RECORD=record)
        r = subprocess.run([binary, "--gtest_brief=1"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            print(r.stdout[-4000:])
            print("openapi_contract: FAIL: the API test suite failed")
            return 1
        answers = [json.loads(line) for line in open(record)]
    failures = collections.Counter()
    checked = 0
    for a in answers:
        path, method = a["path"], "GET" if a["method"] == "HEAD" else a["method"]
        if not path.startswith("/api/") and path not in ("/healthz", "/readyz"):
            continue  # the dashboard's static files
        matches = [o for o in ops if o[0].match(path)]
        if not matches:
            continue  # an unknown path: the test asked for a 404 of a route that does not exist
        op = next((o for o in matches if o[1] == method), None)
        if op is None:
            if a["status"] == 405:
                continue  # a method the path does not have, refused as documented by HTTP
            failures["%s %s: no such operation (status %d)" % (method, matches[0][2], a["status"])] += 1
            continue
        _, _, template, operation = op
        responses = operation["responses"]
        resp = responses.get(str(a["status"])) or responses.get("default")
        where = "%s %s %d" % (method, template, a["status"])
        if resp is None:
            failures["%s: status not documented" % where] += 1
            continue
        if "$ref" in resp:
            resp = doc["components"]["responses"][resp["$ref"].split("/")[-1]]
        if "invalid_json" in a:
            failures["%s: the answer says JSON but is not: %r" % (where, a["invalid_json"][:80])] += 1
            continue
        if "body" not in a or a["body"] is None:
            continue  # not a JSON answer (204, the OpenAPI document's own text, a stream)
        schema = resp.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            failures["%s: a JSON answer with no documented schema" % where] += 1
            continue
        root = dict(draft4(schema), components=components)
        try:
            jsonschema.Draft4Validator(root).validate(a["body"])
            checked += 1
        except jsonschema.ValidationError as e:
            failures["%s: %s at %s" % (where, e.message[:200], "/".join(map(str, e.absolute_path)))] += 1
    for f, n in sorted(failures.items()):
        print("FAIL (%dx) %s" % (n, f))
    print("openapi_contract: %d answers recorded, %d JSON answers validated, %d kinds of failure"
          % (len(answers), checked, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
