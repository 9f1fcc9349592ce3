"""The README and docs/ as a newcomer reads them: a short README whose install line is CI's, no
internal numbering in users' docs, links that resolve, commands that parse, and every command,
option and environment variable of tritune named in docs/cli.md (so adding one without its docs
fails here). No GPU: reads files and click's command tree only."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from tritune import config
from tritune.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CLI_DOC = DOCS / "cli.md"
# architecture.md says once which paper each internal "seed" is; every other page is a user's.
USER_DOCS = [README, *(p for p in sorted(DOCS.glob("*.md")) if p.name != "architecture.md")]
ALL_DOCS = [README, *sorted(DOCS.glob("*.md"))]
INTERNAL = re.compile(r"\b(seed|issue|session)[ -]\d+", re.IGNORECASE)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def commands(command: click.Command = main, path: tuple[str, ...] = ("tritune",)):
    """Every command under ``main`` with its path, groups included (``tritune store``)."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from commands(sub, (*path, name))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of its level or above."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, flags=re.MULTILINE)
    assert match, f"docs/cli.md has no heading {heading!r}"
    level = len(match.group(1))
    end = re.search(rf"^#{{1,{level}}} ", text[match.end():], flags=re.MULTILINE)
    return text[match.end():match.end() + end.start() if end else len(text)]


def code_lines(page: Path):
    """The lines of a page's code blocks: fenced, or indented by 4 spaces after a blank line."""
    fenced = indented = False
    previous = ""
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            yield line.strip()
        else:
            indented = line.startswith("    ") and (indented or not previous.strip())
            if indented:
                yield line.strip()
        previous = line


def named(option: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


# ------------------------------------------------------------------------------- the README

def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) <= 210


def test_the_readme_installs_and_tests_as_ci_does():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    install = next(line for line in ci if "pip install" in line).replace(" -q", "")
    test = next(line for line in ci if "pytest" in line)
    text = README.read_text()
    assert install.strip() in text and test.strip() in text
    assert "venv" in text and "cd tritune" in text


def test_the_readme_tours_every_command():
    text = README.read_text()
    missing = [name for name in main.commands if not re.search(rf"`{name}\b", text)]
    assert not missing, f"README's tour does not name: {missing}"


def test_the_readme_main_job_exists():
    text = README.read_text()
    programs = set(re.findall(r"\bexamples/[\w/]+\.py\b", text))
    assert "examples/user_program.py" in programs
    assert all((ROOT / p).is_file() for p in programs), programs


# ------------------------------------------------------------------------- every user's doc

@pytest.mark.parametrize("page", USER_DOCS, ids=lambda p: p.name)
def test_users_docs_say_no_internal_numbers(page):
    found = [m.group(0) for m in INTERNAL.finditer(page.read_text())]
    assert not found, f"{page.name} says {found}: name what it is instead"


@pytest.mark.parametrize("page", ALL_DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def test_the_link_check_can_fail(tmp_path):
    """The planted proof for the two tests above: a missing page and a missing anchor are found."""
    (tmp_path / "a.md").write_text("# Title\n\n## A section\n")
    assert anchors(tmp_path / "a.md") == {"title", "a-section"}
    assert slug("`tritune store import`") == "tritune-store-import"
    assert slug("Stores are signed: sharing them") == "stores-are-signed-sharing-them"
    assert "no-such-section" not in anchors(tmp_path / "a.md")


@pytest.mark.parametrize("page", USER_DOCS, ids=lambda p: p.name)
def test_every_command_line_in_the_docs_parses(page):
    """Each `tritune ...` line of a code block names a real command and only its options."""
    by_path = {" ".join(path[1:]): command for path, command in commands()}
    wrong = []
    for line in code_lines(page):
        if not line.startswith("tritune ") or line.split()[1].endswith(":"):
            continue  # not a command, or a line tritune prints ("tritune run: ...")
        words = shlex.split(line.split(" -- ")[0], comments=True)[1:]
        name = words[0]
        if name == "store" and len(words) > 1:
            name = f"store {words[1]}"
        command = by_path.get(name)
        if command is None:
            wrong.append(line)
            continue
        options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        for word in words:
            for option in word.strip("[]").split("|"):
                if option.startswith("-") and option.split("=")[0] not in options:
                    wrong.append(f"{line}: {option}")
    assert not wrong, f"{page.name}: {wrong}"


# ---------------------------------------------------------------------------- docs/cli.md

def test_cli_doc_names_every_command_and_option():
    text = CLI_DOC.read_text()
    missing = []
    for path, command in commands():
        if path == ("tritune",):
            missing += [o for p in command.params for o in p.opts if not named(o, text)]
            continue
        if isinstance(command, click.Group):
            continue  # a group's subcommands have the sections
        body = section(text, f"`{' '.join(path)}`")
        missing += [f"{' '.join(path)} {o}" for p in command.params if isinstance(p, click.Option)
                    for o in (*p.opts, *p.secondary_opts) if not named(o, body)]
    assert not missing, f"docs/cli.md does not name: {missing}"


def test_cli_doc_names_every_environment_variable_of_tritune():
    names = {value for key, value in vars(config).items()
             if key.startswith("ENV_") and isinstance(value, str) and value.startswith("TRITUNE_")}
    names |= set(config.SECRET_ENV)
    text = CLI_DOC.read_text()
    assert names and not [n for n in sorted(names) if not named(n, text)]


def test_the_option_check_can_fail():
    """The planted proof for the test above: an option missing from a section is found, and a
    longer option does not stand in for a shorter one."""
    text = "### `tritune x`\n\n| `--budget-s` | ... |\n\n### `tritune y`\n\n| `--out` |\n"
    assert named("--budget-s", section(text, "`tritune x`"))
    assert not named("--out", section(text, "`tritune x`"))
    assert not named("--budget", section(text, "`tritune x`"))


def test_no_command_help_names_a_seed_or_an_issue():
    """What ``--help`` prints is a user's doc too."""
    found = []
    for path, command in commands():
        texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
        found += [f"{' '.join(path)}: {m.group(0)}" for text in texts for m in INTERNAL.finditer(text)]
    assert not found, found
