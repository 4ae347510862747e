# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""outputs.py's Hub upload (`--push_to_hub`) end to end, against the Hub stand-in of tests/hub_server.py (issue
50): train_mlm.py, finetune_glue.py (finetuning the pushed masked LM by its Hub name) and distill.py each push a
tiny run from a fresh process whose HF_ENDPOINT is the stand-in; a user who never installed this project then
loads each from an empty cache, as remote code. A failed upload is one line naming the repository and the
cause, and leaves the output folder as it was. The release folders have no upload command (release/*/README.md,
experiments/*/release.py and docs/release.md name none), so none is tested here."""

import hashlib
import json
import shlex
import types
from pathlib import Path

import pytest
from conftest import REPO, write_jsonl
from hub_server import ME, OTHER, HubStandIn
from test_distill import make_teacher

from linformer_training import checkpoints, outputs
from linformer_training.arguments import UsageError

TINY_MODEL = ("hidden_size=32,num_hidden_layers=2,num_attention_heads=4,intermediate_size=64,max_seq_length=64,"
              "projected_dim=16")
TINY_MLM = ["--config_overrides", TINY_MODEL, "--tokenizer_vocab_size", "400", "--per_device_train_batch_size", "8",
            "--max_steps", "2", "--warmup_steps", "0", "--eval_steps", "0", "--report_to", "none"]
WORDS = {"pos": ["good", "great", "fine"], "neg": ["bad", "dull", "poor"]}


def pushed_files(folder):
    """What a push of `folder` must upload: every file but the checkpoints, hidden files and logs."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
            and not p.relative_to(folder).as_posix().startswith((f"{checkpoints.CHECKPOINTS_DIR}/", ".", "logs/"))}


