# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""A Hugging Face Hub stand-in for the tests: the push and load paths run against a server, not a fake `HfApi`.

No registry package runs a Hub that accepts uploads (issue 50), so this is a small standard-library server on
127.0.0.1 answering what huggingface_hub's upload (without Xet: `HF_HUB_DISABLE_XET=1`) and download paths
call, as the Hub answers them: repository creation, preupload, commits of regular and LFS files, the LFS batch
API and its uploads, resolve (HEAD and GET), the file tree and revision info. Nothing more: routes nobody calls
answer 404 and are recorded in `unknown`, so a client that starts calling a new route shows up in a test.

Tokens are checked like the Hub checks them: a token the server does not know is refused everywhere (401),
writes need the owner's token, and a private repository is answered 404 (RepoNotFound) to anyone else, as if
it did not exist. `max_upload_bytes` makes larger uploads fail with 413, like a storage limit."""

import base64
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

# Files the Hub keeps in LFS whatever their content (its default .gitattributes), besides binary and large ones.
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".onnx", ".h5", ".msgpack", ".npy", ".npz")
LFS_MIN_SIZE = 10 * 1024 * 1024
ME, OTHER = "hf_me_token", "hf_other_token"  # the tokens of the users `me` and `other`
SOURCE = str(Path(__file__).resolve().parents[1] / "src")
REPO_ID = r"(?P<repo>[\w.-]+/[\w.-]+)"
REVISION = r"(?P<revision>[^/]+)"


class HubError(Exception):
    """An answer other than 200: the status, the Hub's error code (`X-Error-Code`, which huggingface_hub turns
    into RepositoryNotFoundError, EntryNotFoundError, ...), its message, and what else the Hub's answer holds."""

    def __init__(self, status, message, code=None, **extra):
        super().__init__(message)
        self.status, self.code, self.extra = status, code, extra


@dataclass
class Repo:
    owner: str
    private: bool
    commits: list = field(default_factory=list)  # [(oid, {path: (content, lfs sha256 or None)})], oldest first

    def snapshot(self, revision):
        if revision == "main":
            return self.commits[-1]
        for oid, files in self.commits:
            if oid == revision:
                return oid, files
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")


