"""The documentation site builds with ``mkdocs build --strict``: a warning (a broken link or anchor between pages, a
page missing from the nav, an included file that is not there) fails the build, and so this test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor, printed on every build
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_site_builds_strict_with_every_page(tmp_path):
    run = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert run.returncode == 0, run.stderr
    assert "WARNING" not in run.stderr, run.stderr
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")}
    pages = {p.relative_to(ROOT / "docs").with_suffix("").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    expected = {"index.html"} | {f"{page.removesuffix('index').rstrip('/')}/index.html".lstrip("/") for page in pages}
    assert expected <= built
    # The generated reference and bench/RESULTS.md (included) are in the site.
    assert "ExtractNewRecordState" in (tmp_path / "site" / "reference" / "transforms" / "index.html").read_text()
    assert "Earlier side-by-side runs" in (tmp_path / "site" / "benchmarks" / "earlier-runs" / "index.html").read_text()


def test_a_broken_link_fails_the_build(tmp_path):
    """The check is on: the same site with one link to an anchor that does not exist does not build."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    page = docs / "index.md"
    page.write_text(page.read_text() + "\n[gone](getting-started.md#no-such-section)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}"))
    run = _build(config, tmp_path / "site")
    assert run.returncode != 0
    assert "no-such-section" in run.stderr
