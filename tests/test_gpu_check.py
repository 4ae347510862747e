# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""benchmarks/gpu_check.py (`make gpu-check`) and its offline install, benchmarks/wheelhouse.py: every step runs on
CPU at tiny sizes (the dry run), the plan fits the loan, a step past its cap is cut with its processes and the next
one runs, and the wheelhouse covers every import of the check. Never asserts speed: that is the GPU's to measure."""

import ast
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from benchmarks import gpu_check, wheelhouse

ROOT = Path(__file__).absolute().parents[1]  # absolute, not resolved: as benchmarks/harness.py spells its paths
FIRST_PARTY = {"benchmarks", "experiments", "linformer_hf", "linformer_training", "train_mlm", "finetune_glue"}
# What the GPU check runs: itself, the scripts it starts, the installer that runs first.
CHECK_FILES = ["benchmarks/gpu_check.py", "benchmarks/inference.py", "benchmarks/max_batch.py",
               "benchmarks/memory_probe.py", "benchmarks/wheelhouse.py", "benchmarks/training.py",
               "benchmarks/compiled.py", "train_mlm.py"]
LAUNCHED = {"accelerate"}  # `python -m accelerate.commands.launch`: the FSDP2 step


def module_file(name):
    """The file of a first-party module (None: not a module, e.g. a name imported from a package)."""
    path = name.replace(".", "/")
    for base in (ROOT, ROOT / "src"):
        for candidate in (base / f"{path}.py", base / path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def imports_of(files):
    """The top-level third-party modules imported by `files` and every first-party module they import, lazily
    imported ones included (read from the source, not from what one run happened to import)."""
    todo, seen, third_party = [ROOT / f for f in files], set(), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        package = path.parent.relative_to(ROOT).as_posix().removeprefix("src/").replace("/", ".")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's own package
                    parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parents + ([base] if base else []))
                names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in FIRST_PARTY:
                    found = module_file(name)
                    todo += [found] if found else []
                elif top and top not in sys.stdlib_module_names:
                    third_party.add(top)
    return third_party


# The quality study's runs on a lent GPU (make study-gpu): the driver, the scripts it runs, the checks it imports.
STUDY_FILES = ["experiments/quality/gpu_runs.py", "experiments/quality/run_study.py", "train_mlm.py",
               "finetune_glue.py", "experiments/quality/order_check.py", "experiments/quality/projection_check.py"]


@pytest.mark.parametrize("files, launched", [(CHECK_FILES, LAUNCHED), (STUDY_FILES, set())], ids=["check", "study"])
def test_the_wheelhouse_covers_every_import_of_the_gpu_jobs(files, launched):
    """Every distribution the check (the model package, train_mlm.py, the benchmark scripts, accelerate's launcher)
    or the study's GPU runs (run_study.py, its scripts and checks, the peer's attention) import is in the wheelhouse
    list or in the GPU machine's image: a new import fails here, not offline."""
    owners = importlib.metadata.packages_distributions()
    modules = imports_of(files) | launched
    unknown = sorted(m for m in modules if m not in owners)
    assert not unknown, f"imported by the GPU check but not installed here, so its distribution is unknown: {unknown}"
    carried = wheelhouse.read_pins(wheelhouse.WHEELS) | wheelhouse.read_pins(wheelhouse.IMAGE)
    missing = sorted({f"{m} ({wheelhouse.normalize(d)})" for m in modules for d in owners[m]
                      if wheelhouse.normalize(d) not in carried and wheelhouse.normalize(d) != wheelhouse.PROJECT})
    assert not missing, f"add to benchmarks/wheelhouse.txt (or gpu_image.txt, if the image has it): {missing}"
    assert {"transformers", "datasets", "torch", "accelerate", "safetensors"} <= {
        wheelhouse.normalize(d) for m in modules for d in owners[m]}  # the walk found the imports at all


