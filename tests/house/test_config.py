"""``tritune.config``: the one place that reads and writes environment variables."""

from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tritune import config

SRC = Path(config.__file__).resolve().parent
ENV_FUNCTIONS = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def env_uses(path: Path) -> list[str]:
    """``LINE: what`` for each place ``path`` touches the environment directly: ``os.environ``,
    ``os.getenv``... or ``from os import environ``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Attribute) and node.attr in ENV_FUNCTIONS and isinstance(node.value, ast.Name)
                and node.value.id == "os"):
            found.append(f"{node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"{node.lineno}: from os import {alias.name}" for alias in node.names
                      if alias.name in ENV_FUNCTIONS]
    return sorted(found)


def test_only_config_touches_the_environment():
    # capture/_boot/sitecustomize.py too reads its variables through config (see its docstring)
    offenders = [f"{path.relative_to(SRC.parent)}:{use}" for path in sorted(SRC.rglob("*.py"))
                 if path != SRC / "config.py" for use in env_uses(path)]
    assert not offenders, "read/write environment variables through tritune.config:\n" + "\n".join(offenders)


def test_the_check_sees_each_way_of_touching_it(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\nfrom os import getenv\nA = os.environ.get('X')\nos.putenv('X', '1')\n"
                       "B = dict(os.environ)\n")
    assert env_uses(planted) == ["2: from os import getenv", "3: os.environ", "4: os.putenv", "5: os.environ"]
    assert env_uses(SRC / "config.py")  # the allowed one does touch it


def test_config_imports_only_the_standard_library():
    # capture/_boot/sitecustomize.py imports it in every process of a captured or run command
    code = "import sys, tritune.config; print(sorted(m.split('.')[0] for m in sys.modules))"
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                          env=config.environment({config.ENV_PYTHONPATH: str(SRC.parent)}))
    third_party = set(done.stdout.strip("[]\n").replace("'", "").split(", ")) - set(sys.stdlib_module_names) - {"__main__"}
    assert third_party == {"tritune"}, third_party


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on", "y", "0", "", "no", "off", " 1", "2"])
def test_interpreting_reads_triton_interpret_as_triton_does(value):
    from triton._C.libtriton import getenv_bool

    with config.override({config.ENV_INTERPRET: value}):
        assert config.interpreting() is getenv_bool(config.ENV_INTERPRET, False)
    assert config.interpreting({}) is False


def test_override_restores_set_and_unset_variables(monkeypatch):
    monkeypatch.setenv("TRITUNE_TEST_A", "before")
    monkeypatch.delenv("TRITUNE_TEST_B", raising=False)
    with pytest.raises(RuntimeError), config.override({"TRITUNE_TEST_A": None}, TRITUNE_TEST_B="set"):
        assert "TRITUNE_TEST_A" not in os.environ and os.environ["TRITUNE_TEST_B"] == "set"
        raise RuntimeError("restored on error too")
    assert os.environ["TRITUNE_TEST_A"] == "before" and "TRITUNE_TEST_B" not in os.environ


def test_environment_and_python_path_first():
    base = {"PYTHONPATH": os.pathsep.join(["/a", "/boot", "/b"]), "KEEP": "1", "DROP": "x"}
    env = config.environment({"DROP": None, "NEW": "2", "PYTHONPATH": config.python_path_first("/boot", base)},
                             environ=base)
    assert env == {"PYTHONPATH": os.pathsep.join(["/boot", "/a", "/b"]), "KEEP": "1", "NEW": "2"}
    assert base["DROP"] == "x"  # a copy
    assert config.python_path_first("/boot", {}) == "/boot"


def test_ncu_and_path_readers():
    assert config.ncu_path({config.ENV_NCU: " /opt/ncu "}) == "/opt/ncu" and config.ncu_path({}) == ""
    assert config.search_path({"PATH": "/bin"}) == "/bin" and config.search_path({}) is None
    assert config.store_path({config.ENV_STORE: ""}) is None and config.capture_dir({}) is None


def test_home_is_created_0700_once(tmp_path):
    where = tmp_path / "state" / "tritune"
    home = config.home({config.ENV_HOME: str(where)})
    assert home == where and stat.S_IMODE(where.stat().st_mode) == 0o700
    (where / "kept").write_text("")
    assert config.home({config.ENV_HOME: str(where)}) == where and (where / "kept").exists()


def test_home_defaults_to_dot_tritune_in_the_users_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.home({}) == tmp_path / ".tritune" and (tmp_path / ".tritune").is_dir()


def test_home_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(config.ConfigError, match=r"^TRITUNE_HOME=.*file: exists and is not a directory$"):
        config.home({config.ENV_HOME: str(tmp_path / "file")})
    with pytest.raises(config.ConfigError, match=r"^TRITUNE_HOME=.*file/sub: cannot be created \(Not a directory\)$"):
        config.home({config.ENV_HOME: str(tmp_path / "file" / "sub")})
