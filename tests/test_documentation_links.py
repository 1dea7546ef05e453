"""README and the docs/ pages cite only what the checkout holds (issue 43, VX-OPS-11): every
relative link names a file that exists, and an anchor names a heading of that file; every
`docs/<page>` the pages, templates and Makefile mention exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
MENTION = re.compile(r"\bdocs/[A-Za-z0-9_./-]+\.(?:md|py|png)\b")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    in_code = False
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (heading := re.match(r"#{1,6} (.+)", line)):
            found.add(slug(heading.group(1)))
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{page.name}: {target} (no such heading)")
    return broken


def test_every_link_of_the_readme_and_the_docs_pages_resolves() -> None:
    """VX-OPS-11: a link an owner follows lands on the page and heading it names."""
    assert len(PAGES) > 10
    assert [problem for page in PAGES for problem in broken_links(page)] == []


def test_every_docs_page_mentioned_exists() -> None:
    """VX-OPS-11: no page, template or make target sends the owner to a document the checkout
    does not contain."""
    sources = [*PAGES, ROOT / "Makefile", *sorted((ROOT / "templates").rglob("*.html"))]
    mentioned = {
        (source.name, name) for source in sources for name in MENTION.findall(source.read_text())
    }
    assert len(mentioned) > 5
    assert [(where, name) for where, name in sorted(mentioned) if not (ROOT / name).exists()] == []


def test_a_heading_anchor_is_made_as_github_makes_it() -> None:
    heading = "Why a call is allowed, asked or refused"
    assert slug(heading) == "why-a-call-is-allowed-asked-or-refused"
    assert slug("A persona's tools over MCP") == "a-personas-tools-over-mcp"
    assert slug("1. Set up") == "1-set-up"