def digests(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(folder).rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The first 15 sections of the bundled Moby Dick, as JSON lines with ids (distill.py wants them)."""
    folder = tmp_path_factory.mktemp("corpus")
    lines = (REPO / "data" / "moby_dick" / "chapters.jsonl").read_text().splitlines()[:15]
    texts = [json.loads(line)["text"] for line in lines]
    return Path(write_jsonl(folder / "moby15.jsonl", [{"id": i, "text": t} for i, t in enumerate(texts)]))


def train_mlm(out, *flags):
    """A tiny train_mlm.py run on the corpus beside `out` (2 updates of a 2-layer Linformer, n = 64)."""
    return [str(REPO / "train_mlm.py"), "--train_file", str(out.parent / "corpus.jsonl"), "--output_dir", str(out),
            *TINY_MLM, *flags]


@pytest.fixture(scope="module")
def pushed(hub, corpus, tokenizer, tmp_path_factory):
    """Each script's tiny run, pushed to the stand-in: {repo: (output folder, the run's stdout)}. The masked LM
    is private; the classifier is finetuned from it by its Hub name (the owner's token reads it)."""
    from linformer_training.conversion import convert_to_linformer

    root = tmp_path_factory.mktemp("pushed")
    (root / "corpus.jsonl").write_bytes(corpus.read_bytes())
    rows = [{"text": f"the whale was {WORDS[label][i % 3]} today", "label": label}
            for i in range(24) for label in ("pos", "neg")]
    train, dev = write_jsonl(root / "train.jsonl", rows[:32]), write_jsonl(root / "dev.jsonl", rows[32:])
    teacher = make_teacher(root / "teacher", tokenizer)
    student = convert_to_linformer(teacher, root / "student", max_seq_length=64, projected_dim=8)
    held_out = root / "held_out.txt"
    held_out.write_text("14\n")
    commands = {
        "me/mlm": train_mlm(root / "mlm", "--push_to_hub", "true", "--hub_model_id", "me/mlm",
                            "--hub_private_repo", "true"),
        "me/classifier": [str(REPO / "finetune_glue.py"), "--model_name_or_path", "me/mlm", "--train_file", train,
                          "--validation_file", dev, "--text_column", "text", "--per_device_train_batch_size", "8",
                          "--max_steps", "2", "--report_to", "none", "--output_dir", str(root / "classifier"),
                          "--push_to_hub", "true", "--hub_model_id", "me/classifier"],
        "me/embedder": [str(REPO / "distill.py"), "--teacher_name_or_path", str(teacher), "--student_name_or_path",
                        str(student), "--train_file", str(corpus), "--exclude_ids_file", str(held_out),
                        "--validation_split_percentage", "10", "--min_length", "4", "--per_device_train_batch_size",
                        "4", "--max_steps", "2", "--eval_steps", "0", "--report_to", "none", "--output_dir",
                        str(root / "embedder"), "--push_to_hub", "true", "--hub_model_id", "me/embedder"],
    }
    runs = {}
    for repo_id, command in commands.items():
        result = hub.run(command, root / "home", cwd=root)
        assert result.returncode == 0, result.stderr[-3000:]
        runs[repo_id] = (Path(command[command.index("--output_dir") + 1]), result.stdout)
    return runs


@pytest.mark.slow
def test_each_script_pushes_its_output_folder_and_prints_the_endpoints_address(pushed, hub):
    for repo_id, (out, stdout) in pushed.items():
        assert f"Pushed to {hub.url}/{repo_id}\n" in stdout, stdout[-500:]
        assert "huggingface.co" not in stdout
        assert hub.files(repo_id) == pushed_files(out), repo_id  # byte for byte, the LFS weights too
        assert "model.safetensors" in hub.files(repo_id)
    assert {repo_id: hub.repos[repo_id].private for repo_id in pushed} == \
        {"me/mlm": True, "me/classifier": False, "me/embedder": False}
    assert hub.unknown == []  # every request was one the stand-in knows


LOAD = """
import json
import sys
import tempfile

import torch
from huggingface_hub import ModelCard
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, pipeline

folders = json.loads(sys.argv[1])


def summary(repo, remote, local, info=None):
    # every tensor of the model loaded from the Hub against the same class loaded from the local output folder
    mine, theirs = remote.state_dict(), local.state_dict()
    differ = [k for k in sorted(mine.keys() | theirs.keys())
              if k not in mine or k not in theirs or not torch.equal(mine[k], theirs[k])]
    return {"class": f"{type(remote).__module__}.{type(remote).__name__}", "differ": differ, "compared": len(mine),
            "info": {k: list(v) for k, v in (info or {}).items()}, "card": ModelCard.load(repo).data.to_dict()}


def refused(repo, token):
    # as another user sees it, with a cache of their own
    try:
        AutoModelForMaskedLM.from_pretrained(repo, trust_remote_code=True, cache_dir=tempfile.mkdtemp(), token=token)
    except OSError as error:
        return str(error).splitlines()[0]


mlm, info = AutoModelForMaskedLM.from_pretrained("me/mlm", trust_remote_code=True, output_loading_info=True)
local = AutoModelForMaskedLM.from_pretrained(folders["me/mlm"], trust_remote_code=True)
fill = pipeline("fill-mask", model="me/mlm", trust_remote_code=True)("Call me <mask>.")
results = {"me/mlm": {**summary("me/mlm", mlm, local, info), "fills": len(fill), "anonymous": refused("me/mlm", False),
                      "other": refused("me/mlm", sys.argv[2])}}

clf, info = AutoModelForSequenceClassification.from_pretrained("me/classifier", trust_remote_code=True, token=False,
                                                               output_loading_info=True)  # public: no token needed
local = AutoModelForSequenceClassification.from_pretrained(folders["me/classifier"], trust_remote_code=True)
results["me/classifier"] = {**summary("me/classifier", clf, local, info), "labels": clf.config.id2label}

texts = ["Call me Ishmael.", "Some years ago, never mind how long precisely, I thought I would sail about."]
remote, local = (SentenceTransformer(name, device="cpu", trust_remote_code=True)
                 for name in ("me/embedder", folders["me/embedder"]))
results["me/embedder"] = {**summary("me/embedder", remote[0].auto_model, local[0].auto_model),
                          "max_abs": float(abs(remote.encode(texts) - local.encode(texts)).max())}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def loaded(pushed, hub, tmp_path_factory):
    """What a user who never installed this project gets from the stand-in, in a fresh process with an empty
    cache: the masked LM (Auto class and fill-mask pipeline), the classifier, the sentence embedder."""
    folders = json.dumps({repo_id: str(out) for repo_id, (out, _) in pushed.items()})
    return hub.load_as_user(LOAD, tmp_path_factory.mktemp("user") / "home", args=[folders, OTHER])


@pytest.mark.slow
@pytest.mark.parametrize("repo_id", ["me/mlm", "me/classifier", "me/embedder"])
def test_a_new_user_loads_the_pushed_weights_as_remote_code(loaded, repo_id):
    result = loaded[repo_id]
    assert result["class"].startswith("transformers_modules.")  # the repo's code, not an installed package
    assert result["differ"] == [] and result["compared"] > 10
    assert all(v == [] for v in result["info"].values())  # nothing missing, nothing left over
    if repo_id == "me/mlm":
        assert result["fills"] == 5  # the pipeline's top 5 for the mask
    if repo_id == "me/classifier":
        assert result["labels"] == {"0": "neg", "1": "pos"}
    if repo_id == "me/embedder":
        assert result["max_abs"] == 0.0  # the same embeddings as the local folder's


@pytest.mark.slow
def test_model_cards_and_their_metadata_arrive(loaded):
    cards = {repo_id: loaded[repo_id]["card"] for repo_id in loaded}
    assert cards["me/mlm"]["pipeline_tag"] == "fill-mask" and "linformer-hf" in cards["me/mlm"]["tags"]
    assert cards["me/classifier"]["pipeline_tag"] == "text-classification"
    assert cards["me/classifier"]["base_model"] == "me/mlm"  # finetuned from the Hub
    assert cards["me/embedder"]["pipeline_tag"] == "sentence-similarity"
    assert all(card["library_name"] == "transformers" for card in cards.values())


@pytest.mark.slow
def test_a_private_repo_is_hidden_from_other_users(loaded):
    for who in ("other", "anonymous"):
        refused = loaded["me/mlm"][who]  # None: the model loaded
        assert refused and "me/mlm is not a local folder and is not a valid model identifier" in refused, who


@pytest.mark.slow
def test_failed_upload_is_one_line_and_the_output_stays_whole(hub, corpus, tmp_path, monkeypatch):
    """A storage limit (413) met by the weights, after the repo was made: exit status 1, one line, the
    folder as its manifest recorded it; the upload command that line gives then succeeds."""
    (tmp_path / "corpus.jsonl").write_bytes(corpus.read_bytes())
    monkeypatch.setattr(hub, "max_upload_bytes", 50_000)  # the weights are about 140 kB, the rest smaller
    result = hub.run(train_mlm(tmp_path / "out", "--push_to_hub", "true", "--hub_model_id", "me/big"),
                     tmp_path / "home", cwd=tmp_path)
    error = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert error.startswith(f"train_mlm.py: error: --push_to_hub: uploading to me/big on {hub.url} failed (Error "
                            f"while uploading 'model.safetensors' to the Hub: HTTP 413: Payload Too Large: "), error
    assert "Nothing is lost" in error and "Pushed to" not in result.stdout
    assert checkpoints.check_manifest(tmp_path / "out", complete=False)  # the model as saved
    assert hub.files("me/big") == {}  # nothing committed
    monkeypatch.setattr(hub, "max_upload_bytes", None)
    later = shlex.split(error.split("upload it later with `")[1].rstrip("`"))
    assert later[0] == "hf"
    done = hub.run(["-c", "from huggingface_hub.cli.hf import main; main()", *later[1:]], tmp_path / "home",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert hub.files("me/big") == pushed_files(tmp_path / "out")


@pytest.fixture
def folder(tmp_path):
    """A saved output folder: its model files under a manifest, a checkpoint and a lock beside them."""
    (tmp_path / "out" / "checkpoints" / "checkpoint_2").mkdir(parents=True)
    (tmp_path / "out" / "config.json").write_text("{}")
    (tmp_path / "out" / "model.safetensors").write_bytes(bytes(range(256)) * 400)
    checkpoints.write_manifest(tmp_path / "out")
    (tmp_path / "out" / "checkpoints" / "checkpoint_2" / "state.json").write_text("{}")
    (tmp_path / "out" / ".lock").write_text("")
    return tmp_path / "out"


def push(hub, url, repo_id, folder, monkeypatch, token=ME, private=False):
    """outputs.push_folder as a script's last step calls it, in this process, with `url` as its Hub."""
    hub.use_here(monkeypatch, url)
    monkeypatch.setenv("HF_TOKEN", token)
    said = []
    run = types.SimpleNamespace(accelerator=types.SimpleNamespace(is_main_process=True), say=said.append,
                                args=types.SimpleNamespace(hub_model_id=repo_id, hub_private_repo=private))
    outputs.push_folder(run, folder, "a tiny run")
    return said


@pytest.mark.parametrize("cause", ["down", "401", "413"])
def test_push_failure_names_the_repo_and_the_cause(cause, hub, folder, monkeypatch):
    url, before = hub.url, digests(folder)
    if cause == "down":
        gone = HubStandIn({}).start()
        url = gone.url
        gone.stop()
    if cause == "413":
        monkeypatch.setattr(hub, "max_upload_bytes", 50_000)
    with pytest.raises(UsageError) as caught:
        push(hub, url, f"me/{cause}", folder, monkeypatch, private=True,
             token="hf_not_a_token" if cause == "401" else ME)
    message = str(caught.value)
    expected = {"down": "(ConnectError: [Errno 111] Connection refused)",
                "401": "(HTTP 401: Invalid credentials in Authorization header)",
                "413": "(Error while uploading 'model.safetensors' to the Hub: HTTP 413: Payload Too Large: 102400 "
                         "bytes, the limit is 50000)"}[cause]
    assert message.startswith(f"--push_to_hub: uploading to me/{cause} on {url} failed {expected}. "
                              f"Nothing is lost: the model is saved in {folder}"), message
    assert "\n" not in message and message.endswith(" --private`")
    assert digests(folder) == before


def test_push_uploads_the_model_not_the_checkpoints(hub, folder, monkeypatch):
    said = push(hub, hub.url, "me/tiny", folder, monkeypatch)
    assert said == [f"Pushed to {hub.url}/me/tiny"]
    assert sorted(hub.files("me/tiny")) == ["config.json", "manifest.json", "model.safetensors"]
