"""The reply's code block, spliced into the captured source by name (pure text and ast: no Triton)."""

from __future__ import annotations

import ast
import pickle

import pytest

from tritune.llm.reply import ReplyError, check_kernel, first_python_block, kernel_text, splice

SOURCE = '''"""Vector add, as a user writes it."""

import torch
import triton
import triton.language as tl

SCALE = 1.0


# Adds two vectors, BLOCK elements a program.
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)  # the sum


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
'''

KERNEL = '''@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first")
    y = tl.load(y_ptr + offs, mask=mask, eviction_policy="evict_first")
    tl.store(out_ptr + offs, x + y, mask=mask)
'''

HELPER = '''@triton.jit
def _sum(a, b):
    return a + b
'''

KERNEL_WITH_HELPER = KERNEL.replace("x + y", "_sum(x, y)")

OLD_KERNEL = SOURCE[SOURCE.index("@triton.jit"): SOURCE.index("\n\n\ndef add(") + 1]


def reply(code: str, tag: str = "python") -> str:
    return f"Here is a faster kernel.\n\n```{tag}\n{code}```\n\nIt loads with evict_first.\n"


# ---- the code block

@pytest.mark.parametrize("tag", ["python", "py", "Python", "python3", ""])
def test_first_python_block_takes_a_marked_or_unmarked_python_block(tag):
    assert first_python_block(reply(KERNEL, tag)) == KERNEL


def test_first_python_block_takes_the_first_of_two():
    text = reply(KERNEL) + "Or with a helper:\n\n```python\n" + HELPER + "```\n"
    assert first_python_block(text) == KERNEL


def test_a_marked_block_wins_over_an_earlier_unmarked_one():
    text = "Run it so:\n\n```\nx = 1\n```\n\n" + reply(KERNEL)
    assert first_python_block(text) == KERNEL


def test_an_unmarked_block_must_parse_and_other_languages_do_not_count():
    text = "```\n$ nvidia-smi -q | grep SM\n```\n```bash\nls\n```\n```\nx = 1\n```\n"
    assert first_python_block(text) == "x = 1\n"


def test_backticks_inside_a_line_do_not_open_a_block():
    assert first_python_block("Wrap code in ``` fences; here it is:\n" + reply(KERNEL)) == KERNEL


def test_crlf_replies_come_back_with_plain_newlines():
    assert first_python_block(reply(KERNEL).replace("\n", "\r\n")) == KERNEL


def test_a_block_cut_by_the_token_limit_runs_to_the_end():
    text = "```python\n" + KERNEL[:60]
    assert first_python_block(text) == KERNEL[:60]
    with pytest.raises(ReplyError) as caught:
        splice(SOURCE, "add_kernel", first_python_block(text))
    assert caught.value.kind == "syntax"


@pytest.mark.parametrize("text", [
    "I cannot improve this kernel.",
    "Use ```tl.load``` with evict_first.",  # backticks in a line of prose are not a fence
    "```\n$ make\n```\n",  # an unmarked block that is not Python
    "```python\n\n```\n",  # an empty block
])
def test_no_code(text):
    with pytest.raises(ReplyError) as caught:
        first_python_block(text)
    assert caught.value.kind == "no_code"


# ---- splicing functions

def test_splice_one_function_replaces_only_its_def():
    new = splice(SOURCE, "add_kernel", KERNEL)
    assert new == SOURCE.replace(OLD_KERNEL, KERNEL)
    start = SOURCE.index(OLD_KERNEL)
    assert new[:start] == SOURCE[:start]  # the comment above the kernel stays
    assert new[start + len(KERNEL):] == SOURCE[start + len(OLD_KERNEL):]
    assert kernel_text(new, "add_kernel") == KERNEL.rstrip("\n")


def test_splice_keeps_every_other_byte_of_a_crlf_source():
    source = SOURCE.replace("\n", "\r\n")
    source = source.replace("SCALE = 1.0", "SCALE = 1.0  \t# odd spacing kept")
    new = splice(source, "add_kernel", KERNEL)
    start = source.index("@triton.jit")
    old_end = source.index("\r\n\r\n\r\ndef add(") + 2
    assert new[:start] == source[:start]
    assert new[start:].startswith(KERNEL.replace("\n", "\r\n"))
    assert new[start + len(KERNEL.replace("\n", "\r\n")):] == source[old_end:]
    assert "\n" not in new.replace("\r\n", "")  # no bare newline mixed in


def test_splice_of_the_kernel_and_a_new_helper_puts_the_helper_before_the_kernel():
    new = splice(SOURCE, "add_kernel", HELPER + "\n\n" + KERNEL_WITH_HELPER)
    tree = ast.parse(new)
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert names == ["_sum", "add_kernel", "add"]
    # the helper goes above the kernel's comment, which stays with the kernel
    assert HELPER + "\n\n# Adds two vectors, BLOCK elements a program.\n" + KERNEL_WITH_HELPER in new
    assert new.startswith(SOURCE[: SOURCE.index("# Adds")])
    assert new.endswith(SOURCE[SOURCE.index("\n\n\ndef add("):])


