"""tritune.imports.import_file: once per process and content; prints, sys.exit and hangs contained."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tritune.errors import one_line
from tritune.imports import ImportTimeout, TopLevelExit, import_file, interpreter_off

KERNEL = '''
import triton
import triton.language as tl

with open({counter!r}, "a") as runs:
    runs.write("ran\\n")  # one line per execution of the top level

@triton.jit
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
'''


def kernel_file(tmp_path: Path, name: str = "kernels.py", extra: str = "") -> tuple[Path, Path]:
    counter = tmp_path / f"{name}.runs"
    path = tmp_path / name
    path.write_text(textwrap.dedent(KERNEL.format(counter=str(counter))) + extra)
    return path, counter


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_a_file_is_imported_once_per_content(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    path, counter = kernel_file(tmp_path)
    first = import_file(path)
    assert import_file(path) is first and import_file(str(path)) is first
    assert runs(counter) == 1
    path.write_text(path.read_text() + "\nX = 1\n")  # new content: its own module
    changed = import_file(path)
    assert changed is not first and changed.X == 1 and runs(counter) == 2
    assert import_file(path, fresh=True) is not changed and runs(counter) == 3
    assert import_file(path) is changed and runs(counter) == 3  # fresh ones are not kept


def test_the_interpreter_gets_its_own_module(tmp_path, monkeypatch):
    path, counter = kernel_file(tmp_path)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    interpreted = import_file(path)
    assert type(interpreted.copy_kernel).__name__ == "InterpretedFunction"
    with interpreter_off():
        compiled = import_file(path)
    assert type(compiled.copy_kernel).__name__ == "JITFunction"
    assert import_file(path) is interpreted and runs(counter) == 2
    assert os.environ["TRITON_INTERPRET"] == "1"  # interpreter_off gives it back


def test_a_failed_import_is_not_kept(tmp_path):
    path, counter = kernel_file(tmp_path, extra="\nraise RuntimeError('not yet')\n")
    for expected in (1, 2):
        with pytest.raises(RuntimeError, match="not yet"):
            import_file(path)
        assert runs(counter) == expected
    assert not [name for name in sys.modules if name.startswith("_tritune_file_kernels_")
                and getattr(sys.modules[name], "__file__", "") == str(path)]


@pytest.mark.parametrize("call, shown", [("sys.exit(3)", "sys.exit(3)"), ("sys.exit()", "sys.exit()"),
                                         ("sys.exit('bye')", "sys.exit('bye')")])
def test_sys_exit_on_import_is_one_line_naming_the_fix(tmp_path, call, shown):
    path = tmp_path / "script.py"
    path.write_text(f"import sys\n{call}\n")
    with pytest.raises(TopLevelExit) as info:
        import_file(path)
    assert one_line(info.value) == (f"calls {shown} on import: guard its top level with "
                                    '`if __name__ == "__main__":`')


def test_prints_on_import_are_one_warning(tmp_path, capsys):
    path = tmp_path / "noisy.py"
    path.write_text("print('one')\nprint('two\\nthree')\n")
    import_file(path)
    import_file(path)  # cached: no second run, no second warning
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"tritune: {path}: prints on import (3 lines); its top level ran once here\n"


def test_an_import_that_blocks_is_stopped_and_the_timer_given_back(tmp_path):
    path = tmp_path / "hangs.py"
    path.write_text("import time\ntry:\n    time.sleep(1000)\nexcept Exception:\n    pass\n")
    handler = signal.getsignal(signal.SIGALRM)
    start = time.monotonic()
    with pytest.raises(ImportTimeout) as info:
        import_file(path, timeout_s=0.3)
    assert time.monotonic() - start < 5
    assert one_line(info.value) == "import did not finish in 0.3 s: skipped"
    assert signal.getsignal(signal.SIGALRM) is handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    quick = tmp_path / "quick.py"
    quick.write_text("X = 2\n")
    assert import_file(quick, timeout_s=0.3).X == 2
    time.sleep(0.4)  # a timer left running would fire here


def test_the_module_is_made_of_the_bytes_read_not_of_a_cached_pyc_or_a_second_read(tmp_path):
    """``import_file`` compiles the bytes it read (and hashed): an unchecked-hash ``.pyc`` planted
    in ``__pycache__`` (which Python's own loader runs without looking at the source) does not
    run, and ``data=`` bytes win over what the file holds now."""
    import importlib.util
    import py_compile

    path, evil = tmp_path / "plain.py", tmp_path / "evil.py"
    path.write_text("VALUE = 'source'\n")
    evil.write_text("VALUE = 'planted pyc'\n")
    py_compile.compile(str(evil), cfile=importlib.util.cache_from_source(str(path)),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    assert import_file(path, fresh=True).VALUE == "source"
    checked = b"VALUE = 'checked bytes'\n"
    module = import_file(path, fresh=True, data=checked)
    assert module.VALUE == "checked bytes" and module.__file__ == str(path.resolve())
