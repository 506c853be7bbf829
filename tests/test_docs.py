"""The docs site stays true: it builds strictly, its runnable shell blocks run, the settings
reference matches the schema, and every error message the package raises has a troubleshooting entry.

Runnable blocks: a fenced shell block right after the comment ``<!-- runnable -->`` (optionally
``<!-- runnable judge=openai -->``) in README.md or docs/*.md. It runs from a scratch folder that
links ``examples/``, offline (``MATHJUDGE_DATA_DIR=examples/data``, ``HF_HUB_OFFLINE=1``, a fresh
judge cache); ``lm_eval`` and ``mathjudge`` run in this process (tests/inprocess.py), ``pip
install`` steps are skipped because the suite runs in the installed package.
"""

from __future__ import annotations

import ast
import functools
import glob
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.e2e import TIMEOUT_S

DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md")) + [REPO / "README.md"]
PACKAGE = REPO / "lm_eval_mathjudge"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------ build
@pytest.mark.e2e
def test_mkdocs_builds_strictly(tmp_path):
    if shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert (tmp_path / "site" / "troubleshooting" / "index.html").exists()


def test_no_machine_paths_in_tracked_docs():
    """Examples write into a folder given on the command line; what the docs ship names no local path."""
    pattern = re.compile(r"(?<![\w.])/(home|root|tmp|work|Users|private/var)/[\w.-]+")
    found = []
    for path in [*DOCS.rglob("*"), REPO / "README.md"]:
        if path.is_file() and path.suffix in (".md", ".csv", ".svg", ".html", ".json"):
            found += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in pattern.finditer(path.read_text("utf-8"))]
    found = [f for f in found if "/tmp/fresh" not in f]  # a documented example value, not a machine path
    assert not found, found


def test_readme_is_short_and_opens_with_the_two_commands():
    text = (REPO / "README.md").read_text("utf-8")
    assert len(text.splitlines()) <= 260
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert blocks[0].strip().startswith("pip install . && MATHJUDGE_DATA_DIR=examples/data lm_eval --model mathjudge-replay")
    assert "--tasks gsm8k_gpt4em" in blocks[0] and '"judge_backend": "local"' in blocks[0]
    assert blocks[1].strip() == "pip install -e '.[test]' && python -m pytest -q"


# ------------------------------------------------------------------------------- settings page
def test_the_settings_reference_is_generated_from_the_table():
    page = _load(DOCS / "_tools" / "settings_page.py", "settings_page")
    text = (DOCS / "settings.md").read_text("utf-8")
    assert text == page.render(), "docs/settings.md is out of date: run python docs/_tools/settings_page.py"
    from lm_eval_mathjudge.settings import schema

    assert re.findall(r"^### (\S+)$", text, re.M) == [s.name for s in schema.SETTINGS]  # one block each, in order
    for row in schema.SETTINGS:
        block = text.split(f"\n### {row.name}\n", 1)[1].split("\n#", 1)[0]
        assert all(f"- **{part}:**" in block for part in ("Type", "Default", "Allowed", "Example")), row.name
    # Each layer's spelling is given once, at the top: no setting lists its environment variables or
    # per-judge keys (the one spelled-out example aside), and no table is wider than four columns.
    spelled = [n for s in schema.SETTINGS if s.name != page.EXAMPLE for n in
               (*schema.spellings(s.name, "env"), *schema.spellings(s.name, "metadata")[1:])]
    assert not [n for n in spelled if re.search(rf"\b{n}\b", text)]
    assert all(line.count("|") <= 5 for line in text.splitlines() if line.startswith("|"))


def _accepts(name: str, value) -> bool:
    from lm_eval_mathjudge.core.errors import ConfigError
    from lm_eval_mathjudge.settings import schema
    try:
        if name in schema.FIELDS:
            schema.JudgeSettings(**{name: value})
        else:  # the panel's own options are checked on a panel
            panel = ({"backend": "local"}, {"backend": "openai"}) if name.startswith("panel_") else ()
            schema.RunOptions(**{name: value, "panel": panel})
    except ConfigError:
        return False
    return True


