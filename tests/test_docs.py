# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The docs say what is true of the code.

- The snippets users copy from README.md, model_card.md, docs/ and the release cards trust remote code: a Linformer
  folder carries its code as remote code, and without `trust_remote_code=True` transformers stops at an interactive
  "[y/N]" prompt (AutoTokenizer too: it reads the folder's config first), where a script run at a terminal waits.
- Every flag, repository file and make target the docs name exists (read from the code, not imported: fast).
- Every program's --help prints (each imported and run: argparse formats the help only when asked).
- Every module has its tests where docs/development.md says.
- A release's design numbers (n, k, window, adapter rank), wherever written, are its config.json's."""

import ast
import fnmatch
import itertools
import json
import os
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "model_card.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted(REPO.glob("release/*/README.md"))]
LOADERS = re.compile(r"\b(Auto\w+\.from_pretrained|pipeline|SentenceTransformer)\(")


def python_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def calls(code):
    """Each loader call in `code` with its arguments (parentheses balanced)."""
    for match in LOADERS.finditer(code):
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(code)):
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            if depth == 0:
                break
        yield code[match.start():end + 1]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_snippet_that_loads_a_folder_trusts_its_code(page):
    """Unless the snippet imports linformer_hf (which registers the model), every loader call passes
    trust_remote_code=True; a loader given a model object, not a path, is exempt."""
    untrusted = []
    for code in python_blocks(page.read_text()):
        if "import linformer_hf" in code or "from linformer_hf" in code:
            continue
        for call in calls(code):
            if "trust_remote_code=True" not in call and not re.search(r"model=model\b", call):
                untrusted.append(call)
    assert not untrusted, f"{page.relative_to(REPO)}: {untrusted}"


def test_the_check_finds_an_untrusted_loader():
    code = ('tok = AutoTokenizer.from_pretrained(name)\n'
            'm = AutoModel.from_pretrained(\n    name, trust_remote_code=True)\n')
    assert list(calls(code)) == ["AutoTokenizer.from_pretrained(name)",
                                 "AutoModel.from_pretrained(\n    name, trust_remote_code=True)"]


# ---------------------------------------------------------------------------------------------------------------
# Flags, files and make targets the docs name must exist. Read from the code without importing it (milliseconds):
# a script's flags are its dataclass fields, as HfArgumentParser makes them; a module's are its add_argument calls.
# ---------------------------------------------------------------------------------------------------------------

DOC_PAGES = [REPO / "README.md", REPO / "model_card.md", *sorted((REPO / "docs").glob("*.md")),
             REPO / "benchmarks" / "README.md", *sorted((REPO / "experiments").glob("**/README.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", flags=re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w.-]*[\w]")
# Flags of other tools that the docs name in prose (in a command, a tool's flags are told apart by the command).
OTHER_TOOLS = {"--cpu": "accelerate launch", "--multi_gpu": "accelerate launch", "--num_processes": "accelerate launch",
               "--use_fsdp": "accelerate launch", "--no-index": "pip install", "--no-deps": "pip install",
               "--target": "pip install", "--private": "hf upload"}
# Spellings the docs name as refused (docs/training.md: the old names of renamed flags).
REFUSED = {"--keep_last_checkpoints", "--model.KEY"}


def _python_files():
    return [*REPO.glob("*.py"), *(REPO / "src" / "linformer_training").glob("*.py")]


def script_flags():
    """{script: flags} for the top-level scripts: `parse_args(Class, ...)` (linformer_training/arguments.py) gives
    --config and, per dataclass field of Class and its bases, --NAME, --NAME-WITH-DASHES and --no_NAME (booleans)."""
    classes = {}
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                own = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and
                       isinstance(s.target, ast.Name) and "ClassVar" not in ast.unparse(s.annotation)]
                classes[node.name] = ([b.id for b in node.bases if isinstance(b, ast.Name)], own)

    def fields(name):
        bases, own = classes.get(name, ((), ()))
        return set(own).union(*(fields(base) for base in bases))

    flags = {}
    for path in REPO.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "parse_args" and node.args:
                names = fields(node.args[0].id)
                flags[path.name] = {"--config", "--help"} | {f"--{form}" for name in names for form in
                                                            (name, name.replace("_", "-"), f"no_{name}")}
    return flags


def module_file(name):
    """The file of a module of benchmarks/ or experiments/ (`benchmarks.inference` or `benchmarks/inference.py`)."""
    path = REPO / (name[:-3] if name.endswith(".py") else name.replace(".", "/"))
    path = path.with_suffix(".py")
    return path if path.is_file() and path.relative_to(REPO).parts[0] in ("benchmarks", "experiments") else None


def argparse_flags(path):
    """The flags of an argparse module: its add_argument calls and those of the project modules it imports."""
    flags, todo, seen = {"--help"}, [path], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for node in ast.walk(ast.parse(current.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                flags |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
            elif current == path and isinstance(node, (ast.Import, ast.ImportFrom)):
                base = getattr(node, "module", None) or ""
                for alias in node.names:
                    for name in (base, alias.name, f"{base}.{alias.name}"):
                        if module_file(name.strip(".")):
                            todo.append(module_file(name.strip(".")))
    return flags


class Programs:
    """What each program the docs can name accepts; None for a program that is not this project's."""

    def __init__(self):
        self.scripts = script_flags()
        self.cache = {}

    def flags(self, name):
        if name in self.scripts:
            return self.scripts[name]
        path = module_file(name)
        if path is None:
            return None
        if path not in self.cache:
            self.cache[path] = argparse_flags(path)
        return self.cache[path]

    def named_in(self, text):
        names = re.findall(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.py)\b|\b((?:benchmarks|experiments)\.[\w.]*\w)", text)
        return {a or b for a, b in names if self.flags(a or b) is not None}


def make_targets():
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", (REPO / "Makefile").read_text(), flags=re.M))


def command_lines(text):
    """Each line of a fenced block (continuations joined) or an inline code span, as shell tokens."""
    chunks = [block.replace("\\\n", " ") for block in FENCE.findall(text)] + SPAN.findall(FENCE.sub("", text))
    for chunk in chunks:
        for line in chunk.splitlines():
            line = line.split(" #")[0]
            try:
                lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
                lexer.whitespace_split = True
                tokens = list(lexer)
            except ValueError:  # an unbalanced quote in prose-like code
                tokens = line.split()
            command = []
            for token in tokens + [";"]:
                if token in (";", "&&", "||", "|", "&"):
                    if command:
                        yield command
                    command = []
                else:
                    command.append(token)


def placeholder(name):
    """`benchmarks.NAME`, `tests/test_NAME.py`, `OUTPUT_DIR/checkpoints`: a word in capitals stands for any."""
    return any(re.fullmatch(r"[A-Z]{2,}", part) for part in re.split(r"[./_-]", name))


def command_problems(text, programs, targets):
    """Commands naming a script or module that does not exist, a flag their program does not accept, or a make
    target the Makefile lacks. Yields (problem, the command)."""
    for tokens in command_lines(text):
        while tokens and re.fullmatch(r"[A-Za-z_]\w*=\S*", tokens[0]):  # VAR=value before the command
            tokens = tokens[1:]
        if tokens[:1] == ["make"]:
            for target in tokens[1:]:
                if not target.startswith("-") and "=" not in target and target not in targets:
                    yield f"make target {target!r} is not in the Makefile", " ".join(tokens)
            continue
        for i, token in enumerate(tokens):
            if token == "-m" and i + 1 < len(tokens):  # python -m MODULE: ours if under benchmarks/ or experiments/
                name, args = tokens[i + 1], tokens[i + 2:]
                if not re.match(r"(benchmarks|experiments)\.", name):
                    break
                exists = module_file(name) is not None
            elif token.endswith(".py") and (programs.flags(token) is not None or
                                            i > 0 and re.fullmatch(r"python3?", tokens[i - 1])):
                name, args = token, tokens[i + 1:]
                exists = (REPO / name).is_file()
            else:
                continue
            if placeholder(name):
                break
            if not exists:
                yield f"{name} does not exist", " ".join(tokens)
            for flag in args if exists and programs.flags(name) is not None else ():
                if flag.startswith("--") and flag.split("=")[0] not in programs.flags(name):
                    yield f"{name} has no flag {flag.split('=')[0]}", " ".join(tokens)
            for run in study_runs_named(name, args):
                yield f"{name} has no run {run}", " ".join(tokens)
            break


def study_runs_named(program, args):
    """The names after --only of a command of the quality study's scripts that are not runs of the study
    (study.RUNS): a renamed run leaves no stale command behind."""
    if program not in ("experiments.quality.run_study", "experiments.quality.gpu_runs") or "--only" not in args:
        return []
    from experiments.quality import study

    named = itertools.takewhile(lambda a: re.fullmatch(r"[\w$]+", a), args[args.index("--only") + 1:])  # to a flag
    return [run for run in named if not (placeholder(run) or "$" in run) and run not in {r["name"] for r in study.RUNS}]


def prose_flag_problems(text, programs, folder=None):
    """Flags named outside commands: each must be accepted by a program named in its paragraph, its section or its
    page (any script where the page names none) or, for a folder's README, kept in that folder, or be another
    tool's (OTHER_TOOLS) or a refused spelling."""
    def is_command(span):
        tokens = span.split()
        return any(t.endswith(".py") or t == "-m" for t in tokens) or tokens[:1] in (
            ["pip"], ["accelerate"], ["hf"], ["make"], ["python"], ["pytest"], ["git"])

    page = programs.named_in(text) or set(programs.scripts)
    if folder is not None:
        page |= {str(p.relative_to(REPO)) for p in folder.glob("**/*.py") if programs.flags(str(p.relative_to(REPO)))}
    text = FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    text = SPAN.sub(lambda m: "``" if is_command(m.group(1)) else m.group(), text)
    for section in re.split(r"(?m)^(?=#{1,6} )", text):
        for paragraph in re.split(r"\n\s*\n", section):
            context = page | programs.named_in(section) | programs.named_in(paragraph)
            accepted = set().union(*(programs.flags(name) for name in context))
            for flag in FLAG.findall(paragraph):
                if flag not in accepted and flag not in OTHER_TOOLS and flag not in REFUSED:
                    yield f"no program named here ({', '.join(sorted(context))}) has the flag {flag}", paragraph[:100]


def ignored(path):
    """Whether .gitignore ignores `path` (relative to the repository): outputs, never committed."""
    for pattern in (REPO / ".gitignore").read_text().split():
        anchored = pattern.strip("/")
        if pattern.endswith("/") and (path == anchored or path.startswith(anchored + "/") or
                                      not pattern.startswith("/") and f"/{anchored}/" in f"/{path}/"):
            return True
        if not pattern.endswith("/") and fnmatch.fnmatch(path, anchored):
            return True
    return False


def expand(path):
    """`a.{json,md}` as `a.json`, `a.md`."""
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [p for alt in match.group(1).split(",") for p in expand(path[:match.start()] + alt + path[match.end():])]


def path_problems(text, page):
    """Repository paths a page names that do not exist: relative links (from the page's folder), and in code,
    paths under a top-level folder of the repository (from its root, where commands run). Outputs (.gitignore),
    paths outside the repository, in another commit (`git show REV:path`) and placeholders
    (`tests/test_NAME.py`) are not checked."""
    top = {p.name for p in REPO.iterdir() if not p.name.startswith(".") and not ignored(p.name)} | {".ci"}
    named = [(link, page.parent) for link in re.findall(r"\]\(([^)\s]+)\)", text)
             if not re.match(r"(https?:|mailto:|#)", link)]
    for code in FENCE.findall(text) + SPAN.findall(FENCE.sub("", text)):
        for token in re.findall(r"(?<![\w/.~$:@-])(?:\.\./)*[\w.-]+/[\w./{},*-]*", code):
            if token.startswith("../") or token.split("/")[0] in top:  # commands run from the root
                named.append((token, REPO))
    for name, base in named:
        path = name.split("#")[0].rstrip(".,")
        if not path:
            continue
        for each in expand(path):
            full = os.path.normpath(base / each)
            if not full.startswith(str(REPO) + os.sep):
                continue  # outside the repository (../shared/data)
            rel = os.path.relpath(full, REPO)
            if next(REPO.glob(rel), None) or ignored(rel) or placeholder(each):
                continue
            yield f"{name} does not exist", rel


def programs_with_main():
    """Every program the docs can name that parses its own command line: `main(argv=None)` in a top-level script or
    a module of benchmarks/ or experiments/ (the module name to import)."""
    paths = [*REPO.glob("*.py"), *REPO.glob("benchmarks/*.py"), *REPO.glob("experiments/**/*.py")]
    return sorted(".".join(path.relative_to(REPO).with_suffix("").parts) for path in paths
                  if re.search(r"^def main\(argv=None\)", path.read_text(), flags=re.M))


@pytest.mark.parametrize("module", programs_with_main())
def test_every_program_prints_its_help(module, capsys):
    """--help is what the docs send a user to; argparse formats each help string with %, so a literal % in one
    (an f-string's `:.0%`) crashes it with a ValueError instead of printing."""
    import importlib
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(module).main(["--help"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("usage:")


@pytest.fixture(scope="module")
def programs():
    return Programs()


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_docs_name_only_flags_files_and_targets_that_exist(page, programs):
    text = page.read_text()
    folder = page.parent if page.name == "README.md" and page.parent != REPO else None
    problems = [*command_problems(text, programs, make_targets()), *prose_flag_problems(text, programs, folder),
                *path_problems(text, page)]
    assert not problems, "\n".join(f"{page.relative_to(REPO)}: {what}  [{where}]" for what, where in problems)


def test_the_checks_find_a_wrong_flag_file_or_target(programs):
    assert programs.flags("train_mlm.py") >= {"--block_size", "--config", "--no_streaming", "--max-steps"}
    assert programs.flags("benchmarks.inference") >= {"--n", "--k", "--repeats", "--tag"}  # harness's too
    text = ("```bash\npython train_mlm.py --block_size 8 --blok_size 8\nmake demo tests\n"
            "python -m benchmarks.inference --n 512 --nn 3\npython -m benchmarks.nothing\n"
            "python -m experiments.quality.run_study --only roberta_n128_s0 roberta_n128_s9 --extend\n```\n\n"
            "Pass `--overwrite_output_dir` to train_mlm.py, or `--projection_dim`; see `configs/nothing.yaml` and "
            "[a link](docs/nothing.md), not `outputs/anything` or `runs/x`.\n")
    found = [what for what, _ in command_problems(text, programs, make_targets())]
    assert found == ["train_mlm.py has no flag --blok_size", "make target 'tests' is not in the Makefile",
                     "benchmarks.inference has no flag --nn", "benchmarks.nothing does not exist",
                     "experiments.quality.run_study has no run roberta_n128_s9"]
    assert [what.split()[-1] for what, _ in prose_flag_problems(text, programs)] == ["--projection_dim"]
    assert sorted(what for what, _ in path_problems(text, REPO / "README.md")) == [
        "configs/nothing.yaml does not exist", "docs/nothing.md does not exist"]


# ---------------------------------------------------------------------------------------------------------------
# Every module has its tests: tests/test_NAME.py, or the file docs/development.md ("Tests") lists for it.
# ---------------------------------------------------------------------------------------------------------------

def listed_test_files():
    """{module: [test files]} from the table under docs/development.md's "| module or script | tested in |"."""
    text = (REPO / "docs" / "development.md").read_text()
    table = re.search(r"^\| module or script \| tested in \|\n\|[-| ]+\|\n((?:\|.*\|\n)+)", text, flags=re.M)
    assert table, "docs/development.md has no '| module or script | tested in |' table"
    rows = {}
    for line in table.group(1).splitlines():
        module, tests = line.strip("|").split("|")
        rows[re.findall(r"`([^`]+)`", module)[0]] = re.findall(r"`([^`]+)`", tests)
    return rows


def modules():
    """{name as the table writes it: path} for the modules of both packages and the scripts; an `__init__.py`
    holding only a docstring has nothing to test."""
    found = {p.name: p for p in REPO.glob("*.py")}
    for package in ("linformer_hf", "linformer_training"):
        for path in (REPO / "src" / package).glob("*.py"):
            body = ast.parse(path.read_text()).body
            if path.name == "__init__.py" and all(isinstance(s, ast.Expr) for s in body):
                continue
            found[f"{package}/{path.name}"] = path
    return found


def test_every_module_has_its_tests():
    rows, found = listed_test_files(), modules()
    untested = [name for name, path in found.items()
                if not (REPO / "tests" / f"test_{path.stem}.py").is_file() and name not in rows]
    assert not untested, f"no tests/test_NAME.py for {untested}: add one, or list where they are tested in " \
                         "docs/development.md ('Tests')"
    stale = [name for name in rows if name not in found or (REPO / "tests" / f"test_{found[name].stem}.py").is_file()]
    assert not stale, f"docs/development.md lists {stale}, which do not exist or have a test file of their own"
    for name, tests in rows.items():
        package, _, file = name.rpartition("/")
        stem = Path(file).stem
        mention = (rf"\b{package}\b" if stem == "__init__" else
                   rf"\b{package}\W+(?:\w+\W+){{0,3}}{stem}\b" if package else rf"\b{stem}\.py\b|\bimport {stem}\b")
        for test in tests:
            path = REPO / "tests" / test
            assert path.is_file() and re.search(mention, path.read_text()), f"{test} does not test {name}"


# ---------------------------------------------------------------------------------------------------------------
# A release's design (n, k, the exact window, the adapter rank) is its config.json. Where the docs and the build
# recipe state it, each number must be the config's.
# ---------------------------------------------------------------------------------------------------------------

RELEASES = {"embedder": REPO / "release" / "minilm-l6-linformer-n4096",
            "masked-LM": REPO / "release" / "minilm-l6-linformer-mlm-n4096"}
# How a design number is written: each pattern's group is the number.
STATED = {
    "n": (r"\bn = ([\d,]+)", r"\bup to ([\d,]+) tokens", r"--max_seq_length ([\d,]+)", r"\bat ([\d,]+) tokens",
          r"`max_seq_length` ([\d,]+)", r"\b([\d,]+)-token (?:release|document|input)"),
    "k": (r"\bk = (\d+)", r"--projected_dim (\d+)", r"\b(\d+) (?:projected |global |gated global )?slots"),
    "window": (r"\bat most (\d+) tokens", r"\b(\d+)-token windows?\b", r"--exact_attention_length (\d+)",
               r"\bexact (\d+)\b"),
    "rank": (r"\brank[- ](\d+)", r"--long_input_adapter_rank (\d+)"),
}
# Where a release's design is stated: (file, part, release). The part: a markdown section by its heading, a fenced
# block by a string it holds, or None for the whole file. Elsewhere the docs name no design number of a release.
STATED_IN = [
    ("docs/release.md", None, "embedder"),  # where the embedder's design is explained
    ("README.md", "### The release", "embedder"),
    ("model_card.md", "### Distilled long-input release", "embedder"),
    ("experiments/long_documents/build.sh", None, "embedder"),  # the command that builds it
    ("configs/distill/minilm_n4096.yaml", None, "embedder"),
    ("README.md", "### The masked-LM release", "masked-LM"),
    ("docs/training.md", "runs/minilm-mlm-n4096", "masked-LM"),  # the commands experiments/masked_lm runs
]
GENERATED = re.compile(r"<!-- generated by .*?<!-- end of generated block -->", flags=re.S)


def design(folder):
    """n, k, the window read exactly and the adapter rank of a committed release, from its config.json."""
    config = json.loads((folder / "config.json").read_text())
    window = config.get("exact_attention_length")
    return {"n": config["max_seq_length"], "k": config["projected_dim"], "window": window,
            "rank": config.get("long_input_adapter_rank", 0)}


def part(text, where):
    if where is None:
        return text
    if where.startswith("#"):
        level = len(where.split()[0])
        found = re.search(rf"^{re.escape(where)}.*?(?=^#{{1,{level}}} |\Z)", text, flags=re.S | re.M)
        return found.group() if found else ""
    return next((block for block in FENCE.findall(text) if where in block), "")


def stated(text):
    """(field, number, the words) for each design number written in `text`; generated blocks are their renderers'."""
    text = re.sub(r"\s+", " ", GENERATED.sub("", text))
    for field, patterns in STATED.items():
        for pattern in patterns:
            for match in re.finditer(pattern, text):
                yield field, int(match.group(1).replace(",", "")), match.group()


@pytest.mark.parametrize("file, where, release", STATED_IN, ids=lambda v: v if isinstance(v, str) else "")
def test_a_release_design_is_stated_as_its_config(file, where, release):
    text = part((REPO / file).read_text(), where)
    mentions = list(stated(text))
    assert mentions, f"{file} {where or ''}: no design number of the {release} release found; update STATED_IN"
    expected = design(RELEASES[release])
    wrong = [f"{words!r} ({field} is {expected[field]})" for field, number, words in mentions
             if number != expected[field]]
    assert not wrong, f"{file} {where or ''}: {', '.join(wrong)} in {RELEASES[release].relative_to(REPO)}/config.json"


def test_the_design_check_finds_a_wrong_number():
    embedder = design(RELEASES["embedder"])
    assert embedder == {"n": 4096, "k": 128, "window": 512, "rank": 16}
    text = "## A\nreads up to 4,096 tokens, k = 64 slots, 512-token windows, rank-8 adapters\n## B\nk = 1\n"
    assert [(f, n) for f, n, _ in stated(part(text, "## A"))] == [("n", 4096), ("k", 64), ("k", 64),
                                                                  ("window", 512), ("rank", 8)]


def choices():
    """{field: its allowed values} for every LinformerConfig field that takes one of a fixed set."""
    from typing import Literal, get_args, get_origin

    from linformer_hf.configuration_linformer import LinformerConfig

    return {field: get_args(kind) for field, kind in LinformerConfig.__annotations__.items()
            if get_origin(kind) is Literal}


def unlisted_choices(text, allowed):
    """What an options table in `text` leaves out: each field of `allowed` without a row, and each allowed value
    its row does not name (as `value` or "value")."""
    rows = {m.group(1): m.group() for m in re.finditer(r"^\| `(\w+)` \|.*$", text, flags=re.M)}
    return [f"{field}: no row" if field not in rows else f"{field}: {value!r}" for field, values in allowed.items()
            for value in ([None] if field not in rows else values)
            if field not in rows or not re.search(rf"[`\"]{value}[`\"]", rows[field])]


@pytest.mark.parametrize("page", ["model_card.md", "docs/configuration.md"])
def test_the_options_tables_list_every_allowed_value(page):
    missing = unlisted_choices((REPO / page).read_text(), choices())
    assert not missing, (f"{page}'s options table leaves out {', '.join(missing)} (configuration_linformer.py "
                         "allows them)")


def test_the_options_check_finds_a_missing_value():
    text = "| `projection_init` | `normal` (default) | how E/F start |\n"
    assert unlisted_choices(text, {"projection_init": ("normal", "window_mean"), "attention_type": ("projected",)}) \
        == ["projection_init: 'window_mean'", "attention_type: no row"]


def test_training_md_recommends_the_projection_the_recipe_answer_names():
    """Issue 66, item 4: the projection docs/training.md tells a new model to start from is the configuration the
    quality study's recipe answer names (its projection, k and n, read from the committed records), and the default
    it names is the one the records make (the convolution once it meets the goal at both n); a new answer fails
    this until the page says it."""
    from benchmarks import time_to_quality
    from experiments.quality import render

    records = render.load()
    _, level, _ = time_to_quality.updates_to_reach(records)
    named = re.search(r"pretrain `(\w+)` at n = (\d+)", render.recipe_answer(records.extended, level))
    assert named, "the records name no recipe: the page's recommendation has nothing behind it"
    run = next(r["run"] for name, r in records.extended.items() if name.startswith(f"{named[1]}_s"))
    page = " ".join((REPO / "docs/training.md").read_text().split())
    head = "Which projection to pretrain a new model with: "
    assert head in page, "docs/training.md lost its recommendation"
    text = page.split(head, 1)[1][:1500]
    what = "convolutional projection" if run["projection"] == "conv" else "learned E/F"
    assert (f"At n = {run['n']} that is the {what} with k = n/{run['n'] // run['k']}, `--config_overrides "
            f"projection_type={run['projection']},projected_dim={run['k']}`") in text, text[:400]
    if render.convolution_is_the_default(records):
        assert "so it is train_mlm.py's default for a new Linformer" in text, text[:1200]
    else:
        assert "train_mlm.py's default stays the paper's learned E/F" in text, text[:1200]
