"""`syncd lint`, `syncd links` and `syncd backlinks` as a person runs them: on a home's vault or on
any folder given with --vault, text and JSON, exit 1 only when lint finds errors."""

from __future__ import annotations

import json
import subprocess
import sys

import syncd
from syncd.cli import main


def test_a_fresh_home_lints_clean(tmp_path, capsys):
    syncd.init(tmp_path / "home")
    assert main(["lint", "--home", str(tmp_path / "home")]) == 0
    assert capsys.readouterr().out.strip() == "no findings"


def test_a_broken_link_is_an_error_with_its_line_and_exit_1(tmp_path, capsys):
    syncd.init(tmp_path / "home")
    page = tmp_path / "home" / "vault" / "Tea.md"
    page.write_text("# Tea\n\nSee [[Coffee]] and [[index#People]].\n", encoding="utf-8")
    assert main(["lint", "--home", str(tmp_path / "home")]) == 1
    out = capsys.readouterr().out
    assert "Tea.md:3: error broken-link: [[Coffee]]" in out
    assert main(["lint", "--json", "--home", str(tmp_path / "home")]) == 1
    doc = json.loads(capsys.readouterr().out)
    broken = [f for f in doc["findings"] if f["code"] == "broken-link"]
    assert [(f["path"], f["line"]) for f in broken] == [("Tea.md", 3)]
    assert doc["counts"]["error"] == 1


def test_links_and_backlinks_resolve_like_obsidian(tmp_path, capsys):
    vault = tmp_path / "vault"
    (vault / "people").mkdir(parents=True)
    (vault / "people" / "Bob.md").write_text("# Bob\n\n## Work\nBuilds boats.\n", encoding="utf-8")
    (vault / "Notes.md").write_text("Met [[bob#work]] and [[Alice]].\n", encoding="utf-8")
    assert main(["links", "Notes", "--vault", str(vault), "--json"]) == 0
    links = json.loads(capsys.readouterr().out)["links"]
    assert [(link["target"], link["subpath_found"]) for link in links] == [("people/Bob.md", True), (None, None)]
    assert main(["backlinks", "people/Bob.md", "--vault", str(vault)]) == 0
    out = capsys.readouterr().out
    assert "Notes.md:1: [[bob#work]] -> people/Bob.md" in out
    assert out.rstrip().endswith("1 backlink to people/Bob.md")


def test_a_page_name_without_a_page_is_no_page(tmp_path, capsys):
    """ "" and "#Heading" name no page (in a link they open the page they are in; here there is
    none): an error, not the links of some page."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Notes.md").write_text("# Notes\n\nSee [[Notes#Notes]].\n", encoding="utf-8")
    for name in ("", "#Notes"):
        for command in ("links", "backlinks"):
            assert main([command, name, "--vault", str(vault)]) == 1
            assert capsys.readouterr().err.strip() == f"syncd: error: no page {name!r} in {vault}"
    assert main(["links", "Notes#Notes", "--vault", str(vault)]) == 0


def test_lint_changes_nothing_on_disk(tmp_path, capsys):
    syncd.init(tmp_path / "home")
    vault = tmp_path / "home" / "vault"
    (vault / "Tea.md").write_text("[[Nowhere]]\n", encoding="utf-8")
    before = {p: p.read_bytes() for p in vault.rglob("*") if p.is_file()}
    main(["lint", "--home", str(tmp_path / "home")])
    assert {p: p.read_bytes() for p in vault.rglob("*") if p.is_file()} == before


def test_lint_links_and_backlinks_of_a_vault_in_a_git_repository_leave_it_clean(tmp_path, capsys):
    """--vault on an Obsidian vault that is not a home: nothing is written into it, so its
    repository's `git status` stays clean (a .syncd/ graph cache was left there, untracked)."""
    vault = tmp_path / "notes"
    vault.mkdir()
    (vault / "Tea.md").write_text("# Tea\n\nSee [[Coffee]] and [[Nowhere]].\n", encoding="utf-8")
    (vault / "Coffee.md").write_text("# Coffee\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(vault)], check=True)
    subprocess.run(["git", "-C", str(vault), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(vault), "commit", "-qm", "notes"], check=True)
    assert main(["lint", "--vault", str(vault)]) == 1
    assert main(["links", "Tea.md", "--vault", str(vault)]) == 0
    assert main(["backlinks", "Coffee", "--vault", str(vault)]) == 0
    assert "[[Nowhere]]" in capsys.readouterr().out
    status = subprocess.run(["git", "-C", str(vault), "status", "--porcelain", "--ignored"], capture_output=True)
    assert status.stdout == b""
    assert sorted(p.name for p in vault.iterdir()) == [".git", "Coffee.md", "Tea.md"]


def test_a_newline_in_a_name_or_a_title_never_starts_another_line(tmp_path, capsys):
    # The report was split into lines before its control characters were escaped: a file name
    # or a title holding a newline printed one finding as two, the second with no path.
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "index.md").write_text("# Index\n", encoding="utf-8")
    (vault / "two\nlines.md").write_text("See [[index]].\n", encoding="utf-8")
    for name in ("A.md", "B.md"):
        (vault / name).write_text('---\ntitle: "Tea\\nCoffee"\n---\nBody.\n', encoding="utf-8")
    main(["lint", "--vault", str(vault)])
    out = capsys.readouterr().out
    assert "title 'Tea\\nCoffee' is also the title of B.md" in out
    assert "two\\nlines.md:1: warning orphan" in out
    assert all(line.split(":")[0].endswith(".md") for line in out.splitlines()[:-1]), out
    main(["backlinks", "index", "--vault", str(vault)])
    assert capsys.readouterr().out.splitlines() == ["two\\nlines.md:1: [[index]] -> index.md", "1 backlink to index"]


