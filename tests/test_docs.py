"""The README and docs/ are self-contained: a clone has everything they point to."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_no_link_or_path_outside_the_repository():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert "../shared" not in text, f"{doc.name} points outside the repository"
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if "://" in target:
                continue
            assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


def test_taxonomy_doc_lists_exactly_the_declared_codes():
    taxonomy = yaml.safe_load((ROOT / "pipeline/declared/taxonomy.yaml").read_text("utf-8"))
    doc = (ROOT / "docs/taxonomy.md").read_text("utf-8")
    sections = re.split(r"^## ", doc, flags=re.M)[1:]
    documented = {s.split()[0].removesuffix("_code"): set(re.findall(r"^\| `([A-Z_]+)` \|", s, re.M))
                  for s in sections}
    for dim, codes in taxonomy["dimensions"].items():
        assert documented.get(dim) == set(codes), f"docs/taxonomy.md {dim}: {documented.get(dim)}"


def test_readme_points_to_the_reference_docs():
    readme = (ROOT / "README.md").read_text("utf-8")
    for name in ("docs/input-layout.md", "docs/outputs.md", "docs/taxonomy.md"):
        assert name in readme
