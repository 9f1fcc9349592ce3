"""The libraries a capture's kernel files import, warmed at a lane worker's start (``replay.warm``,
``Worker(warm=...)``): which names, which never (a sibling of the kernel's own folders, a
relative import), and a worker whose warm import fails still starts."""

from __future__ import annotations

import json
import sys

from tritune.capture.spec import header
from tritune.replay.warm import WARM_MAX, kernel_imports
from tritune.worker import Worker

KERNEL = """\
import math
import triton
import triton.language as tl
from heavylib.ops import helpers
from . import relative_sibling
from helpers_here import thing
try:
    from optional_lib.sub import fast
except ImportError:
    fast = None
if math.pi > 3:
    import guarded_lib

def not_top_level():
    import inside_a_function
"""

OTHER = """\
import triton
from heavylib.ops import helpers
import program_sibling
import second_lib as sl
"""


def spec(name: str, source: str, source_file: str) -> dict:
    return {"kernel": name, "kind": "jit", "module": "m", "source_file": source_file, "source": source,
            "source_hash": "0" * 64, "args": [], "constexprs": {}, "options": {}, "grid": [1, 1, 1]}


def write(root, launches):
    (root / "launches.jsonl").write_text("".join(json.dumps(s) + "\n" for s in [header(), *launches]))


def capture(tmp_path):
    root, program = tmp_path / "cap", tmp_path / "program"
    (root / "sources").mkdir(parents=True)
    program.mkdir()
    (root / "sources" / "k.py").write_text(KERNEL)
    (root / "sources" / "helpers_here.py").write_text("thing = 1\n")  # beside the copy: the kernel's own
    (root / "sources" / "other.py").write_text(OTHER)
    (program / "program_sibling.py").write_text("")  # in the program's folder: the program's own
    launches = [spec("a", "sources/k.py", str(program / "k.py")), spec("b", "sources/k.py", str(program / "k.py")),
                spec("c", "sources/other.py", str(program / "other.py"))]
    write(root, launches)
    return root


def test_the_top_level_absolute_imports_of_each_kernel_file_once_in_order(tmp_path):
    assert kernel_imports(capture(tmp_path)) == ("math", "triton", "triton.language", "heavylib.ops",
                                                 "optional_lib.sub", "guarded_lib", "program_sibling", "second_lib")


def test_no_name_a_kernel_copy_s_folder_holds_nor_a_relative_one(tmp_path):
    found = kernel_imports(capture(tmp_path))
    assert "helpers_here" not in found  # warming would cache another where the kernel expects its own
    assert "program_sibling" in found  # the program's folder is last on the path: an installed one wins anyway
    assert not any("relative" in name or "inside_a_function" in name for name in found)


def test_a_name_local_to_one_kernel_file_is_not_warmed_for_another_that_imports_it(tmp_path):
    """``a/k.py`` has its own ``helpers.py``; ``b/k2.py`` imports a ``helpers`` from the path.
    Warmed for ``b``, the installed ``helpers`` would be the one ``a/k.py`` gets from
    ``sys.modules``: neither is warmed. Extension modules count as the folder's own too."""
    root = tmp_path / "cap"
    for folder, text in (("a", "import helpers\nimport fastext\n"),
                         ("b", "import helpers\nimport fastext\nimport other\n")):
        (root / folder).mkdir(parents=True)
        (root / folder / "k.py").write_text(text)
    (root / "a" / "helpers.py").write_text("")
    (root / "a" / "fastext.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    write(root, [spec("a", "a/k.py", ""), spec("b", "b/k.py", "")])
    assert kernel_imports(root) == ("other",)


def test_an_unreadable_capture_or_file_warms_nothing_and_many_files_are_capped(tmp_path):
    assert kernel_imports(tmp_path / "missing") == ()
    root = capture(tmp_path)
    (root / "sources" / "k.py").write_text("def broken(:\n")
    assert kernel_imports(root) == ("triton", "heavylib.ops", "program_sibling", "second_lib")  # the other still read
    (root / "sources" / "other.py").write_text("x = 1" + "+1" * 20000 + "\n")  # too deep for ast: nothing, no error
    assert kernel_imports(root) == ()
    many = tmp_path / "many"
    (many / "s").mkdir(parents=True)
    launches = []
    for i in range(WARM_MAX + 10):
        (many / "s" / f"f{i}.py").write_text(f"import lib_{i}\n")
        launches.append(spec(f"k{i}", f"s/f{i}.py", ""))
    write(many, launches)
    assert len(kernel_imports(many)) == WARM_MAX


def test_a_warm_import_that_exits_or_crashes_the_child_costs_a_second_start_not_the_worker(tmp_path):
    (tmp_path / "warm_exits.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "warm_dies.py").write_text("import os\nos._exit(3)\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with Worker(60, warm=("warm_exits",)) as worker:  # caught in the child: one start, as if absent
            assert worker.start().ok and worker.starts == 1 and worker.warm == ("warm_exits",)
        with Worker(60, warm=("warm_dies",)) as worker:  # the child died: started again, without them
            assert worker.start().ok and worker.starts == 2 and worker.warm == ()
            assert worker.call("worker_jobs:pid").ok
    finally:
        sys.path.remove(str(tmp_path))


def test_a_worker_imports_its_warm_modules_at_start_and_a_failing_one_does_not_fail_it(tmp_path):
    (tmp_path / "warm_probe_lib.py").write_text("import os\nos.environ['WARMED'] = 'yes'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with Worker(60, warm=("warm_probe_lib", "no_such_module_here")) as worker:
            assert worker.start().ok
            assert "warm import of no_such_module_here failed" in worker._child.log_tail()
            outcome = worker.call("worker_jobs:env", ["WARMED"])
            assert outcome.ok and outcome.value["WARMED"] == "yes"  # imported before any job
    finally:
        sys.path.remove(str(tmp_path))
