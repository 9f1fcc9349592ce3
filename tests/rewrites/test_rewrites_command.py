"""``tritune rewrites PATH``: every kernel listed with the rewrites the (fake, registered here) rules
make, as text and as JSON; a file that cannot be imported is one line and the rest goes on."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fake_rules import BrokenRule, CommentRule

import tritune.rewrites
from tritune.cli import main
from tritune.rewrites.base import TOLERANCE

KERNELS = '''import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def twice_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''


@pytest.fixture
def rules(monkeypatch):
    registered = {"comment": CommentRule(only=("copy_kernel",)),
                  "never": CommentRule("never", exact=TOLERANCE, only=())}
    monkeypatch.setattr(tritune.rewrites, "RULES", registered)
    return registered


@pytest.fixture
def kernels(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def invoke(*args):
    return CliRunner().invoke(main, ["rewrites", *map(str, args)])


def test_each_kernel_is_listed_with_the_rewrites_that_apply_and_why_the_others_do_not(rules, kernels):
    result = invoke(kernels)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"{kernels}::copy_kernel" in out and f"{kernels}::twice_kernel" in out
    copy, twice = out.split(f"{kernels}::twice_kernel")
    assert "comment(S=2) (exact): comment is legal here: a comment" in copy
    assert "no rewrite applies" in twice and "comment: twice_kernel has no pattern for comment" in twice
    assert "never: twice_kernel has no pattern for never" in twice
    assert "@@" not in out  # diffs only with --diff
    assert "never: copy_kernel" not in copy  # a kernel with a rewrite: the others' reasons only with --why
    assert "1 rewrite(s) in 2 kernel(s), 0 file(s) not imported" in out
    assert "never: copy_kernel has no pattern for never" in invoke(kernels, "--why").stdout


def test_diff_prints_the_unified_diff_of_each_rewrite(rules, kernels):
    result = invoke(kernels, "--diff")
    assert result.exit_code == 0, result.output
    assert f"--- a/{kernels}" in result.stdout and f"+++ b/{kernels}" in result.stdout
    assert "+    # comment S=2" in result.stdout


def test_json_is_a_list_of_kernels_with_their_rewrites(rules, kernels):
    result = invoke(kernels, "--json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [(k["kernel"], k["file"]) for k in listed] == [("copy_kernel", str(kernels)), ("twice_kernel", str(kernels))]
    copy, twice = listed
    [rewrite] = copy["rewrites"]
    assert set(rewrite) == {"rule", "exact", "why", "diff", "params"}
    assert (rewrite["rule"], rewrite["exact"], rewrite["params"]) == ("comment", "exact", {"S": 2})
    assert rewrite["why"] == "comment is legal here: a comment"
    added = [line for line in rewrite["diff"].splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == ["+    # comment S=2"]  # one line added, nothing else touched
    assert twice["rewrites"] == [] and set(twice["not_applied"]) == {"comment", "never"}


def test_kernel_picks_one_kernel(rules, kernels):
    listed = json.loads(invoke(kernels, "--json", "--kernel", "twice_kernel").stdout)
    assert [k["kernel"] for k in listed] == ["twice_kernel"]
    result = invoke(kernels, "--kernel", "nope")
    assert result.exit_code == 1 and "no @triton.jit kernel named 'nope' found in" in result.stderr


def test_a_file_that_cannot_be_imported_is_one_line_and_the_others_go_on(rules, kernels, tmp_path):
    (tmp_path / "broken.py").write_text("import triton\nraise RuntimeError('no GPU here')\n")
    result = invoke(tmp_path, "--json")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [f"tritune rewrites: {tmp_path / 'broken.py'}: RuntimeError: no GPU here"]
    assert [k["kernel"] for k in json.loads(result.stdout)] == ["copy_kernel", "twice_kernel"]
    human = invoke(tmp_path)
    assert "1 file(s) not imported" in human.stdout and "Traceback" not in human.output


def test_nothing_to_look_at_exits_1(rules, tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('no GPU here')\n")
    result = invoke(tmp_path / "broken.py")
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1
    (tmp_path / "broken.py").unlink()
    (tmp_path / "plain.py").write_text("x = 1\n")
    result = invoke(tmp_path)
    assert result.exit_code == 1 and "no @triton.jit kernel found in" in result.stderr


def test_a_rule_with_a_bug_is_reported_as_its_reason_and_the_others_still_run(monkeypatch, kernels):
    monkeypatch.setattr(tritune.rewrites, "RULES", {"broken": BrokenRule(), "comment": CommentRule()})
    listed = json.loads(invoke(kernels, "--json").stdout)
    assert all([r["rule"] for r in k["rewrites"]] == ["comment"] for k in listed)
    assert listed[0]["not_applied"]["broken"] == "the rule failed: KeyError: 'a bug in the rule'"


def test_a_missing_path_is_a_usage_error(tmp_path):
    result = invoke(tmp_path / "nope.py")
    assert result.exit_code == 2 and "does not exist" in result.stderr