def git_blob_id(content):
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class HubStandIn:
    """The server's state (users, repositories, stored LFS objects) and its life: `start()`, `url`, `stop()`."""

    def __init__(self, users):
        self.users = dict(users)  # token -> user name
        self.repos = {}
        self.lfs = {}  # (repo, sha256) -> content, uploaded: like the Hub's, a repository's LFS objects are its own
        self.tickets = {}  # upload ticket -> (repo, sha256, size): what the LFS batch answer allowed
        self.max_upload_bytes = None
        self.requests, self.unknown = [], []
        self.lock = threading.Lock()
        self.server = None

    def start(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.hub = self
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self):
        """Idempotent: a test stops the server to see a push meet a Hub that is down, the fixture after it."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def environment(self, home, token=ME, package=True):
        """A child process's environment with the stand-in as its Hub: set before Python starts, because
        huggingface_hub reads the endpoint, offline mode and Xet when it is imported (with `hf_xet` installed it
        would send files through Xet, which the stand-in does not speak); a cache of its own in `home`, empty,
        as a new user's. Without `package`, neither linformer_hf nor linformer_training is on its path: what
        it loads comes from the Hub as remote code."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE", "TRANSFORMERS_"))}
        env.update(HF_ENDPOINT=self.url, HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1", HF_HOME=str(home),
                   HF_HUB_DISABLE_TELEMETRY="1", TOKENIZERS_PARALLELISM="false")
        env["PYTHONPATH"] = SOURCE if package else ""
        if token:
            env["HF_TOKEN"] = token
        return env

    def use_here(self, monkeypatch, url=None):
        """This process's huggingface_hub pointed at the stand-in (or at `url`), as `environment` points a child's,
        for the quick checks that need no fresh process: what huggingface_hub derived from the environment at
        import (the endpoint, the download address made from it, offline mode, Xet, telemetry) is set anew."""
        import huggingface_hub.constants

        url = url or self.url
        settings = {"ENDPOINT": url, "HUGGINGFACE_CO_URL_TEMPLATE": url + "/{repo_id}/resolve/{revision}/{filename}",
                    "HF_HUB_OFFLINE": False, "HF_HUB_DISABLE_XET": True, "HF_HUB_DISABLE_TELEMETRY": True}
        for name, value in settings.items():
            monkeypatch.setattr(huggingface_hub.constants, name, value)

    def run(self, command, home, cwd, token=ME, package=True):
        """`command` (a list, after the interpreter) in a fresh Python process using the stand-in."""
        return subprocess.run([sys.executable, *command], capture_output=True, text=True, cwd=cwd, timeout=300,
                              check=False, env=self.environment(home, token, package))

    def load_as_user(self, code, home, token=ME, args=()):
        """`code` (with `args` in sys.argv[1:]) run as a user who never installed this project: a fresh process,
        an empty cache, the packages blocked (an editable install would find them otherwise); its last stdout
        line is JSON."""
        blocked = 'import sys\nsys.modules["linformer_hf"] = sys.modules["linformer_training"] = None\n'
        result = self.run(["-c", blocked + code, *args], home, cwd=home.parent, token=token, package=False)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout.strip().splitlines()[-1])

    def files(self, repo_id, revision="main"):
        """What a repository holds: path -> bytes (LFS files resolved to their content)."""
        return {path: content for path, (content, _) in self.repos[repo_id].snapshot(revision)[1].items()}

    # --- what the routes do ------------------------------------------------------------------------------

    def user(self, headers):
        authorization = headers.get("Authorization") or ""
        if not authorization:
            return None
        token = authorization.removeprefix("Bearer ").strip()
        if token not in self.users:
            raise HubError(401, "Invalid credentials in Authorization header")
        return self.users[token]

    def readable(self, repo_id, user):
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and repo.owner != user):
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    def writable(self, repo_id, user):
        if user is None:
            raise HubError(401, "You must be authenticated to write to a repository")
        repo = self.readable(repo_id, user)
        if repo.owner != user:
            raise HubError(403, f"You don't have the rights to write to {repo_id}")
        return repo

    def check_size(self, body):
        if self.max_upload_bytes is not None and len(body) > self.max_upload_bytes:
            raise HubError(413, f"Payload Too Large: {len(body)} bytes, the limit is {self.max_upload_bytes}")

    def create_repo(self, user, payload):
        if user is None:
            raise HubError(401, "You must be authenticated to create a repository")
        namespace = payload.get("organization") or user
        if namespace != user:
            raise HubError(403, f"You don't have the rights to create a model under the namespace {namespace}")
        repo_id = f"{namespace}/{payload['name']}"
        if repo_id in self.repos:
            raise HubError(409, "You already created this model repo", url=f"{self.url}/{repo_id}")  # as the Hub
        repo = Repo(owner=user, private=payload.get("visibility", "public") == "private")
        repo.commits.append((secrets.token_hex(20), {}))
        self.repos[repo_id] = repo
        return {"url": f"{self.url}/{repo_id}", "name": repo_id}

    def model_info(self, repo_id, revision, user):
        repo = self.readable(repo_id, user)
        oid, files = repo.snapshot(revision)
        return {"id": repo_id, "author": repo.owner, "sha": oid, "private": repo.private,
                "siblings": [{"rfilename": path} for path in sorted(files)]}

    def preupload(self, repo_id, user, payload):
        self.writable(repo_id, user)
        answers = []
        for entry in payload["files"]:
            sample = base64.b64decode(entry["sample"])
            lfs = entry["path"].endswith(LFS_SUFFIXES) or entry["size"] >= LFS_MIN_SIZE or b"\0" in sample
            answers.append({"path": entry["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False})
        return {"files": answers}

    def lfs_batch(self, repo_id, user, payload):
        self.writable(repo_id, user)
        objects = []
        for entry in payload["objects"]:
            answer = {"oid": entry["oid"], "size": entry["size"]}
            if (repo_id, entry["oid"]) not in self.lfs:  # stored objects need no upload (no "actions")
                ticket = secrets.token_hex(16)
                self.tickets[ticket] = (repo_id, entry["oid"], entry["size"])
                answer["actions"] = {"upload": {"href": f"{self.url}/lfs-storage/{ticket}"},
                                     "verify": {"href": f"{self.url}/{repo_id}.git/info/lfs/objects/verify"}}
            objects.append(answer)
        return {"transfer": "basic", "objects": objects}

    def store_lfs(self, ticket, body):
        """A PUT to the address the batch answer gave: like a signed storage URL, it needs no token."""
        if ticket not in self.tickets:
            raise HubError(403, "This upload address is not valid")
        self.check_size(body)
        repo_id, oid, size = self.tickets.pop(ticket)
        if len(body) != size or hashlib.sha256(body).hexdigest() != oid:
            raise HubError(400, f"The content does not match the announced object {oid} ({size} bytes)")
        self.lfs[repo_id, oid] = body
        return {}

    def verify_lfs(self, repo_id, user, payload):
        self.writable(repo_id, user)
        stored = self.lfs.get((repo_id, payload["oid"]))
        if stored is None or len(stored) != payload["size"]:
            raise HubError(404, f"LFS object {payload['oid']} was not uploaded")
        return {}

    def commit(self, repo_id, revision, user, body):
        repo = self.writable(repo_id, user)
        self.check_size(body)
        if revision != "main":
            raise HubError(400, "The stand-in commits to main only")
        files = dict(repo.commits[-1][1])
        for line in body.splitlines():
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "file":
                files[value["path"]] = (base64.b64decode(value["content"]), None)
            elif key == "lfsFile":
                if (repo_id, value["oid"]) not in self.lfs:
                    raise HubError(422, f"LFS file {value['path']} ({value['oid']}) was never uploaded")
                files[value["path"]] = (self.lfs[repo_id, value["oid"]], value["oid"])
            elif key != "header":  # deletions and copies: no push path here makes them
                raise HubError(400, f"The stand-in does not take commit operations of type {key}")
        oid = secrets.token_hex(20)
        repo.commits.append((oid, files))
        return {"commitUrl": f"{self.url}/{repo_id}/commit/{oid}", "commitOid": oid, "success": True,
                "pullRequestUrl": None}

    def tree(self, repo_id, revision, path, recursive, user):
        _, files = self.readable(repo_id, user).snapshot(revision)
        prefix = f"{path.strip('/')}/" if path else ""
        if path and not any(p.startswith(prefix) for p in files):
            raise HubError(404, f"{path} does not exist on {revision}", "EntryNotFound")
        entries, folders = [], set()
        for name, (content, lfs) in sorted(files.items()):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix):]
            if "/" in rest and not recursive:
                folders.add(prefix + rest.split("/")[0])
                continue
            entries.append(file_entry(name, content, lfs))
            if recursive:
                parts = rest.split("/")[:-1]
                folders.update(prefix + "/".join(parts[:i + 1]) for i in range(len(parts)))
        return [{"type": "directory", "oid": git_blob_id(f.encode()), "path": f} for f in sorted(folders)] + entries

    def resolve(self, repo_id, revision, path, user):
        """A file's content and the headers huggingface_hub's download reads (commit, ETag, size)."""
        oid, files = self.readable(repo_id, user).snapshot(revision)
        if path not in files:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
        content, lfs = files[path]
        headers = {"X-Repo-Commit": oid, "ETag": f'"{git_blob_id(content)}"'}
        if lfs:
            headers.update({"X-Linked-Etag": f'"{lfs}"', "X-Linked-Size": str(len(content))})
        return content, headers


def file_entry(path, content, lfs):
    entry = {"type": "file", "oid": git_blob_id(content), "size": len(content), "path": path}
    if lfs:
        entry["lfs"] = {"oid": lfs, "size": len(content), "pointerSize": 134}
    return entry


class Handler(BaseHTTPRequestHandler):
    """Routes a request to the stand-in (`self.server.hub`) and writes its answer or its HubError."""

    def log_message(self, format, *args):  # the tests read `hub.requests`, not the server's log
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_HEAD(self):
        self.answer("HEAD")

    def do_GET(self):
        self.answer("GET")

    def do_POST(self):
        self.answer("POST")

    def do_PUT(self):
        self.answer("PUT")

    def answer(self, method):
        hub, url = self.server.hub, urlsplit(self.path)
        path, query = unquote(url.path), parse_qs(url.query)
        body = self.body() if method in ("POST", "PUT") else b""
        with hub.lock:
            hub.requests.append((method, path))
            try:
                result = route(hub, method, path, query, body, self.headers)
            except HubError as error:
                self.send(error.status, json.dumps({"error": str(error), **error.extra}).encode(), {
                    "Content-Type": "application/json", "X-Error-Message": str(error),
                    **({"X-Error-Code": error.code} if error.code else {})}, method)
                return
        if isinstance(result, tuple):  # a file
            self.send(200, result[0], {"Content-Type": "application/octet-stream", **result[1]}, method)
        else:
            self.send(200, json.dumps(result).encode(), {"Content-Type": "application/json"}, method)

    def send(self, status, content, headers, method):
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(content))}.items():
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(content)


