# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The wheels the GPU check needs beyond the GPU machine's image, for a machine with no network.

GPU loans here are short and offline: the machine has a CUDA PyTorch image (`gpu_image.txt`: what it holds) and no
package index. `make wheelhouse` (`download`) fetches every wheel of `wheelhouse.txt` for that machine's Python and
platform, builds this project's own wheel beside them, checks that every requirement of every wheel is met by
the list or the image, and prints the folder's size: it travels with the working tree, which may be 64 MiB in all.
On the GPU machine `make gpu-check WHEELHOUSE=wheelhouse` runs `install`: the wheels go into a folder of their
own (pip --target, --no-deps, no index) that is put first on PYTHONPATH, so the image's torch and everything
else it holds stay as they are; a requirement that neither meets is named before any step runs.

    python -m benchmarks.wheelhouse download [--dest wheelhouse] [--python-version 3.12]
    python -m benchmarks.wheelhouse install [--src wheelhouse] [--target /tmp/linformer-site]

Standard library only (and `packaging`, which the image and pip have): it runs before anything is installed.
"""

import argparse
import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).absolute().parent
ROOT = HERE.parent
WHEELS = HERE / "wheelhouse.txt"
IMAGE = HERE / "gpu_image.txt"
PROJECT = "linformer-hf"
# The GPU machine's interpreter and platform (device notes: Python 3.12.3, x86-64, glibc manylinux). pip matches
# a manylinux_2_N tag exactly, so every N a wheel of ours ships with is named.
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64"]
LIMIT_MIB = 64  # what travels to the GPU machine with the working tree, all of it


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path):
    """{normalized name: version or None} of a `name==version  # comment` file."""
    pins = {}
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[normalize(name)] = version.strip() or None
    return pins


def pip():
    """pip of this interpreter, else of the system's python3 (a uv-made .venv has none)."""
    return [sys.executable, "-m", "pip"] if importlib.util.find_spec("pip") else ["python3", "-m", "pip"]


def wheel_requirements(path):
    """(name, version, Requires-Dist lines) of a wheel file, read from its METADATA."""
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    header = text.split("\n\n", 1)[0]

    def field(key):
        return [line.split(":", 1)[1].strip() for line in header.splitlines() if line.startswith(key + ":")]

    return field("Name")[0], field("Version")[0], field("Requires-Dist")


def unmet(requirements, available, python_version):
    """Each requirement (name -> Requires-Dist lines) that `available` ({normalized name: version or None}) does
    not meet on the GPU machine's Linux x86-64 and Python: a missing distribution, or a known version outside the
    specifier (an unknown one passes: the image's version was not recorded)."""
    from packaging.requirements import Requirement

    env = dict(python_version=python_version, python_full_version=python_version + ".0", sys_platform="linux",
               platform_system="Linux", platform_machine="x86_64", os_name="posix", extra="",
               implementation_name="cpython", platform_python_implementation="CPython")
    problems = []
    for owner, lines in requirements.items():
        for line in lines:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            name = normalize(req.name)
            if name not in available:
                problems.append(f"{owner} needs {req}: not in the wheelhouse nor the image")
            elif available[name] and not req.specifier.contains(available[name], prereleases=True):
                problems.append(f"{owner} needs {req}: the wheelhouse or image has {available[name]}")
    return problems