def test_every_requirement_of_the_wheelhouse_is_met_on_the_gpu_machine():
    """pyproject.toml's dependencies and each listed wheel's own are met by the list and the image's recorded
    versions on Python 3.12; and the check itself finds a missing or excluded one."""
    pins = wheelhouse.read_pins(wheelhouse.WHEELS)
    available = {**wheelhouse.read_pins(wheelhouse.IMAGE), **pins, wheelhouse.PROJECT: "0.1.0"}
    requirements = {wheelhouse.PROJECT: importlib.metadata.requires(wheelhouse.PROJECT)}
    requirements |= {name: importlib.metadata.requires(name) or [] for name in pins
                     if importlib.metadata.version(name) == pins[name]}  # the metadata of the listed version
    assert len(requirements) > len(pins) // 2, requirements.keys()
    assert wheelhouse.unmet(requirements, available, "3.12") == []
    problems = wheelhouse.unmet({"x": ["dill<0.4.2,>=0.3.0", "tomli; python_version < '3.11'", "evaluate>=0.4",
                                       "pytest; extra == 'dev'", "numpy"]}, {"dill": "0.4.2", "numpy": None}, "3.12")
    assert problems == ["x needs dill<0.4.2,>=0.3.0: the wheelhouse or image has 0.4.2",
                        "x needs evaluate>=0.4: not in the wheelhouse nor the image"]


def test_wheelhouse_bad_input(tmp_path, capsys):
    with pytest.raises(SystemExit):
        wheelhouse.main(["download", "--python-version", "312", "--dest", str(tmp_path)])
    assert "--python-version must be major.minor such as 3.12, got '312'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no wheels in .*: run `make wheelhouse`"):
        wheelhouse.main(["install", "--src", str(tmp_path), "--target", str(tmp_path / "site")])


def test_wheelhouse_install_warns_of_unmet_requirements_and_stops_on_a_stale_package(tmp_path, monkeypatch, capsys):
    """On the GPU machine a requirement nothing meets is a warning (the steps that do not need it still run); our
    package built from other sources than src/ stops the install: the check would measure other code."""
    wheels = tmp_path / "wheelhouse"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "linformer_hf-0.1.0-py3-none-any.whl", "w") as z:
        z.writestr("linformer_hf-0.1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: linformer-hf\nVersion: "
                   "0.1.0\nRequires-Dist: torch>=2.4\nRequires-Dist: no-such-package>=1\n\n")
    edited = []

    def pip_install(command, check):  # what pip puts in --target: our sources, edited when asked
        target = command[command.index("--target") + 1]
        for package in ("linformer_hf", "linformer_training"):
            shutil.copytree(ROOT / "src" / package, Path(target) / package)
        for name in edited:
            with (Path(target) / "linformer_hf" / name).open("a") as f:
                f.write("# edited\n")

    monkeypatch.setattr(wheelhouse.subprocess, "run", pip_install)
    install = ["install", "--src", str(wheels), "--target", str(tmp_path / "site")]
    wheelhouse.main(install)
    said = capsys.readouterr().err
    assert "warning: linformer-hf 0.1.0 needs no-such-package>=1: not in the wheelhouse nor the image" in said
    assert "torch" not in said
    edited.append("modeling_linformer.py")
    with pytest.raises(SystemExit, match="linformer_hf in the wheelhouse differ from src/"):
        wheelhouse.main(install)


RACE_STEPS = ["training_cuda_bf16", "training_cuda_bf16_study", "training_cuda_bf16_study_conv",
              "training_cuda_bf16_study_key_value", "compiled_cuda", "training_cuda_bf16_ckpt"]


def planned(capsys, *flags):
    assert gpu_check.main(["--plan", *flags]) == 0
    printed = capsys.readouterr().out
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in printed.splitlines()
            if line.startswith("| ")][1:]
    total = float(rows[-1][2].split(" of ")[0])
    assert total == pytest.approx(sum(float(row[2]) for row in rows[:-1]), abs=len(rows))
    return [row[0] for row in rows], total


def test_the_plan_fits_the_loan(capsys):
    """`--plan` runs nothing and prints every step, in order of value, with estimated seconds: issue 67's steps
    first, then the first check's; `make gpu-check` leaves out those whose results are committed (--skip_committed),
    and what it runs sums, with the install, to at most the loan (it needs no GPU)."""
    names, total = planned(capsys)
    assert names == ["install", "start", *RACE_STEPS, *gpu_check.OLD_STEPS, "total"]
    names, total = planned(capsys, "--skip_committed")
    assert names == ["install", "start", *RACE_STEPS, "total"] and total <= gpu_check.BUDGET_S
    assert "--skip_committed" in (ROOT / "Makefile").read_text()
    [compiled] = [group for group in gpu_check.readme_gpu_commands(gpu_check.RACE, grouped=True) if len(group) > 1]
    assert [flag for argv in compiled for flag in argv if flag.startswith("compiled_cuda")] == [
        "compiled_cuda_bf16_512", "compiled_cuda_bf16_4096", "compiled_cuda_fp16_512", "compiled_cuda_fp16_4096"]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"  # a zombie is dead too