def route(hub, method, path, query, body, headers):
    """The Hub's routes that the project's push and load paths call; anything else is recorded and 404."""
    user = hub.user(headers)
    recursive = query.get("recursive", ["False"])[0].lower() == "true"
    routes = [
        ("POST", r"/api/repos/create", lambda m: hub.create_repo(user, json.loads(body))),
        ("POST", r"/api/validate-yaml", lambda m: {"errors": [], "warnings": []}),  # a card's YAML: not checked
        ("GET", rf"/api/models/{REPO_ID}(?:/revision/{REVISION})?",
         lambda m: hub.model_info(m["repo"], m["revision"] or "main", user)),
        ("POST", rf"/api/models/{REPO_ID}/preupload/{REVISION}",
         lambda m: hub.preupload(m["repo"], user, json.loads(body))),
        ("POST", rf"/{REPO_ID}\.git/info/lfs/objects/batch",
         lambda m: hub.lfs_batch(m["repo"], user, json.loads(body))),
        ("PUT", r"/lfs-storage/(?P<ticket>\w+)", lambda m: hub.store_lfs(m["ticket"], body)),
        ("POST", rf"/{REPO_ID}\.git/info/lfs/objects/verify",
         lambda m: hub.verify_lfs(m["repo"], user, json.loads(body))),
        ("POST", rf"/api/models/{REPO_ID}/commit/{REVISION}",
         lambda m: hub.commit(m["repo"], m["revision"], user, body)),
        ("GET", rf"/api/models/{REPO_ID}/tree/{REVISION}(?:/(?P<path>.+))?",
         lambda m: hub.tree(m["repo"], m["revision"], m["path"], recursive, user)),
        ("HEAD|GET", rf"/{REPO_ID}/resolve/{REVISION}/(?P<path>.+)",
         lambda m: hub.resolve(m["repo"], m["revision"], m["path"], user)),
    ]
    for methods, pattern, handle in routes:
        match = re.fullmatch(pattern, path)
        if method in methods.split("|") and match:
            return handle(match)
    hub.unknown.append((method, path))
    raise HubError(404, f"The stand-in does not answer {method} {path}")
