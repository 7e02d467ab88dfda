"""The README and docs/ point only at things that exist, and the README stays the front door.

Every relative Markdown link or image of ``README.md`` and ``docs/**/*.md`` (``[text](path)``,
``[text](path#anchor)``, ``![alt](path)``, ``[text](#anchor)``) must name a file or folder that exists,
relative to the file that links it, and an ``#anchor`` into a Markdown file must name one of its headings
(GitHub's slugs). Links in code (fenced blocks, inline code) and to ``http(s)://``/``mailto:`` are not checked.
Paths that only a run creates (``reports/``, ``metrics/``, ``mlruns/``, ``models/``, ``data/``) may be linked
only when :data:`RUN_OUTPUTS_ALLOWED` names them, since a fresh clone lacks them. The README keeps its two
set-up commands on top and stays under :data:`README_MAX_LINES` lines.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 250

# Top-level folders whose contents a run writes (absent in a fresh clone).
RUN_OUTPUT_DIRS = ("reports", "metrics", "mlruns", "models", "data")
# Run outputs a doc may still link, each with the reason. Prefer not to link them (empty on purpose).
RUN_OUTPUTS_ALLOWED: frozenset[str] = frozenset()

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SKIP_SCHEMES = ("http://", "https://", "mailto:", "ftp://")


def doc_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of every line outside fenced code blocks."""
    out, fence = [], None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is None:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower-cased, punctuation dropped, spaces -> hyphens."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link renders as its text
    text = text.replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path):
    """``(line number, target)`` of every link outside code."""
    for number, line in prose_lines(path):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            yield number, match.group(1)


def problem(path: Path, target: str) -> str | None:
    """Why ``target`` (linked from ``path``) points nowhere, or ``None``."""
    if target.startswith(SKIP_SCHEMES):
        return None
    file_part, _, anchor = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path
    try:
        relative = dest.relative_to(ROOT)
    except ValueError:
        return "outside the repository"
    if relative.parts and relative.parts[0] in RUN_OUTPUT_DIRS and relative.as_posix() not in RUN_OUTPUTS_ALLOWED:
        return f"a run output ({relative.parts[0]}/ is written by the pipeline; allow it in RUN_OUTPUTS_ALLOWED)"
    if not dest.exists():
        return "no such file"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"no heading #{anchor} in {relative.as_posix()}"
    return None


def test_every_relative_link_points_at_something_that_exists():
    broken = []
    for path in doc_files():
        for number, target in links(path):
            why = problem(path, target)
            if why:
                broken.append(f"{path.relative_to(ROOT).as_posix()}:{number}: {target} ({why})")
    assert not broken, "links that point nowhere:\n" + "\n".join(broken)


def test_the_checker_sees_links_and_anchors(tmp_path):
    """The checker itself: a real link passes, a missing file, heading or run output fails, code is skipped."""
    doc = ROOT / "docs" / "usage.md"
    assert problem(doc, "design.md") is None
    assert problem(doc, "../README.md#documentation") is None
    assert problem(doc, "no_such_file.md") == "no such file"
    assert problem(doc, "../README.md#no-such-heading").startswith("no heading")
    assert problem(doc, "../reports/report.md").startswith("a run output")
    assert problem(doc, "https://example.org/x") is None
    sample = tmp_path / "sample.md"
    sample.write_text("# Title (`x.y`)\n[a](b.md) `[c](d.md)`\n```\n[e](f.md)\n# not a heading\n```\n", encoding="utf-8")
    assert list(links(sample)) == [(2, "b.md")]
    assert anchors(sample) == {"title-xy"}
    assert slug("6. A wider subspace without the Ukrainian job titles (`hard_k16`)") == \
        "6-a-wider-subspace-without-the-ukrainian-job-titles-hard_k16"


def test_every_doc_is_reachable_from_the_readme():
    """The README's index links every docs/*.md and the notes' index, which links every note."""
    def linked(path: Path) -> set[Path]:
        return {(path.parent / t.partition("#")[0]).resolve() for _, t in links(path) if not t.startswith(SKIP_SCHEMES)}

    notes_index = ROOT / "docs" / "notes" / "README.md"
    missing = [p for p in [*sorted((ROOT / "docs").glob("*.md")), notes_index] if p.resolve() not in linked(README)]
    missing += [p for p in sorted(notes_index.parent.glob("*.md")) if p != notes_index and p.resolve() not in linked(notes_index)]
    assert not missing, "not linked from the README's index (or the notes' index): " + \
        ", ".join(p.relative_to(ROOT).as_posix() for p in missing)


def test_readme_is_at_most_250_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the front door keeps ≤ {README_MAX_LINES}"


def test_readme_starts_with_the_two_commands():
    """The first code block, before any section, holds exactly `make run` then `make test`."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"^```[a-z]*\n(.*?)^```", text, flags=re.M | re.S)
    assert block, "README.md has no code block"
    assert "\n## " not in text[: block.start()], "the set-up commands must come before the first section"
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    assert [c for c in commands if c] == ["make run", "make test"]
