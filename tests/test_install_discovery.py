"""Task discovery after a real install, in fresh virtualenvs, for both install modes.

Each venv gets this project installed by pip (wheel or editable) and borrows
the already-installed dependencies through a path file, so no download is
needed. Then the plain ``lm_eval`` console script must find gsm8k_gpt4em. The two installs
run side by side (tests/e2e.py Scenarios); each test checks its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.e2e import TIMEOUT_S, run_together

pytestmark = pytest.mark.e2e

TASK = "gsm8k_gpt4em"


def _make_venv(root: Path, mode: str) -> Path:
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    # Dependencies come from the test environment (lm_eval, openai, ...), not from the network.
    (site / "_borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    target = ["-e", str(REPO)] if mode == "editable" else [str(REPO)]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                    "--no-build-isolation", "-q", *target], check=True, capture_output=True, text=True)
    assert (site / "lm_eval_mathjudge_startup.pth").is_file()
    _copy_console_script("lm_eval", root / "bin")
    return root / "bin"


def _copy_console_script(name: str, bin_dir: Path) -> None:
    """lm-eval's own console script, re-pointed at the fresh interpreter (pip would write the same)."""
    source = Path(sys.executable).with_name(name).read_text().splitlines()
    script = bin_dir / name
    script.write_text("\n".join([f"#!{bin_dir / 'python'}", *source[1:]]) + "\n")
    script.chmod(0o755)


def _run(bin_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "MATHJUDGE_NO_AUTOLOAD"}
    full_env.update({"HF_HUB_OFFLINE": "1", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env})
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], capture_output=True, text=True,
                          env=full_env, cwd=bin_dir.parent, timeout=TIMEOUT_S)


def _wheel_install(tmp_path):
    bin_dir = _make_venv(tmp_path / "venv", "wheel")
    listed = _run(bin_dir, "lm_eval", "ls", "tasks")
    assert listed.returncode == 0, listed.stderr[-2000:]
    row = next(line for line in listed.stdout.splitlines() if f"|{TASK} " in line)
    assert "site-packages/lm_eval_mathjudge/task_configs" in row  # the copy inside the wheel

    python = bin_dir / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "uninstall", "-y", "-q",
                    "lm-eval-mathjudge"], check=True, capture_output=True)
    leftovers = list((tmp_path / "venv").rglob("lm_eval_mathjudge_startup.pth"))
    assert leftovers == []


@pytest.mark.e2e_versions
def test_wheel_install_lists_the_task_and_uninstall_removes_the_hook(scenario):
    scenario()


def _editable_install(tmp_path):
    bin_dir = _make_venv(tmp_path / "venv", "editable")
    tasks_dir = _run(bin_dir, "python", "-m", "lm_eval_mathjudge", "tasks-dir").stdout.strip()
    assert Path(tasks_dir) == REPO / "task_configs"  # editable: the live source folder
    # Three independent lm_eval commands (each indexes lm-eval's task folder), side by side.
    found, hidden, explicit = run_together(
        lambda: _run(bin_dir, "lm_eval", "validate", "--tasks", TASK),
        # Absence is checked with `ls tasks`: lm-eval 0.5.0.dev1's `validate` accepts any task name.
        lambda: _run(bin_dir, "lm_eval", "ls", "tasks", MATHJUDGE_NO_AUTOLOAD="1"),
        lambda: _run(bin_dir, "lm_eval", "ls", "tasks", "--include_path", tasks_dir, MATHJUDGE_NO_AUTOLOAD="1"))
    assert found.returncode == 0, found.stderr[-2000:]
    assert "All tasks found and valid" in found.stdout + found.stderr

    assert hidden.returncode == 0, hidden.stderr[-2000:]
    assert f"|{TASK} " not in hidden.stdout

    assert explicit.returncode == 0, explicit.stderr[-2000:]
    assert f"|{TASK} " in explicit.stdout


@pytest.mark.e2e_versions
def test_editable_install_validates_with_opt_out_and_include_path_fallback(scenario):
    scenario()


@pytest.mark.parametrize("broken", ["missing package", "exploding hook"])
def test_a_broken_hook_never_breaks_the_interpreter(tmp_path, broken):
    """The .pth line swallows every error: a half-removed install must not break python."""
    site = tmp_path / "site"
    site.mkdir()
    pth_line = (REPO / "lm_eval_mathjudge_startup.pth").read_text()
    (site / "x.pth").write_text(pth_line)
    if broken == "exploding hook":
        pkg = site / "lm_eval_mathjudge"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "_startup.py").write_text("raise RuntimeError('boom')\n")
    code = f"import site; site.addsitedir({str(site)!r}); print('alive')"
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "alive" and proc.stderr == ""


SCENARIOS = {"test_wheel_install_lists_the_task_and_uninstall_removes_the_hook": _wheel_install,
             "test_editable_install_validates_with_opt_out_and_include_path_fallback": _editable_install}
