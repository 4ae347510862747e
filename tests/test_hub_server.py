# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The Hub stand-in (tests/hub_server.py) answers huggingface_hub as the Hub does: what goes up comes back
byte for byte, through LFS where the Hub would use it; tokens are checked; private repositories are hidden."""

import os
from pathlib import Path

import pytest
from hub_server import LFS_MIN_SIZE, ME, OTHER
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError


@pytest.fixture
def api(hub, monkeypatch):
    """An HfApi of `token`'s user, talking to the stand-in from this process."""
    hub.use_here(monkeypatch)
    return lambda token=ME: HfApi(token=token)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A model folder as the scripts leave one: a card with YAML, text files, weights, one file over LFS_MIN_SIZE."""
    root = tmp_path_factory.mktemp("upload")
    (root / "README.md").write_text("---\nlicense: apache-2.0\ntags:\n- linformer-hf\n---\n\n# A model\n")
    (root / "config.json").write_text('{"model_type": "linformer"}\n')
    (root / "model.safetensors").write_bytes(os.urandom(4096))
    (root / "predictions").mkdir()
    (root / "predictions" / "test.tsv").write_text("index\tprediction\n0\tpos\n")
    (root / "big.txt").write_text("a whale of a file\n" * (LFS_MIN_SIZE // 18 + 1))
    return root


def stored(hub, repo_id):
    """{path: whether the stand-in keeps it in LFS}."""
    return {path: lfs is not None for path, (_, lfs) in hub.repos[repo_id].snapshot("main")[1].items()}


def test_files_go_up_and_come_back_byte_for_byte(hub, api, folder, tmp_path):
    api().create_repo("me/roundtrip")
    commit = api().upload_folder(repo_id="me/roundtrip", folder_path=folder)
    assert commit.repo_url == f"{hub.url}/me/roundtrip"
    expected = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert hub.files("me/roundtrip") == expected
    assert stored(hub, "me/roundtrip") == {"README.md": False, "config.json": False, "model.safetensors": True,
                                           "predictions/test.tsv": False, "big.txt": True}
    assert sorted(api().list_repo_files("me/roundtrip")) == sorted(expected)
    assert api().model_info("me/roundtrip").sha == commit.oid
    for name, content in expected.items():
        path = hf_hub_download("me/roundtrip", name, cache_dir=tmp_path, token=ME)
        assert Path(path).read_bytes() == content, name
    assert hub.unknown == []


def test_writes_need_the_owners_token_and_a_wrong_token_is_refused(hub, api):
    api().create_repo("me/public")
    with pytest.raises(HfHubHTTPError, match="401"):
        api(token=False).create_repo("me/anonymous")
    with pytest.raises(HfHubHTTPError, match="401"):
        api(token=False).upload_file(repo_id="me/public", path_or_fileobj=b"x", path_in_repo="x.txt")
    with pytest.raises(HfHubHTTPError, match="403"):
        api(OTHER).upload_file(repo_id="me/public", path_or_fileobj=b"x", path_in_repo="x.txt")
    with pytest.raises(HfHubHTTPError, match="403"):
        api(OTHER).create_repo("me/theirs")
    with pytest.raises(HfHubHTTPError, match="401") as caught:  # even for a read
        api("hf_not_a_token").model_info("me/public")
    assert caught.value.server_message == "Invalid credentials in Authorization header"
    assert api(token=False).model_info("me/public").private is False  # a public repo reads without a token
    assert "me/anonymous" not in hub.repos and "me/theirs" not in hub.repos and len(hub.repos["me/public"].commits) == 1


def test_a_private_repo_answers_404_to_all_but_its_owner(hub, api, tmp_path):
    api().create_repo("me/secret", private=True)
    api().upload_file(repo_id="me/secret", path_or_fileobj=b"{}", path_in_repo="config.json")
    assert api().model_info("me/secret").private is True
    for token in (OTHER, False):
        with pytest.raises(RepositoryNotFoundError):
            api(token).model_info("me/secret")
        with pytest.raises(RepositoryNotFoundError):
            hf_hub_download("me/secret", "config.json", cache_dir=tmp_path / str(token), token=token)
        with pytest.raises(HfHubHTTPError, match="401" if token is False else "404"):  # anonymous writes: 401
            api(token).upload_file(repo_id="me/secret", path_or_fileobj=b"x", path_in_repo="x.txt")
    mine = hf_hub_download("me/secret", "config.json", cache_dir=tmp_path / "me", token=ME)
    assert Path(mine).read_bytes() == b"{}"