def test_helpers_keep_the_order_of_the_reply():
    other = HELPER.replace("_sum", "_twice").replace("a + b", "a + a")
    new = splice(SOURCE, "add_kernel", other + HELPER + KERNEL_WITH_HELPER)
    names = [n.name for n in ast.parse(new).body if isinstance(n, ast.FunctionDef)]
    assert names == ["_twice", "_sum", "add_kernel", "add"]


def test_splice_of_a_function_other_than_the_kernel():
    wrapper = "def add(x, y):\n    return x + y\n"
    new = splice(SOURCE, "add_kernel", wrapper)
    assert new == SOURCE[: SOURCE.index("def add(")] + wrapper


def test_splice_replaces_the_last_def_of_a_name_which_is_the_one_python_binds():
    source = SOURCE.replace("\n\n\ndef add(", "\n\n\n" + OLD_KERNEL + "\n\ndef add(")
    new = splice(source, "add_kernel", KERNEL)
    assert new == source[: source.rindex(OLD_KERNEL)] + KERNEL + source[source.rindex(OLD_KERNEL) + len(OLD_KERNEL):]
    assert kernel_text(new, "add_kernel") == KERNEL.rstrip("\n")


def test_a_new_import_goes_after_the_last_import_and_known_ones_are_not_repeated():
    code = "import math\nimport triton\nimport triton.language as tl\n\n" + KERNEL
    new = splice(SOURCE, "add_kernel", code)
    assert new == SOURCE.replace(OLD_KERNEL, KERNEL).replace(
        "import triton.language as tl\n", "import triton.language as tl\nimport math\n")


def test_an_import_goes_after_the_docstring_when_the_source_has_none():
    source = '"""Doc."""\n\n' + SOURCE[SOURCE.index("SCALE"):]  # @triton.jit unbound: only text here
    new = splice(source, "add_kernel", "import math\n" + KERNEL)
    assert new.startswith('"""Doc."""\nimport math\n\nSCALE')


def test_a_reply_docstring_does_not_make_a_whole_module():
    new = splice(SOURCE, "add_kernel", '"""Evict first: x and y are read once."""\n' + KERNEL)
    assert new == SOURCE.replace(OLD_KERNEL, KERNEL)


def test_an_indented_block_is_dedented():
    new = splice(SOURCE, "add_kernel", "".join("    " + line for line in KERNEL.splitlines(True)))
    assert new == SOURCE.replace(OLD_KERNEL, KERNEL)


def test_a_whole_module_replaces_the_source():
    module = "import triton\nimport triton.language as tl\n\nBLOCK = 256\n\n\n" + KERNEL
    assert splice(SOURCE, "add_kernel", module) == module
    assert splice(SOURCE.replace("\n", "\r\n"), "add_kernel", module) == module.replace("\n", "\r\n")


def test_a_whole_module_without_the_kernel():
    with pytest.raises(ReplyError) as caught:
        splice(SOURCE, "add_kernel", "import triton\n\nBLOCK = 256\n" + HELPER)
    assert caught.value.kind == "missing_kernel"
    assert "add_kernel" in str(caught.value)


def test_a_source_without_the_kernel_gets_it_at_the_end():
    source = SOURCE.replace(OLD_KERNEL, "")
    new = splice(source, "add_kernel", KERNEL)
    assert new == source + "\n\n" + KERNEL


def test_syntax_error_kind_and_line():
    broken = KERNEL.replace("mask = offs < n", "mask = offs <")
    with pytest.raises(ReplyError) as caught:
        splice(SOURCE, "add_kernel", broken)
    assert caught.value.kind == "syntax"
    assert str(caught.value).startswith("the reply's code does not parse: line 5: ")
    assert "\n" not in str(caught.value)


def test_what_only_the_compiler_finds_is_a_syntax_error_too():
    with pytest.raises(ReplyError) as caught:
        splice(SOURCE, "add_kernel", "from __future__ import annotations\n" + KERNEL)
    assert caught.value.kind == "syntax"
    assert str(caught.value).startswith("the spliced module does not parse: line 6: from __future__")


def test_messages_are_one_line_of_at_most_300_characters():
    error = ReplyError("signature", "x" * 500 + "\n" + "y")
    assert len(str(error)) == 300 and "\n" not in str(error) and error.kind == "signature"
    with pytest.raises(ValueError):
        ReplyError("slower", "not a kind of reply error")
    copy = pickle.loads(pickle.dumps(error))  # errors may cross from a worker process
    assert (copy.kind, str(copy)) == (error.kind, str(error))


