"""``mathjudge cache --merge A B ... [--into C]``: fold judge caches (one per host or job) into one.

On a cluster each host keeps its own cache (SQLite cannot be shared between hosts: ``core/mounts``);
merging them lets a rerun anywhere pay nothing twice. Rules:

* the sources are never changed: each is copied (with its write-ahead log, which may hold the newest
  replies) to a temporary folder and read from the copy, so a read-only, network or damaged file works;
* a key already in the target keeps its reply; among the sources the first one listed wins. Replies
  for one key differ only if the judge answered twice differently; they are counted, never mixed;
* every row is checked (key, text, usage, judge, time) before it is stored; a row that fails is
  skipped and counted. A damaged source gives what can still be read, with a message saying so;
* bounded: rows are read and stored in batches of ``BATCH_ROWS``, one transaction each, so an
  interrupted merge keeps what it stored and a rerun adds only the rest.

Exit code 0 when every source was read whole, 1 when something was skipped (the message says what).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..core import jsontext

BATCH_ROWS = 500
MAX_TEXT_CHARS = 16_000_000  # a reply longer than any judge's output limit is not a reply
MAX_FIELD_CHARS = 100_000  # usage JSON, judge label, finish reason
MAX_DAMAGED_BATCHES = 1000  # a source whose table keeps failing is given up after this many bad batches
_KEY = re.compile(r"[0-9a-f]{64}")


def add_arguments(parser) -> None:
    """The ``--merge``/``--into`` options of ``mathjudge cache``."""
    parser.add_argument("--merge", nargs="+", metavar="CACHE",
                        help="fold these judge caches (folders or judge_cache.sqlite3 files) into one; "
                             "they are only read")
    parser.add_argument("--into", metavar="FOLDER",
                        help="the cache folder --merge writes to (created if missing; default: the cache the "
                             "tasks use on this host)")


def run(args, out: Callable[[str], None] = print) -> int:
    """``mathjudge cache --merge ...``: the exit code."""
    from ..core.errors import ConfigError
    from .cache import ReplyCache

    if args.into:
        target = os.path.abspath(args.into)
        policy = "allow"  # named: used as it is (this command is its one writer now)
    else:
        from ..settings.layers import resolve_settings

        settings = resolve_settings("exact_match", None, None)
        target = os.path.abspath(getattr(args, "cache_dir", None) or settings.resolved_cache_dir())
        policy = settings.cache_network_fs  # as the runs on this host would place it
    try:
        cache = ReplyCache(target, policy)
    except ConfigError as exc:
        out(f"error: {exc}")
        return 2
    try:
        problems = merge(args.merge, cache, out)
    except (sqlite3.Error, OSError) as exc:
        out(f"error: the target {cache.path} refused a write ({exc}). What was merged before is kept; free "
            "space there (or choose another --into) and run the same command again: it adds only the rest")
        return 2
    finally:
        cache.close()
    return 1 if problems else 0


@dataclass
class SourceReport:
    path: str
    read: int = 0  # rows read and checked
    added: int = 0  # new in the target
    known: int = 0  # the target already had the key
    differing: int = 0  # ... with another reply text (the target's kept)
    invalid: int = 0  # rows that failed the checks (skipped)
    problem: str | None = None  # why the source was not read whole

    def line(self) -> str:
        text = (f"{self.path}: {self.read} replies read, {self.added} added, {self.known} already there"
                + (f" ({self.differing} with a different reply; the one already there is kept)" if self.differing
                   else ""))
        if self.invalid:
            text += f"; {self.invalid} rows failed their checks and were skipped"
        if self.problem:
            text += f". NOT READ WHOLE: {self.problem}"
        return text


def merge(sources: list[str], cache, out: Callable[[str], None] = print) -> int:
    """Fold ``sources`` into ``cache`` (a ReplyCache); prints one line per source; the number of problems."""
    problems = 0
    for source in sources:
        report = _merge_one(source, cache)
        out(report.line())
        problems += bool(report.problem or report.invalid)
    out(f"{cache.path}: {len(cache)} judge replies")
    return problems


def _merge_one(source: str, cache) -> SourceReport:
    from .cache import FILE_NAME

    path = os.path.abspath(os.path.join(source, FILE_NAME) if os.path.isdir(source) else source)
    report = SourceReport(path)
    if not os.path.isfile(path):
        report.problem = "no judge cache there (give a cache folder or its judge_cache.sqlite3 file)"
        return report
    if os.path.exists(cache.path) and os.path.samefile(path, cache.path):
        report.problem = "it is the target itself; nothing to do"
        return report
    with tempfile.TemporaryDirectory(prefix="mathjudge-merge-") as scratch:
        copy = os.path.join(scratch, FILE_NAME)
        try:
            shutil.copyfile(path, copy)
            if os.path.exists(path + "-wal"):  # replies not yet folded into the main file
                shutil.copyfile(path + "-wal", copy + "-wal")
        except OSError as exc:
            report.problem = f"it cannot be read ({exc})"
            return report
        try:
            db = sqlite3.connect(copy, isolation_level=None)
        except sqlite3.Error as exc:
            report.problem = f"it cannot be opened ({exc})"
            return report
        try:
            _fold(db, cache, report)
        finally:
            db.close()
    return report


def _fold(db: sqlite3.Connection, cache, report: SourceReport) -> None:
    try:
        status = str(db.execute("PRAGMA quick_check").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        status = str(exc)
    if status != "ok":
        report.problem = (f"it is damaged (PRAGMA quick_check: {' '.join(status.split())[:200]}); the replies that could "
                          "still be read were merged, and the file is left as it is")
    try:
        db.execute("SELECT 1 FROM replies LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc) or "no such table" in str(exc):
            report.problem = (f"it is not a readable judge cache ({exc}); nothing was merged from it, and the "
                              "file is left as it is")
            return
    batch: list[tuple] = []
    for row in _rows(db, report):
        checked = _checked(row)
        if checked is None:
            report.invalid += 1
            continue
        report.read += 1
        batch.append(checked)
        if len(batch) >= BATCH_ROWS:
            _store(cache, batch, report)
            batch = []
    if batch:
        _store(cache, batch, report)


def _store(cache, batch: list[tuple], report: SourceReport) -> None:
    added, differing = cache.add_replies(batch)  # a full disk raises: the merge stops, what is stored stays
    report.added += added
    report.known += len(batch) - added
    report.differing += differing


_SELECT = ("SELECT r.rowid, r.key, r.text, r.usage, r.finish_reason, r.judge, r.created, {snapshots} "
           "FROM replies AS r{join}")


def _rows(db: sqlite3.Connection, report: SourceReport) -> Iterator[tuple]:
    """Every readable row by rowid; a batch that fails is read row by row, and damage is noted."""
    try:
        end = db.execute("SELECT max(rowid) FROM replies").fetchone()[0] or 0
    except sqlite3.DatabaseError:
        end = None  # unknown: read until a batch fails
    from .cache import snapshot_sql

    try:  # snapshots in reply_meta, in replies itself (the eight-column files), or none (the first versions)
        snapshots, join = snapshot_sql(db)
    except sqlite3.DatabaseError:
        snapshots, join = "NULL, NULL", ""
    select = _SELECT.format(snapshots=snapshots, join=join)
    last, damaged, unreadable = 0, 0, 0
    while end is None or last < end:
        try:
            rows = db.execute(f"{select} WHERE r.rowid > ? ORDER BY r.rowid LIMIT ?", (last, BATCH_ROWS)).fetchall()
        except sqlite3.DatabaseError as exc:
            damaged += 1
            if end is None or damaged > MAX_DAMAGED_BATCHES:
                _note(report, f"reading stopped at damage after row {last} ({exc})")
                return
            upper = min(last + BATCH_ROWS, end)
            for rowid in range(last + 1, upper + 1):  # one by one, past the damaged part
                try:
                    row = db.execute(f"{select} WHERE r.rowid = ?", (rowid,)).fetchone()
                except sqlite3.DatabaseError:
                    unreadable += 1
                    continue
                if row is not None:
                    yield row[1:]
            last = upper
            continue
        if not rows:
            break
        for row in rows:
            yield row[1:]
        last = rows[-1][0]
    if unreadable:
        _note(report, f"{unreadable} rows in damaged pages could not be read")


def _note(report: SourceReport, text: str) -> None:
    report.problem = f"{report.problem}; {text}" if report.problem else f"it is damaged: {text}"


def _checked(row: tuple) -> tuple | None:
    """The row as stored, or None when it is not a judge reply this package wrote."""
    key, text, usage, finish_reason, judge, created, model, fingerprint = row
    if not (isinstance(key, str) and _KEY.fullmatch(key)):
        return None
    if not (isinstance(text, str) and len(text) <= MAX_TEXT_CHARS):
        return None
    if not (isinstance(judge, str) and 0 < len(judge) <= MAX_FIELD_CHARS):
        return None
    if finish_reason is not None and not (isinstance(finish_reason, str) and len(finish_reason) <= MAX_FIELD_CHARS):
        return None
    if isinstance(created, bool) or not isinstance(created, (int, float)) or not math.isfinite(created):
        return None
    if not (isinstance(usage, str) and len(usage) <= MAX_FIELD_CHARS and _is_object(usage)):
        return None
    for name in (model, fingerprint):
        if name is not None and not (isinstance(name, str) and len(name) <= MAX_FIELD_CHARS):
            return None
    return key, text, usage, finish_reason, judge, float(created), model, fingerprint


def _is_object(text: str) -> Any:
    try:
        return isinstance(jsontext.loads(text), dict)
    except ValueError:
        return False