def test_a_step_past_its_cap_is_cut_with_its_processes_and_the_next_runs(tmp_path):
    """A step that passes its cap is stopped with every process it started (the launcher's workers would hold the
    GPU) and recorded as cut; the results file is written after each step; a step with too little of the budget
    left is not started."""
    plan = dict(work=str(tmp_path), env={}, out=str(tmp_path), end=time.monotonic() + 120)
    results = dict(command="python -m benchmarks.gpu_check", dry_run=True, plan="", packages={}, steps={},
                   machine=dict(torch=torch.__version__, cpu="cpu"))
    child = tmp_path / "child.pid"

    def sleeps(plan):
        return gpu_check.run_logged(plan, "sleeps", ["sh", "-c", f"sleep 60 & echo $! > {child}; wait"])

    gpu_check.run_step(results, plan, ("slow", "sleeps a minute", 1, sleeps, ()), cap_s=2)
    entry = results["steps"]["slow"]
    assert entry["status"] == "cut" and entry["seconds"] < 30, entry
    assert "passed the step's cap and was stopped" in entry["error"]
    deadline = time.monotonic() + 10
    while alive(int(child.read_text())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(int(child.read_text()))
    assert json.loads((tmp_path / "gpu_check.json").read_text())["steps"]["slow"]["status"] == "cut"
    plan["end"] = time.monotonic() + gpu_check.MIN_STEP_S / 2
    gpu_check.run_step(results, plan, ("late", "never starts", 1, lambda plan: 1 / 0, ()), cap_s=100)
    assert results["steps"]["late"]["status"] == "not run"
    assert "## late: not run" in (tmp_path / "gpu_check.md").read_text()


@pytest.mark.slow
def test_gpu_commands_in_the_readme_run_as_written_on_cpu(tmp_path):
    """No GPU is lent to most sessions: the GPU commands (the check's, and the longer loan's) run here with --device
    cpu, tiny models and tiny n (fp16 becomes bf16, which CPUs have), so a flag renamed or a combination refused
    fails here, not there. The check's own three commands run in the dry run below, as the check runs them (in
    processes of their own); these run each module's main() in this process, which has paid the imports."""
    check, longer = gpu_check.readme_gpu_commands(), gpu_check.readme_gpu_commands("On a longer GPU loan")
    # a lost command fails here
    assert (len(check), len(longer), len(gpu_check.readme_gpu_commands(gpu_check.RACE))) == (3, 5, 9)
    for argv in longer:
        assert argv[:2] == ["python", "-m"] and argv[2].startswith("benchmarks.") and "cuda" in argv, argv
        args = gpu_check.on_cpu(argv[2], argv[3:], str(tmp_path))
        assert "cuda" not in args and "fp16" not in args and "float16" not in args, args
        importlib.import_module(argv[2]).main(args)  # conftest gives torch's thread count back after the test
        tag = args[args.index("--tag") + 1]
        res = json.loads((tmp_path / f"{tag}.json").read_text())
        assert res["rows"] and all(r["n"] in (64, 128) for r in res["rows"]), argv


@pytest.mark.slow
def test_gpu_check_dry_run_runs_every_step_on_cpu(tmp_path):
    """`make gpu-check`'s steps, shrunk to CPU (--dry_run), so that the command waiting for a GPU cannot rot: the
    README's benchmark commands, MLM runs with throughput, an FSDP2 run resumed from its middle checkpoint, one
    results file with the plan."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    archive = tmp_path / "back" / "gpu_check.tar.gz"
    out = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--dry_run", "--work_dir", str(tmp_path),
                          "--archive", str(archive)], capture_output=True, text=True, timeout=1200, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    results = json.loads((tmp_path / "gpu_check.json").read_text())
    steps = results["steps"]
    assert results["dry_run"] and list(steps) == [*RACE_STEPS, *gpu_check.OLD_STEPS]
    race = {name: steps.pop(name) for name in RACE_STEPS}
    assert all(step["status"] == "ok" for step in race.values()), race
    assert [run["readme_command"].split()[-1] for run in race["compiled_cuda"]["runs"]] == [
        "compiled_cuda_bf16_512", "compiled_cuda_bf16_4096", "compiled_cuda_fp16_512", "compiled_cuda_fp16_4096"]
    trained = json.loads(Path(race["training_cuda_bf16"]["result"]).read_text())
    assert trained["matmul_flop_per_s"] > 0 and all(row["profile"] for row in trained["rows"])
    import tarfile
    with tarfile.open(archive) as tar:  # one file back from the loan, which unpacks into benchmarks/results/gpu
        assert {"gpu_check.json", "gpu_check.md"} <= set(tar.getnames())
    assert all(step["status"] == "ok" for step in steps.values()), steps
    assert "| total |" in results["plan"]  # every step planned (the loan's plan, --skip_committed: the plan test)
    assert results["packages"]["transformers"] == importlib.metadata.version("transformers")
    for name in ("mlm_fp16", "mlm_bf16"):  # CPU refuses fp16 training: the dry run says it ran bf16
        mlm = steps[name]
        assert mlm["precision"] == "bf16" and mlm["updates"] == 6 and mlm["tokens_per_second"] > 0, mlm
        assert mlm["last_eval_loss"] < mlm["first_eval_loss"]
    assert "--mixed_precision bf16" in steps["mlm_fp16"]["command"]
    fsdp = steps["fsdp2_resume"]
    assert fsdp["losses_compared"] == 3 and fsdp["bit_exact"], fsdp  # CPU: the resumed run is bit-identical
    assert "--use_fsdp --fsdp_version 2" in fsdp["commands"][0]["command"]
    assert "--resume_from_checkpoint latest" in fsdp["commands"][1]["command"]
    tables = [steps[name] for name in list(steps)[:3]]
    assert [t["readme_command"].split()[2] for t in tables] == ["benchmarks.inference"] * 2 + ["benchmarks.max_batch"]
    assert all(t["rows"] > 0 and "--device cuda" in t["readme_command"] for t in tables)
    kernels = {r["model"]: r["sdpa_kernels"] for r in json.loads(Path(tables[0]["result"]).read_text())["rows"]}
    assert kernels["roberta-sdpa"] and kernels["roberta-eager"] == [], kernels
    md = (tmp_path / "gpu_check.md").read_text()
    every = len(RACE_STEPS) + len(gpu_check.OLD_STEPS)
    assert md.startswith("# GPU check (dry run") and md.count(": ok (") == every and "| total |" in md


def test_gpu_check_records_a_failed_step_goes_on_and_exits_non_zero(tmp_path, monkeypatch, capsys):
    """A failing step is in the results file with its error; the later steps still run; the exit code is 1."""
    def fails(plan, *args):
        raise gpu_check.StepFailed("`train_mlm.py ...` ended with 2: train_mlm.py: error: no such file")

    ran = []
    monkeypatch.setattr(gpu_check, "mlm_updates", fails)
    monkeypatch.setattr(gpu_check, "fsdp2_resume", lambda plan: 1 / 0)
    monkeypatch.setattr(gpu_check, "benchmark_table", lambda plan, *argvs: ran.append(plan["dry_run"])
                        or dict(command="python -m benchmarks.x", table=""))
    assert gpu_check.main(["--dry_run", "--work_dir", str(tmp_path)]) == 1
    steps = json.loads((tmp_path / "gpu_check.json").read_text())["steps"]
    tables = len(RACE_STEPS) + 3  # the README's benchmark steps: issue 67's, then the first check's three
    assert [s["status"] for s in steps.values()] == ["ok"] * tables + ["failed"] * 3 and ran == [True] * tables
    assert steps["mlm_bf16"]["error"].endswith("train_mlm.py: error: no such file")
    assert "ZeroDivisionError" in steps["fsdp2_resume"]["error"]  # an unexpected error keeps its traceback
    assert "train_mlm.py: error: no such file" in (tmp_path / "gpu_check.md").read_text()
    assert "not finished: mlm_fp16, mlm_bf16, fsdp2_resume" in capsys.readouterr().out
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            gpu_check.main([])
        assert "no GPU: torch.cuda.is_available() is False" in capsys.readouterr().err
    for bad, said in ((["--budget_s", "0"], "--budget_s must be positive, got 0.0"),
                      (["--mlm_steps", "1"], "--mlm_steps must be at least 2, got 1")):
        with pytest.raises(SystemExit):
            gpu_check.main(bad)
        assert said in capsys.readouterr().err
