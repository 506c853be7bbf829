"""The start-up hook stays out of everyone else's way.

Every Python process of the environment runs the ``.pth`` line, so: it imports one tiny module and
nothing else (and not even that with the opt-out set), it hands module lookups on to the finders after
it (a second plugin built the same way keeps its extension, whichever comes first), a
``TaskManager(include_defaults=False, include_path=X)`` gets exactly X, and nothing of lm-eval is
patched that lm-eval already offers (the model name comes from ``model=``). Each check runs in a fresh
interpreter that processes the real ``.pth`` line through ``site``, as an installed plugin's would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.e2e  # fresh interpreters

PTH = (REPO / "lm_eval_mathjudge_startup.pth").read_text()


def _python(code: str, tmp_path: Path, *, pth: bool = True, extra_pth: str = "", **env: str) -> dict:
    """Run ``code`` after ``site`` has processed a folder holding the plugin's .pth line (and ``extra_pth``);
    return the JSON the code prints last."""
    site_dir = tmp_path / "site"
    site_dir.mkdir(exist_ok=True)
    if pth:
        (site_dir / "lm_eval_mathjudge_startup.pth").write_text(PTH)
    if extra_pth:
        (site_dir / "another_plugin.pth").write_text(extra_pth)
    boot = f"import site; site.addsitedir({str(site_dir)!r})\n"
    full_env = {k: v for k, v in os.environ.items() if k not in ("MATHJUDGE_NO_AUTOLOAD", "PYTHONPATH")}
    # -S: no site-packages .pth runs but the ones given here; the installed packages come by PYTHONPATH.
    path = os.pathsep.join([str(site_dir), str(REPO), sysconfig.get_paths()["purelib"]])
    full_env.update({"PYTHONPATH": path, "HF_HUB_OFFLINE": "1", **env})
    proc = subprocess.run([sys.executable, "-S", "-c", boot + code], capture_output=True, text=True,
                          env=full_env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_MODULES = "import json, sys; print(json.dumps(sorted(m for m in sys.modules if 'mathjudge' in m)))"


def test_a_python_start_imports_one_tiny_module_and_none_with_the_opt_out(tmp_path):
    assert _python(_MODULES, tmp_path) == ["lm_eval_mathjudge_hook"]
    assert _python(_MODULES, tmp_path, MATHJUDGE_NO_AUTOLOAD="1") == []


def test_include_defaults_false_lists_only_the_folder_it_names(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "mine.yaml").write_text("task: my_only_task\ndataset_path: json\noutput_type: generate_until\n"
                                      "doc_to_text: q\ndoc_to_target: a\n")
    code = ("import json\nfrom lm_eval.tasks import TaskManager\n"
            f"only = TaskManager(include_defaults=False, include_path={str(folder)!r}).all_tasks\n"
            "usual = TaskManager(include_path=" + repr(str(folder)) + ").all_tasks\n"
            "print(json.dumps([sorted(only), 'gsm8k_gpt4em' in usual, 'my_only_task' in usual]))")
    assert _python(code, tmp_path) == [["my_only_task"], True, True]


# Another plugin that extends lm_eval.models with the same technique (a meta path finder put first, which
# asks the finders after it). Its .pth sorts before ours, so site runs it first and ours ends up in front;
# the test also puts theirs in front. Both extensions must be there either way.
_OTHER_PLUGIN = (
    "import sys\n"
    "class OtherFinder:\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name != 'lm_eval.models' or getattr(self, 'busy', False): return None\n"
    "        self.busy = True\n"
    "        try:\n"
    "            rest = sys.meta_path[sys.meta_path.index(self) + 1:]\n"
    "            spec = next((s for s in (f.find_spec(name, path, target) for f in rest if hasattr(f, 'find_spec'))"
    " if s is not None), None)\n"
    "        finally: self.busy = False\n"
    "        if spec is None: return None\n"
    "        inner = spec.loader\n"
    "        class Loader:\n"
    "            def create_module(self, spec): return inner.create_module(spec)\n"
    "            def exec_module(self, module):\n"
    "                inner.exec_module(module); module.OTHER_PLUGIN_WAS_HERE = True\n"
    "        spec.loader = Loader()\n"
    "        return spec\n"
    "sys.meta_path.insert(0, OtherFinder())\n")


@pytest.mark.parametrize("order", ["ours first", "theirs first"])
def test_a_second_plugin_with_the_same_technique_keeps_its_extension_and_ours(tmp_path, order):
    other = tmp_path / "other_plugin_mod.py"
    other.write_text(_OTHER_PLUGIN)
    line = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import other_plugin_mod\n"
    code = ("import json, sys\n"
            + ("import other_plugin_mod as o; theirs = next(f for f in sys.meta_path if isinstance(f, o.OtherFinder)); "
               "sys.meta_path.remove(theirs); sys.meta_path.insert(0, theirs)\n" if order == "theirs first" else "")
            + "import lm_eval.models as m\nfrom lm_eval.api.registry import model_registry\n"
            "print(json.dumps([getattr(m, 'OTHER_PLUGIN_WAS_HERE', False), 'mathjudge-replay' in model_registry]))")
    assert _python(code, tmp_path, extra_pth=line) == [True, True]


def test_nothing_lm_eval_offers_is_patched(tmp_path):
    code = ("import json\nimport lm_eval.loggers.evaluation_tracker as t, lm_eval.tasks.manager as tm\n"
            "print(json.dumps([hasattr(t.GeneralConfigTracker.log_experiment_args, '__wrapped__'),"
            " hasattr(tm.TaskManager.__init__, '__wrapped__')]))")
    # the tracker is lm-eval's own; TaskManager is the one thing extended (no task entry points in 0.4.13)
    assert _python(code, tmp_path) == [False, True]


def test_the_entry_points_name_what_the_hook_registers():
    """pyproject's lm_eval.models / lm_eval.tasks entry points (for lm-eval's own plugin discovery) and the
    names the hook registers today are one list."""
    from lm_eval_mathjudge import _startup
    from lm_eval_mathjudge.generators import ADAPTERS

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared["lm_eval.models"] == {_startup.REPLAY_MODEL: "lm_eval_mathjudge.harness.replay:ReplayLM",
                                          **ADAPTERS}
    [target] = declared["lm_eval.tasks"].values()
    module, name = target.split(":")
    assert getattr(__import__(module, fromlist=[name]), name)() == _startup.tasks_dir()