def test_a_page_is_named_as_search_prints_it_or_as_a_link_is_pasted(tmp_path, capsys):
    # `syncd search` prints vault/Tea.md:3 and a person copies it, or copies [[Tea]] from the
    # page: both were "no page".
    home = tmp_path / "home"
    syncd.init(home)
    (home / "vault" / "Tea.md").write_text("# Tea\n\nSee [[index]].\n", encoding="utf-8")
    for name in ("vault/Tea.md", "vault/Tea", "[[Tea]]", "![[Tea#Tea]]", "[[tea|shown]]"):
        assert main(["links", name, "--home", str(home)]) == 0, name
        assert capsys.readouterr().out.splitlines()[0] == f"{name}:3: [[index]] -> index.md"
    assert main(["backlinks", "vault/index.md", "--home", str(home)]) == 0
    assert "Tea.md:3: [[index]] -> index.md" in capsys.readouterr().out
    # Outside a home, vault/ is a folder like any other.
    plain = tmp_path / "plain"
    (plain / "vault").mkdir(parents=True)
    (plain / "Tea.md").write_text("[[x]]\n", encoding="utf-8")
    assert main(["links", "vault/Tea.md", "--vault", str(plain)]) == 1


def test_a_page_larger_than_syncd_reads_is_named_not_read(tmp_path, capsys, monkeypatch):
    # The sync leaves such a file out (an error in status); lint read and parsed it whole, in the
    # daemon's own process when asked over REST: a stray dump of gigabytes was all memory.
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Dump.md").write_text("[[Nowhere]]\n" + "x" * 3000 + "\n", encoding="utf-8")
    (vault / "Notes.md").write_text("See [[Dump]].\n", encoding="utf-8")
    monkeypatch.setenv("SYNCD_MAX_FILE_BYTES", "2048")
    assert main(["lint", "--vault", str(vault)]) == 1
    out = capsys.readouterr().out.splitlines()
    too_large = (
        "Dump.md:1: error too-large: 3013 bytes, over the 2048 syncd reads of a file (SYNCD_MAX_FILE_BYTES): not "
        "indexed, its links not checked; split it, or move it out of the vault"
    )
    assert out == [too_large, "1 error"]
    monkeypatch.delenv("SYNCD_MAX_FILE_BYTES")
    assert main(["lint", "--vault", str(vault)]) == 1
    assert "broken-link: [[Nowhere]]" in capsys.readouterr().out


def test_log_lines_show_the_control_characters_of_the_files_they_name(tmp_path):
    # `syncd -v sync` logged a link named like this raw to the terminal: the OSC sequence retitled it.
    home = tmp_path / "home"
    syncd.init(home)
    (home / "vault" / "x\x1b]0;PWNED\x07.md").symlink_to("/etc/passwd")
    result = subprocess.run([sys.executable, "-m", "syncd", "-v", "sync", "--home", str(home)], capture_output=True,
                            text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "vault/x\\x1b]0;PWNED\\x07.md: a symbolic link" in result.stderr
    assert "\x1b" not in result.stderr + result.stdout