def test_the_ranges_the_reference_prints_are_the_ones_the_schema_enforces():
    from lm_eval_mathjudge.settings import schema
    from lm_eval_mathjudge.settings.kinds import Choice, Real, Whole

    text = (DOCS / "settings.md").read_text("utf-8")
    checked = 0
    for row in schema.SETTINGS:
        kind = row.kind
        assert f"- **Allowed:** {row.allowed_text or kind.allowed()}\n" in text, row.name
        if isinstance(kind, (Whole, Real)) and kind.lo is not None:
            step = 1 if isinstance(kind, Whole) else 1e-6
            assert _accepts(row.name, kind.py(kind.lo)) != getattr(kind, "above", False), (row.name, kind.lo)
            special = [v for v, _ in getattr(kind, "special", ())]  # -1 (dynamic) below a range of 0..
            assert all(_accepts(row.name, v) for v in special), row.name
            assert not _accepts(row.name, kind.py(min([kind.lo, *special])) - step), (row.name, "below the range")
            if kind.hi is not None:
                assert _accepts(row.name, kind.py(kind.hi)) and not _accepts(row.name, kind.py(kind.hi) + step)
            else:
                assert _accepts(row.name, kind.py(10 ** 9)), row.name
            checked += 1
        elif isinstance(kind, Choice):
            assert all(_accepts(row.name, v) for v in kind.values) and not _accepts(row.name, "no-such-value")
            checked += 1
    assert checked >= 19  # every number with a lower limit and every choice of the table (19 since dedupe retired)


@pytest.mark.e2e
def test_the_built_site_shows_the_settings_and_the_quick_start_whole(tmp_path):
    """In a real browser at a desktop width: nothing on the settings page, nor the quick start on the
    home and getting-started pages, scrolls sideways or is cut off, and no name breaks inside a word."""
    check = _load(DOCS / "_tools" / "layout_check.py", "layout_check")
    if check.browser() is None or importlib.util.find_spec("mkdocs") is None:
        pytest.skip("no Chromium to look at the site with (apt-get install chromium), or no mkdocs ('.[docs]')")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    shots = tmp_path / "shots"
    assert check.check(site, ["settings/", "", "getting-started/"], shots=shots) == {
        "settings/": [], "": [], "getting-started/": []}
    png = (shots / "settings.png").read_bytes()  # what the browser drew: a PNG of the window's size
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1280, png[:24]



@pytest.mark.e2e
def test_the_layout_check_sees_what_scrolls_and_what_breaks(tmp_path):
    """The browser check finds the two faults of the old settings table: a box that scrolls sideways,
    and a name broken inside a word (and says nothing of a page without them)."""
    check = _load(DOCS / "_tools" / "layout_check.py", "layout_check")
    if check.browser() is None:
        pytest.skip("no Chromium to look at the site with (apt-get install chromium)")
    for page, body in {"bad": '<pre style="overflow-x:auto;width:300px">lm_eval --model mathjudge-replay '
                              '--metadata \'{"judge_backend": "local", "judge_concurrency": 16}\'</pre>'
                              '<p style="width:60px;word-break:break-all">gpt4em_judge_cache_network_fs</p>',
                       "good": "<p>judge_backend and judge_model</p>"}.items():
        (tmp_path / page).mkdir()
        (tmp_path / page / "index.html").write_text(f"<html><body><article>{body}</article></body></html>")
    found = check.check(tmp_path, ["bad/", "good/"])
    assert found["good/"] == []
    assert [f.split(" ")[0] for f in found["bad/"]][:2] == ["scrolls", "breaks"], found["bad/"]


# ----------------------------------------------------------------------------- runnable blocks
def _runnable_blocks():
    marker = re.compile(r"<!-- runnable( [^>]*)? -->\n+```(?:bash|sh|console)\n(.*?)```", re.S)
    for path in PAGES:
        for i, m in enumerate(marker.finditer(path.read_text("utf-8"))):
            opts = dict(o.split("=", 1) for o in (m.group(1) or "").split())
            yield pytest.param(m.group(2), opts, id=f"{path.relative_to(REPO)}#{i + 1}")


