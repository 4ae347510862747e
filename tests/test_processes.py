# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""linformer_training/processes.py: how a script ends. A process of a multi-process run must leave when its work
is done even if the interpreter's teardown would block (a gloo group destroyed there can deadlock), and its error is
one line. Also the suite's own guard, conftest.run_group: nothing a test launches outlives it."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_group

# A script whose teardown blocks forever: a non-daemon thread that never ends, as a gloo worker waiting for the
# interpreter lock does. `main` has finished (it printed DONE) before teardown starts.
BLOCKED_AT_EXIT = """
import sys, threading
from linformer_training import processes
from linformer_training.arguments import ScriptError

def main():
    threading.Thread(target=threading.Event().wait).start()
    print("DONE", flush=True)
    if sys.argv[1] == "fail":
        raise ScriptError("the data is bad")

processes.run_script(main, "demo.py")
"""


def run_demo(mode, world_size, timeout=60):
    env = {**os.environ, "WORLD_SIZE": str(world_size), "PYTHONPATH": str(REPO / "src")}
    return run_group([sys.executable, "-c", BLOCKED_AT_EXIT, mode], env=env, timeout=timeout)


@pytest.mark.parametrize("mode, code", [("ok", 0), ("fail", 1)])
def test_a_process_of_a_multi_process_run_leaves_even_when_teardown_would_block(mode, code):
    result = run_demo(mode, world_size=2)
    assert result.returncode == code and result.stdout == "DONE\n", result.stderr
    assert result.stderr == ("demo.py: error: the data is bad\n" if mode == "fail" else "")


def test_a_single_process_ends_as_python_does():
    """Alone (no WORLD_SIZE > 1), a script keeps Python's usual ending, non-daemon threads included: the same
    script then waits for its thread, which is what the multi-process exit avoids."""
    with pytest.raises(AssertionError, match="still running after 5 s"):
        run_demo("ok", world_size=1, timeout=5)


def test_nothing_a_test_launches_outlives_it(tmp_path):
    """run_group kills the whole session of the command it ran: here a launcher whose child would sleep on after
    the launcher itself timed out."""
    pid_file = tmp_path / "child.pid"
    launcher = (f"import subprocess, sys; "
                f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
                f"open({str(pid_file)!r}, 'w').write(str(p.pid)); p.wait()")
    with pytest.raises(AssertionError, match="still running after 3 s"):
        run_group([sys.executable, "-c", launcher], timeout=3)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(child):
        time.sleep(0.1)
    assert not alive(child)


def alive(pid):
    """Whether `pid` runs (a zombie, killed and waiting for its reaper, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_scripts_end_through_run_script():
    """Every script's `__main__` goes through processes.run_script, so none can hang at exit in a multi-process run."""
    for script in ("train_mlm.py", "finetune_glue.py", "distill.py", "convert_to_linformer.py", "export_onnx.py"):
        tail = (REPO / script).read_text().split('if __name__ == "__main__":')[1]
        assert tail.strip() == f'processes.run_script(main, "{script}")', script


def test_a_terminated_test_run_leaves_nothing_running(tmp_path):
    """SIGTERM to pytest (a CI timeout) while a test waits on what it launched: the test unwinds and run_group
    kills its processes, instead of pytest dying at once and leaving them running."""
    pid_file = tmp_path / "child.pid"
    sleeper = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    (tmp_path / "test_sleeper.py").write_text(
        f"import sys\nsys.path.insert(0, {str(REPO / 'tests')!r})\nfrom conftest import run_group\n\n\n"
        f"def test_sleep():\n    run_group([sys.executable, '-c', {sleeper!r}], timeout=600)\n")
    pytest_run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sleeper.py"],
                                  cwd=tmp_path, start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        child = int(pid_file.read_text())
        pytest_run.terminate()
        pytest_run.wait(timeout=60)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(child):
            time.sleep(0.1)
        assert not alive(child)
    finally:
        os.killpg(pytest_run.pid, 9) if pytest_run.poll() is None else None