def test_kernel_text():
    assert kernel_text(SOURCE, "add_kernel") == OLD_KERNEL.rstrip("\n")
    assert kernel_text(SOURCE.replace("\n", "\r\n"), "add_kernel") == OLD_KERNEL.rstrip("\n").replace("\n", "\r\n")
    assert kernel_text(SOURCE, "sub_kernel") is None


# ---- the kernel's signature and decorator

def new_kernel(old: str, new: str) -> str:
    assert old in KERNEL
    return splice(SOURCE, "add_kernel", KERNEL.replace(old, new))


def test_check_kernel_accepts_the_same_parameters_in_another_order():
    check_kernel(SOURCE, new_kernel("x_ptr, y_ptr, out_ptr, n,", "out_ptr, n, y_ptr, x_ptr,"), "add_kernel")
    check_kernel(SOURCE, new_kernel("BLOCK: tl.constexpr", "BLOCK"), "add_kernel")  # annotations may change


@pytest.mark.parametrize("old, new, missing, added", [
    ("x_ptr, y_ptr", "a_ptr, y_ptr", "x_ptr", "a_ptr"),  # renamed
    ("n, BLOCK", "n, stride, BLOCK", "none", "stride"),  # added
    (", n, BLOCK", ", BLOCK", "n", "none"),  # removed
])
def test_check_kernel_names_the_parameters_that_changed(old, new, missing, added):
    with pytest.raises(ReplyError) as caught:
        check_kernel(SOURCE, new_kernel(old, new), "add_kernel")
    assert caught.value.kind == "signature"
    assert f"missing: {missing}; added: {added}" in str(caught.value)


@pytest.mark.parametrize("old, new", [
    ("n, BLOCK", "n, *args, BLOCK"),  # the same names (BLOCK keyword-only): only *args is wrong
    ("tl.constexpr)", "tl.constexpr, **options)"),
])
def test_check_kernel_rejects_star_parameters(old, new):
    with pytest.raises(ReplyError) as caught:
        check_kernel(SOURCE, new_kernel(old, new), "add_kernel")
    assert caught.value.kind == "signature" and "*args or **kwargs" in str(caught.value)


@pytest.mark.parametrize("decorator", [
    "", "@functools.lru_cache\n", "@torch.compile\n", "@triton.autotune(configs=[], key=['n'])\n",
])
def test_check_kernel_rejects_a_kernel_that_is_not_jit(decorator):
    code = new_kernel("@triton.jit\n", decorator)
    with pytest.raises(ReplyError) as caught:
        check_kernel(SOURCE, code, "add_kernel")
    assert caught.value.kind == "not_jit"


def test_check_kernel_rejects_other_decorators_above_jit():
    code = new_kernel("@triton.jit\n", "@functools.cache\n@triton.jit\n")
    with pytest.raises(ReplyError) as caught:
        check_kernel(SOURCE, code, "add_kernel")
    assert caught.value.kind == "not_jit" and "@functools.cache" in str(caught.value)


@pytest.mark.parametrize("decorator, imports", [
    ("@triton.jit(do_not_specialize=['n'])\n", ""),
    ("@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=['n'])\n@triton.jit\n", ""),
    ("@triton.heuristics({'EVEN': lambda args: args['n'] % 1024 == 0})\n@triton.jit\n", ""),
    ("@jit\n", "from triton import jit\n"),
    ("@tt.jit\n", "import triton as tt\n"),
])
def test_check_kernel_accepts_jit_spellings(decorator, imports):
    code = splice(SOURCE, "add_kernel", imports + KERNEL.replace("@triton.jit\n", decorator))
    check_kernel(SOURCE, code, "add_kernel")


def test_a_bare_jit_needs_the_import_from_triton():
    code = new_kernel("@triton.jit\n", "@jit\n")
    with pytest.raises(ReplyError) as caught:
        check_kernel(SOURCE, code, "add_kernel")
    assert caught.value.kind == "not_jit"


def test_a_decorator_the_original_kernel_has_may_stay_above_jit():
    # inductor's kernels sit under @triton_heuristics.pointwise(...), which the reply keeps
    wrapped = "@triton_heuristics.pointwise(size_hints=[1024])\n@triton.jit\n"
    original = SOURCE.replace("@triton.jit\ndef add_kernel", wrapped + "def add_kernel")
    check_kernel(original, splice(original, "add_kernel", KERNEL.replace("@triton.jit\n", wrapped)), "add_kernel")


def test_check_kernel_on_a_new_module_without_the_kernel():
    with pytest.raises(ReplyError) as caught:
        check_kernel(SOURCE, "import triton\n", "add_kernel")
    assert caught.value.kind == "missing_kernel"
