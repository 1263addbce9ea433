"""Every document the code, tests, profiles and docs cite is in this repository.

A maintainer has this repository and nothing else: a comment that points at a file elsewhere
(or at one that was renamed) explains nothing. Cited paths must resolve here, and documents
that only ever existed outside the repository must not be mentioned at all.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: top-level folders of this repository: a path beginning with one of them is a citation to check
TOP_DIRS = ("docs", "tools", "tests", "pytest_specperf", "perf_cases", ".ci")
#: ``docs/ci.md``, ``tools/generate_corpora.py``, ``tests/engine/``: from a top-level folder on
CITED_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(re.escape(d) for d in TOP_DIRS) + r")/[\w./-]*)")
#: any document name: ``README.md``, ``docs/ci.md``
CITED_DOC = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
#: documents that were never part of this repository (spelt in pieces so this file does not cite them)
OUTSIDE = re.compile("|".join([
    r"\bDESIGN" + r"\.md",
    r"\breference" + r"/\w+\.md",
    r"\bshared" + r"/(?:seed|reference)",
    r"(?<![\w/])(?:stats|style|peers)" + r"\.md",
]))
#: Markdown links: [text](target)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def source_files() -> list[Path]:
    """Code, tests, tools, profiles and build files: where comments and docstrings cite documents."""
    files = [p for d in ("pytest_specperf", "tests", "tools", "perf_cases") for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in (".py", ".yaml", ".yml") and "__pycache__" not in p.parts]
    extra = [ROOT / n for n in ("conftest.py", "pyproject.toml", "tox.ini", "MANIFEST.in", ".ci/run")]
    return sorted(files + [p for p in extra if p.is_file()])


def doc_files() -> list[Path]:
    """README, the docs folder and the package's data notes."""
    return sorted([ROOT / "README.md", *DOCS.glob("*.md"), *(ROOT / "pytest_specperf").rglob("*.md")])


def prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of the comments and docstrings of a file; for non-Python files, its comment lines."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith("#")]
    out = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
           if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.append((first.lineno, first.value.value))
    return out


def resolves(cited: str, where: Path) -> bool:
    """A cited path exists from the repository root or from the citing file's folder."""
    cited = cited.rstrip(".,;:")
    return any((base / cited).exists() for base in (ROOT, where.parent))


def unresolved(path: Path, chunks: list[tuple[int, str]]) -> list[str]:
    """'file:line: cited' for each citation in ``chunks`` that does not resolve."""
    bad: dict[str, None] = {}  # ordered and without repeats: a doc path matches both patterns
    for line, text in chunks:
        for pattern in (CITED_PATH, CITED_DOC):
            bad.update({f"{path.relative_to(ROOT)}:{line}: {m.group(1)}": None for m in pattern.finditer(text)
                        if not resolves(m.group(1), path)})
    return list(bad)


def test_code_tests_and_profiles_cite_only_files_in_this_repository() -> None:
    bad = [b for path in source_files() for b in unresolved(path, prose(path))]
    assert not bad, "cited paths that do not exist in the repository:\n" + "\n".join(bad)


def test_docs_cite_only_files_in_this_repository() -> None:
    bad = []
    for path in doc_files():
        lines = list(enumerate(path.read_text(encoding="utf-8").splitlines(), 1))
        bad += unresolved(path, lines)
        for line, text in lines:
            for target in LINK.findall(text):
                if "://" in target or target.startswith(("#", "mailto:")):
                    continue
                if not (path.parent / target.split("#")[0]).exists():
                    bad.append(f"{path.relative_to(ROOT)}:{line}: link {target}")
    assert not bad, "documents citing what is not in the repository:\n" + "\n".join(bad)


@pytest.mark.parametrize("group", ["source", "docs"])
def test_no_mention_of_documents_outside_the_repository(group: str) -> None:
    files = source_files() if group == "source" else doc_files()
    bad = [f"{path.relative_to(ROOT)}:{i}: {m.group(0)}"
           for path in files
           for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
           for m in OUTSIDE.finditer(line)]
    assert not bad, "mentions of documents a maintainer does not have (cite docs/ instead):\n" + "\n".join(bad)


def test_readme_links_every_doc() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {Path(t).name for t in LINK.findall(readme) if t.startswith("docs/")}
    expected = {"measurement.md", "statistics.md", "servers.md", "ci.md", "writing-cases.md"}
    assert expected <= {p.name for p in DOCS.glob("*.md")}, "a promised document is missing from docs/"
    assert {p.name for p in DOCS.glob("*.md")} <= linked, "README's Documentation section must link every docs/ file"