def _logical_lines(block: str) -> list[str]:
    out, current = [], ""
    for raw in block.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip() and not current.strip().startswith("#"):
            out.append(current.strip())
        current = ""
    return out


def _expand(words: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    out = []
    for w in words:
        w = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), w)
        matches = sorted(glob.glob(w, root_dir=cwd)) if any(c in w for c in "*?") else []
        out += matches or [w]
    return out


class _Shell:
    """The few shell forms the docs' runnable blocks use: export, VAR=value prefixes, &&, for ... done."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self.cwd, self.env, self.log = cwd, env, []

    def run_block(self, block: str) -> None:
        lines = _logical_lines(block)
        while lines:
            line = lines.pop(0)
            loop = re.match(r"for (\w+) in (.*?); do$", line)
            if loop:
                body = []
                while (nxt := lines.pop(0)) != "done":
                    body.append(nxt)
                for value in shlex.split(loop.group(2)):
                    self.env[loop.group(1)] = value
                    for command in body:
                        self.run_line(command)
                continue
            self.run_line(line)

    def run_line(self, line: str) -> None:
        for part in line.split(" && "):
            self.run_command(shlex.split(part, comments=True))

    def run_command(self, words: list[str]) -> None:
        from tests.inprocess import run_cli

        if words[:1] == ["export"]:
            for item in words[1:]:
                key, _, value = item.partition("=")
                self.env[key] = _expand([value], self.env, self.cwd)[0]
            return
        local = dict(self.env)
        while words and re.match(r"^\w+=", words[0]):
            key, _, value = words.pop(0).partition("=")
            local[key] = _expand([value], self.env, self.cwd)[0]
        words = _expand(words, local, self.cwd)
        if words[:2] == ["pip", "install"]:
            return  # the suite runs in the installed package
        if words[:3] == ["python", "-m", "lm_eval_mathjudge"]:
            words = ["mathjudge", *words[3:]]
        if words[0] in ("lm_eval", "mathjudge"):
            code, out, err = run_cli(words[0], words[1:], local, cwd=self.cwd)
        else:
            if words[0] == "python":
                words[0] = sys.executable
            done = subprocess.run(words, cwd=self.cwd, env=local, capture_output=True, text=True, timeout=TIMEOUT_S)
            code, out, err = done.returncode, done.stdout, done.stderr
        self.log.append(out + err)
        assert code == 0, f"{' '.join(words)} exited {code}:\n{out[-2000:]}\n{err[-4000:]}"


@pytest.mark.e2e
@pytest.mark.parametrize("block,opts", list(_runnable_blocks()))
def test_runnable_blocks_run_offline(block, opts, tmp_path, request):
    for name in ("examples", "tests", "pyproject.toml"):  # what the blocks name, read-only; outputs stay in tmp_path
        (tmp_path / name).symlink_to(REPO / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MATHJUDGE_", "OPENAI_", "GEMINI_", "GOOGLE_"))}
    env.update({"MATHJUDGE_DATA_DIR": "examples/data", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"), "PATH": os.path.dirname(sys.executable) + os.pathsep
                + os.environ.get("PATH", "")})
    if opts.get("judge") == "openai":
        from tests.loopback.openai_server import ChatCompletionsServer

        # A judge that finds every answer correct: the block shows the wiring, not a score.
        server = ChatCompletionsServer(lambda body: "Error Analysis: the final answer matches.\nFinal Verdict: Correct")
        server.start()
        request.addfinalizer(server.stop)
        env.update({"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-loopback"})
    shell = _Shell(tmp_path, env)
    shell.run_block(block)
    if "expect" in opts:
        assert opts["expect"].replace("_", " ") in " ".join(shell.log).replace("_", " "), shell.log[-1][-2000:]


def test_the_runnable_blocks_include_the_quick_start():
    blocks = [p.values[0] for p in _runnable_blocks()]
    assert any("gpt3_175b_verifier_first100.jsonl" in b and "gsm8k_gpt4em" in b for b in blocks)
    assert len(blocks) >= 4


# ------------------------------------------------------------------------------------- layers
def test_the_development_page_lists_the_layers_in_their_order():
    layers = _load(REPO / "tests" / "test_layers.py", "layers_under_test").LAYERS
    text = (DOCS / "development.md").read_text("utf-8")
    table = text.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    assert re.findall(r"^\| `([\w_]+)` \|", table, re.M) == list(layers)


# ----------------------------------------------------------------------------- troubleshooting
# Errors a user meets as a message (the run or command stops, or refuses to start). Counted
# per-sample failures (JudgeRefusal, MediaError, GenerationFailure, ...) are met as a failure
# kind in the samples and results files: the page lists those by kind.
USER_ERRORS = {"ConfigError", "ReportError", "UnsupportedLmEvalError", "BudgetExceeded", "BatchUnavailable",
               "JudgeRunError", "DryRunDone", "BatchPending", "GenerationRunError", "FatalJudgeError",
               "MissingMatplotlib", "CredentialsError", "DataError"}
SAMPLE_FAILURES = {"JudgeRefusal", "GenerationFailure", "MediaError", "UnsendableRequest"}
# Messages built away from the raise site: where their text comes from (function or constant name).
MESSAGE_SOURCES = {"problem": ("_option_problems", "the settings table"), "hub_failure": ("hub_failure",),
                   "refused_name": ("refused_name",), "PNG_HINT": ("PNG_HINT",), "png_hint": ("png_hint",),
                   "failure_message": ("failure_message",)}
# Sites that raise again, with more context, a message raised (and listed) elsewhere.
REWRAPPED = {
    "f'{text} {saved()}'.rstrip()",  # judging/schedule.py: the batch runner's BatchPending, plus the saved generations
    "'; '.join((str(exc) for exc in pending))",  # judging/panel.py: the members' own BatchPending messages
    "f'{what} {path}: {exc.strerror}'",  # reports/runs.py: a file the system cannot open (its own reason)
}


def _text(node) -> str | None:
    """The fixed text of a message expression, with {} where a value goes; None when it has none."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left, right = _text(node.left), _text(node.right) if isinstance(node.op, ast.Add) else ""
        return None if left is None and right is None else (left or "{}") + (right or "{}")
    if isinstance(node, ast.Call) and node.args and not isinstance(node.func, ast.Name):
        return _text(node.args[0])  # redact(f"..."), "...".format(...)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "redact" and node.args:
        return _text(node.args[0])
    return None