def sources(folder):
    """{relative path: bytes} of a package's Python files."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in Path(folder).rglob("*.py")}


def folder_mib(path):
    return sum(wheel.stat().st_size for wheel in Path(path).glob("*.whl")) / 2**20


def download(args):
    """wheelhouse.txt's wheels for the GPU machine, this project's wheel, their requirements checked, the size."""
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):  # one version of each: two stop the whole install
        old.unlink()
    pins = read_pins(WHEELS)
    target = ["--python-version", args.python_version, "--implementation", "cp", "--only-binary=:all:",
              *(f"--platform={p}" for p in PLATFORMS)]
    subprocess.run([*pip(), "download", "--quiet", "--disable-pip-version-check", "--no-deps", *target,
                    "-d", args.dest, *(f"{name}=={version}" for name, version in pins.items())], check=True)
    subprocess.run([*pip(), "wheel", "--quiet", "--disable-pip-version-check", "--no-deps", "-w", args.dest, ROOT],
                   check=True)
    wheels = {}
    for path in sorted(dest.glob("*.whl")):
        name, version, requires = wheel_requirements(path)
        wheels[normalize(name)] = (version, requires, path.name)
    missing = set(pins) - set(wheels)
    if missing:
        raise SystemExit(f"wheelhouse: pip wrote no wheel for {', '.join(sorted(missing))}")
    available = {**read_pins(IMAGE), **{name: w[0] for name, w in wheels.items()}}
    problems = unmet({f"{name} {w[0]}": w[1] for name, w in wheels.items()}, available, args.python_version)
    for _, _, filename in wheels.values():
        print(f"  {filename}")
    size = folder_mib(args.dest)
    print(f"wheelhouse: {len(wheels)} wheels, {size:.1f} MiB in {args.dest} (Python {args.python_version}, "
          f"manylinux x86_64); the working tree that travels with it may be {LIMIT_MIB} MiB in all")
    if problems:
        raise SystemExit("wheelhouse: requirements not met on the GPU machine:\n  " + "\n  ".join(problems))


def install(args):
    """The wheels into --target, beside (not over) the image's packages; then every requirement of every wheel
    checked against what this interpreter sees with --target first (unmet ones are warned about), and this
    checkout's own package compared with the wheel's: one built from another commit would measure other code."""
    wheels = sorted(Path(args.src).glob("*.whl"))
    if not wheels:
        raise SystemExit(f"wheelhouse: no wheels in {args.src}: run `make wheelhouse` where there is a network")
    start = time.perf_counter()
    shutil.rmtree(args.target, ignore_errors=True)
    subprocess.run([*pip(), "install", "--quiet", "--disable-pip-version-check", "--no-index", "--no-deps",
                    "--no-compile", "--no-cache-dir", "--target", args.target, *wheels], check=True)
    seen = {normalize(d.metadata["Name"]): d.version for path in (sys.path, [args.target])  # --target's win
            for d in importlib.metadata.distributions(path=path)}
    ours = {}
    for path in wheels:
        name, version, requires = wheel_requirements(path)
        ours[f"{name} {version}"] = requires
    python = "{}.{}".format(*sys.version_info[:2])
    problems = unmet(ours, seen, python)
    stale = [f for f in ("linformer_hf", "linformer_training")
             if sources(Path(args.target) / f) != sources(ROOT / "src" / f)]
    print(f"wheelhouse: installed {len(wheels)} wheels into {args.target} in {time.perf_counter() - start:.0f} s "
          f"(Python {python}); run with PYTHONPATH={args.target}")
    for problem in problems:  # a warning: on a loan of minutes the steps that do not need it should still run
        print(f"wheelhouse: warning: {problem}", file=sys.stderr)
    if stale:
        raise SystemExit(f"wheelhouse: {', '.join(stale)} in the wheelhouse differ from src/: the check would measure "
                         "other code; rebuild it with `make wheelhouse`")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("download", help="fetch the wheels (needs a package index)")
    d.add_argument("--dest", default=str(ROOT / "wheelhouse"))
    d.add_argument("--python-version", default="3.12", help="the GPU machine's Python, major.minor")
    i = sub.add_parser("install", help="install them offline beside the image's packages")
    i.add_argument("--src", default=str(ROOT / "wheelhouse"))
    i.add_argument("--target", default="/tmp/linformer-site")
    args = p.parse_args(argv)
    if args.command == "download":
        if not re.fullmatch(r"3\.\d+", args.python_version):
            p.error(f"--python-version must be major.minor such as 3.12, got {args.python_version!r}")
        download(args)
    else:
        install(args)


if __name__ == "__main__":
    main()
