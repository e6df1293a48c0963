"""Check the stand-in's traffic against GitHub's published OpenAPI description.

The description comes from the npm package ``@octokit/openapi`` (``generated/api.github.com.json``),
fetched with ``npm pack`` into a cache directory (``$MINIFY_ACTION_CACHE`` or
``~/.cache/minify-action``) the first time it is needed. It is never committed (28 MB).

    spec = load_spec()                  # None (with a reason) when npm is missing and there is no cache
    checker = OpenAPIChecker(spec)
    problems = checker.check(record)    # record: ghstub.RequestRecord -> list of strings
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import jsonschema

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"  # pinned so that the check is reproducible; bump deliberately
MEMBER = "package/generated/api.github.com.json"


GENERIC_STATUSES = {401, 403, 429}


class SpecUnavailable(Exception):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("MINIFY_ACTION_CACHE") or Path.home() / ".cache" / "minify-action")


def spec_path() -> Path:
    """Return the path of the cached description, fetching it with `npm pack` if needed."""
    cache = cache_dir()
    target = cache / f"api.github.com-{VERSION}.json"
    if target.exists():
        return target
    npm = shutil.which("npm")
    if not npm:
        raise SpecUnavailable("npm is not installed and the OpenAPI description is not cached in " + str(cache))
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        proc = subprocess.run([npm, "pack", f"{PACKAGE}@{VERSION}", "--silent"], cwd=tmp,
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise SpecUnavailable(f"npm pack {PACKAGE}@{VERSION} failed: {proc.stderr.strip()[-500:]}")
        tgz = next(Path(tmp).glob("*.tgz"))
        with tarfile.open(tgz) as tar:
            member = tar.extractfile(MEMBER)
            if member is None:
                raise SpecUnavailable(f"{MEMBER} missing from {tgz.name}")
            partial = Path(tmp) / "spec.json"
            partial.write_bytes(member.read())
        os.replace(partial, target)
    return target


def load_spec() -> dict:
    with open(spec_path(), encoding="utf-8") as fh:
        return json.load(fh)


class OpenAPIChecker:
    """Validates request and response bodies of recorded exchanges against the description."""

    def __init__(self, spec: dict, allow: set[tuple[str, str]] | None = None):
        self.spec = spec
        # Known gaps between the description and GitHub's real behaviour, as
        # (operationId, "request"|"response", location) triples. The description documents only the
        # {"labels": [...]} form for adding labels, while GitHub (and PyGithub's add_to_labels) also
        # accept a bare list, as the description's own prose says.
        self.allow = set(allow or ()) | {("issues/add-labels", "request", "")}
        self._routes = []
        for tmpl, item in spec["paths"].items():
            rx = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(tmpl)) + "$"
            self._routes.append((re.compile(rx), tmpl, item))
        # Most specific first: fewer parameters win ("/issues/comments/{id}" over "/issues/{n}/...").
        self._routes.sort(key=lambda t: t[1].count("{"))
        self._validators: dict = {}

    def operation(self, method: str, path: str):
        for rx, tmpl, item in self._routes:
            if rx.match(path) and method.lower() in item:
                return tmpl, item[method.lower()]
        return None, None

    def _validator(self, schema: dict):
        key = json.dumps(schema, sort_keys=True)
        v = self._validators.get(key)
        if v is None:
            root = dict(schema)
            root["components"] = self.spec["components"]
            root = _nullable_to_type(root)
            v = jsonschema.Draft4Validator(root)
            self._validators[key] = v
        return v

    def _errors(self, schema: dict, value, where: str, op_id: str) -> list[str]:
        out = []
        for err in self._validator(schema).iter_errors(value):
            loc = "/".join(str(p) for p in err.absolute_path)
            if (op_id, where, loc) in self.allow:
                continue
            out.append(f"{where} {loc or '<root>'}: {err.message[:300]}")
        return out

    def check(self, rec, prefix: str = "") -> list[str]:
        path = rec.path[len(prefix):] if prefix and rec.path.startswith(prefix) else rec.path
        tmpl, op = self.operation(rec.method, path)
        label = f"{rec.method} {path} -> {rec.status}"
        if op is None:
            return [f"{label}: no such operation in the description"]
        op_id = op.get("operationId", tmpl)
        problems = []
        if rec.body is not None and rec.method in ("POST", "PATCH", "PUT"):
            content = (op.get("requestBody") or {}).get("content", {}).get("application/json")
            if content is None:
                problems.append(f"{label}: request body not documented")
            else:
                problems += [f"{label}: {e}" for e in self._errors(content["schema"], rec.body, "request", op_id)]
        resp = op.get("responses", {}).get(str(rec.status))
        if resp is None and (rec.status in GENERIC_STATUSES or rec.status >= 500):
            # Authentication, permission and rate-limit errors can come from any endpoint
            # (docs: "Rate limits for the REST API", "Troubleshooting"); they carry a basic-error body.
            resp = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/basic-error"}}}}
        if resp is None:
            problems.append(f"{label}: status {rec.status} not documented for {op_id}")
            return problems
        resp = self._deref(resp)
        content = (resp.get("content") or {}).get("application/json")
        if content and rec.response is not None:
            problems += [f"{label}: {e}" for e in self._errors(content["schema"], rec.response, "response", op_id)]
        return problems

    def _deref(self, obj: dict) -> dict:
        while "$ref" in obj:
            node = self.spec
            for part in obj["$ref"].lstrip("#/").split("/"):
                node = node[part]
            obj = node
        return obj


def _nullable_to_type(node):
    """OpenAPI 3.0 'nullable: true' -> JSON Schema type lists, recursively."""
    if isinstance(node, dict):
        node = {k: _nullable_to_type(v) for k, v in node.items()}
        if node.pop("nullable", False):
            t = node.get("type")
            if isinstance(t, str):
                node["type"] = [t, "null"]
            elif "type" not in node:
                for key in ("allOf", "oneOf", "anyOf"):
                    if key in node:
                        node = {"anyOf": [node, {"type": "null"}]}
                        break
                else:
                    if "$ref" in node:
                        node = {"anyOf": [{"$ref": node.pop("$ref")}, {"type": "null"}], **node}
            if "enum" in node and None not in node["enum"]:
                node["enum"] = list(node["enum"]) + [None]
        node.pop("discriminator", None)
        return node
    if isinstance(node, list):
        return [_nullable_to_type(x) for x in node]
    return node