def _name_of(node) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    return target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None


def _table_messages() -> list[str]:
    """What each row of the settings table says about a value outside what it allows (the rows build
    their messages from their kinds' templates, so ask them, with one wrong value of each sort)."""
    from lm_eval_mathjudge.settings import kinds, schema

    def wrong(kind) -> list:
        if isinstance(kind, (kinds.Whole, kinds.Real)):
            ends = [kind.lo - 1 if kind.lo is not None else None, kind.hi + 1 if kind.hi is not None else None]
            return [kind.py(v) for v in ends if v is not None] + ([float("nan")] if kind.py is float else [])
        return {kinds.Choice: ["no-such-value"], kinds.Text: ["  "], kinds.Url: ["ftp://example.org"],
                kinds.Counts: [(0,)], kinds.Members: [({},) * 10]}.get(type(kind), [])

    said = [row.problem(value) for row in schema.SETTINGS for value in wrong(row.kind)]
    return [text for text in said if text is not None]


@functools.lru_cache(maxsize=1)
def _message_sites():
    """(where, error class, fixed text) of every user-facing message in the package."""
    trees = {p: ast.parse(p.read_text("utf-8")) for p in sorted(PACKAGE.rglob("*.py"))}
    sources: dict[str, list[str]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, (ast.Yield, ast.Return)) and sub.value is not None:
                        if (t := _text(sub.value)) is not None:
                            sources.setdefault(node.name, []).append(t)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if (t := _text(node.value)) is not None:
                    sources.setdefault(node.targets[0].id, []).append(t)
    sources["the settings table"] = _table_messages()
    sites, unresolved = [], []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _name_of(node) in USER_ERRORS and node.args):
                continue
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            text = _text(node.args[0])
            if text is not None and text.strip("{} ().:"):
                sites.append((where, _name_of(node), text))
                continue
            if ast.unparse(node.args[0]) in REWRAPPED:
                continue
            names = [_name_of(n) for n in ast.walk(node.args[0]) if isinstance(n, (ast.Call, ast.Name, ast.Attribute))]
            key = next((n for n in names if n in MESSAGE_SOURCES), None)
            if key in MESSAGE_SOURCES:
                sites += [(where, _name_of(node), t) for f in MESSAGE_SOURCES[key] for t in sources.get(f, ())]
            elif text is None or not text.strip("{} ().:"):
                unresolved.append(f"{where}: {ast.unparse(node.args[0])[:80]}")
    return sites, unresolved


