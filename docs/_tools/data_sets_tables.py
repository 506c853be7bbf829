"""Write the docs' data-set tables from the data-set registry (``lm_eval_mathjudge.core.data_sets``).

Each table sits between two markers, ``<!-- data-sets:KIND -->`` and ``<!-- /data-sets:KIND -->``,
in the files of ``PLACES``; everything else in those files is left as it is. ``tests/test_docs.py``
fails when a committed table differs from what this script writes.

    python docs/_tools/data_sets_tables.py            # rewrite the tables
    python docs/_tools/data_sets_tables.py --check    # exit 1 if one is out of date
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from lm_eval_mathjudge.core.data_sets import BUILT_IN, DataSet, answer_only  # noqa: E402

FAMILIES = ("gpt4em", "vlmjudge")


def _hub(entry: DataSet) -> str:
    parts = [entry.hub_id, entry.hub_config, entry.split]
    return ", ".join(f"`{p}`" for p in parts if p) + f" ({entry.rows:,})"


def _judge_sees(entry: DataSet) -> str:
    return entry.judge_sees if entry.has_solution else f'**answer only**: "{answer_only("N")}"'


def tasks_table() -> str:
    rows = ["| data set | hub id, config, split (rows) | GPT4-EM task | VLM-judge task "
            "| ground truth given to the judge | `max_gen_toks` |", "|---|---|---|---|---|---:|"]
    rows += [f"| {e.title} | {_hub(e)} | " + " | ".join(f"`{e.name}_{f}`" for f in FAMILIES)
             + f" | {_judge_sees(e)} | {e.max_gen_toks:,} |" for e in BUILT_IN]
    return "\n".join(rows)


def _fields(entry: DataSet) -> str:
    fields = [f"`{entry.question}`"]
    if entry.solution and entry.solution != entry.answer:
        fields.append(f"`{entry.solution}`")
    read_from = " (the worked solution; the gold answer is read from it)" if entry.solution == entry.answer else ""
    return ", ".join(fields + [f"`{entry.answer}`{read_from}"])


def files_table() -> str:
    rows = ["| folder | fields used | licence |", "|---|---|---|"]
    rows += [f"| `{e.local_name}` | {_fields(e)} | {e.licence} |" for e in BUILT_IN]
    return "\n".join(rows)


TABLES = {"tasks": tasks_table, "files": files_table}
PLACES = {"README.md": ("tasks",), "docs/tasks.md": ("tasks",), "docs/offline-data.md": ("files",)}


def rewritten(text: str, kind: str) -> str:
    pattern = re.compile(rf"(<!-- data-sets:{kind} -->\n).*?(\n<!-- /data-sets:{kind} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"no <!-- data-sets:{kind} --> ... <!-- /data-sets:{kind} --> markers")
    return pattern.sub(lambda m: m.group(1) + TABLES[kind]() + m.group(2), text)


def updated(name: str) -> tuple[str, str]:
    """(the file's text, the text with its tables written from the registry)."""
    text = (REPO / name).read_text(encoding="utf-8")
    new = text
    for kind in PLACES[name]:
        new = rewritten(new, kind)
    return text, new


def stale() -> list[str]:
    """The files whose tables differ from the registry (rewrites none)."""
    return [name for name in PLACES if len(set(updated(name))) > 1]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        late = stale()
        for name in late:
            print(f"{name} is out of date: run python docs/_tools/data_sets_tables.py")
        return 1 if late else 0
    for name in PLACES:
        (REPO / name).write_text(updated(name)[1], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
