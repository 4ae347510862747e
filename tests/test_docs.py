"""The snippets users copy from README.md, model_card.md, docs/ and the release cards. A Linformer folder carries
its code as remote code, and without `trust_remote_code=True` transformers stops at an interactive "[y/N]"
prompt (AutoTokenizer too: it reads the folder's config first), where a script run at a terminal waits."""

import re
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
    code = 'tok = AutoTokenizer.from_pretrained(name)\nm = AutoModel.from_pretrained(\n    name, trust_remote_code=True)\n'
    assert list(calls(code)) == ["AutoTokenizer.from_pretrained(name)",
                                 "AutoModel.from_pretrained(\n    name, trust_remote_code=True)"]