def test_every_error_class_of_ours_is_a_user_error_or_a_sample_failure():
    """A new error type must be sorted here, so its messages are held to a troubleshooting row."""
    import inspect as inspect_module

    from lm_eval_mathjudge.core import errors

    ours = {name for name, obj in vars(errors).items()
            if inspect_module.isclass(obj) and issubclass(obj, errors.MathJudgeError) and obj.__module__ == errors.__name__}
    internal = {"MathJudgeError", "JudgeCallError", "TransientJudgeError", "UnparseableReply"}  # bases, retried or counted
    assert not ours - USER_ERRORS - SAMPLE_FAILURES - internal, sorted(ours - USER_ERRORS - SAMPLE_FAILURES - internal)


def _page_phrases() -> list[str]:
    """Each entry of the troubleshooting page: a table row whose first cell opens with its key phrase."""
    text = (DOCS / "troubleshooting.md").read_text("utf-8")
    return re.findall(r"^\| `([^`]+)`", text, re.M)


def test_every_troubleshooting_entry_is_a_message_the_code_raises():
    sites, _ = _message_sites()
    texts = [t for _, _, t in sites]
    phrases = _page_phrases()
    assert len(phrases) >= 60
    assert len(phrases) == len(set(phrases)), "two entries share a key phrase"
    kinds = _failure_kinds()  # parses the package: once, not once per phrase
    stale = [p for p in phrases if not any(p in t for t in texts) and p not in kinds]
    assert not stale, f"troubleshooting entries whose key phrase no message contains: {stale}"


def test_every_message_the_code_raises_has_a_troubleshooting_entry():
    sites, unresolved = _message_sites()
    assert not unresolved, ("messages the docs test cannot read (add their source to MESSAGE_SOURCES):\n"
                            + "\n".join(unresolved))
    assert len(sites) >= 150
    phrases = _page_phrases()
    missing = [f"{where} {kind}: {text[:120]}" for where, kind, text in sites if not any(p in text for p in phrases)]
    assert not missing, ("add an entry to docs/troubleshooting.md (a row starting with a key phrase from the "
                         "message's fixed text) for:\n" + "\n".join(missing))


def _failure_kinds() -> set[str]:
    """Kinds a sample can fail with: kind= of the per-sample failures, their classes' own kind,
    failure= of an Outcome, and the named kind constants (BAD_MEDIA, the panel's QUORUM and TIE, the re-check's CAUGHT)."""
    kinds = set()
    constants = {"BAD_MEDIA", "QUORUM", "TIE", "CAUGHT"}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call) and _name_of(node) in SAMPLE_FAILURES | {"Outcome"}:
                kinds |= {k.value.value for k in node.keywords if k.arg in ("kind", "failure")
                          and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
            elif isinstance(node, ast.ClassDef) and node.name in SAMPLE_FAILURES | {"UnparseableReply"}:
                kinds |= {s.value.value for s in node.body if isinstance(s, ast.Assign)
                          and [getattr(x, "id", "") for x in s.targets] == ["kind"] and isinstance(s.value, ast.Constant)}
            elif isinstance(node, ast.Assign) and [getattr(x, "id", "") for x in node.targets][:1] in ([c] for c in constants):
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    kinds.add(node.value.value)
    return kinds


def test_every_counted_failure_kind_has_an_entry():
    kinds = _failure_kinds()
    assert {"max_tokens", "media", "bad_media", "unparseable", "panel_tie", "content_policy"} <= kinds
    phrases = set(_page_phrases())
    assert not kinds - phrases, f"failure kinds without a troubleshooting row: {sorted(kinds - phrases)}"
