"""Benchmark of a VLM-judge run: lm_eval + google-genai SDK + a slow loopback Gemini.

Six runs of the real ``lm_eval`` CLI (subprocesses), task gsm8k_vlmjudge on the
first N GSM8K test docs, replaying recorded "generations" of three kinds
(``--model mathjudge-replay``), all judged through the real google-genai SDK by
one loopback ``GeminiServer`` (``tests/loopback``) that lives in this process
and answers every HTTP request (generateContent and each File API request)
after a fixed synthetic latency (default 0.5 s: Gemini 2.5 Pro is slow):

  text     the real GPT-3 175B outputs of <data-dir>/gsm8k_outputs/gpt3_175b_verifier_first100.jsonl
  images   one generated PNG per question (a flat colour per doc, so every file hashes differently)
  videos   one generated MP4 per question: small ones travel inline, --large-videos of them are
           larger than the backend's 15 MB inline limit and go through the File API
           (resumable upload, GET until ACTIVE, generateContent by URI, DELETE)

Each kind runs cold (empty MATHJUDGE_CACHE_DIR) and warm (the same command and
cache dir again: it must send the judge nothing at all). Per run: lm_eval wall
time, the judge stage as the server saw it (first request received -> last
reply sent), generateContent calls, File API uploads / state polls / deletes
(every upload must be deleted), peak requests in flight, and final_correct /
judge_failed from the results JSON. Also the serial lower bound N x latency and
the speed-up of the concurrent judge stage over it. Exit status 1 when a check
fails.

    python bench/vlm_judge.py [--n 60] [--latency 0.5] [--concurrency 16] [--out bench/out/vlm]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from _common import (REPO, GSM8K_TEST, add_common_arguments, base_env, check_common_arguments, finish, fmt,
                     gold_of, judge_run_stats, last_line_has, machine, metric_of, now, read_jsonl, read_results,
                     read_samples, run_replay)
from lm_eval_mathjudge.core.data_sets import gsm8k_answer
from lm_eval_mathjudge.backends.gemini.files import FILE_POLL_SECONDS, INLINE_MAX_BYTES
from tests import media_fixtures
from tests.loopback import GeminiServer

TASK = "gsm8k_vlmjudge"
METRICS = ("final_correct", "intermediate_correct", "action_reflection", "judge_failed")
KINDS = ("text", "images", "videos")
ENV_STRIP = ("MATHJUDGE_", "GEMINI_", "GOOGLE_")  # inherited variables removed from every run
GEMINI_KEY = "bench-dummy-gemini-key"  # the loopback server checks no key; the SDK wants one
MB = 1024 ** 2

_REFERENCE = re.compile(r"### Official solution\n(?P<reference>.*?)\n\n### How to read", re.S)
_RECHECK = re.compile(r"\b(check|verify|wait|actually|let me re)", re.I)
_MEDIA_KEYS = {"inlineData": "inline", "inline_data": "inline", "fileData": "file", "file_data": "file"}


# --------------------------------------------------------------------------- judge server
class VlmResponder:
    """A deterministic stand-in for Gemini 2.5 Pro replying in the protocol's four lines.

    Text: FINAL_CORRECT (and INTERMEDIATE_CORRECT) is 1 iff the gold answer of the
    official solution appears in the output's last line; ACTION_REFLECTION is 1 iff
    the output re-checks itself. Media: 1, 1, 0, when an image or video part arrived.
    Counts what each generateContent call carried (text, inline image, inline video, file).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.carried: Counter = Counter()

    def reset(self) -> None:
        with self._lock:
            self.carried = Counter()

    def __call__(self, body: dict) -> str:
        parts = body["contents"][0]["parts"]
        match = _REFERENCE.search(parts[0].get("text", ""))
        gold = gold_of(match["reference"]) if match else ""
        media = [(how, part[key].get("mimeType") or part[key].get("mime_type") or "?")
                 for part in parts[1:] for key, how in _MEDIA_KEYS.items() if key in part]
        if media:
            how, mime = media[0]
            carried = f"{how} {mime}" if how == "inline" else f"file {mime}"
            flags = (1, 1, 0)
            why = (f"Intermediate: the {mime.split('/')[0]} ({'inline' if how == 'inline' else 'File API'}) shows "
                   f"the same steps as the official solution. Final: it ends with {gold or 'the official answer'}, "
                   f"which matches. Reflection: the work is never revisited.")
        else:
            output = parts[1].get("text", "") if len(parts) > 1 else ""
            same, said = last_line_has(gold, output)
            carried = "text" if len(parts) > 1 else "nothing"
            flags = (int(same), int(same), int(bool(_RECHECK.search(output))))
            why = (f"Intermediate: the steps {'agree' if same else 'do not agree'} with the official solution. "
                   f"Final: the last line is '{said}' and the official answer is {gold or '?'}, so they "
                   f"{'match' if same else 'do not match'}. Reflection: "
                   f"{'the solution checks its work' if flags[2] else 'there is no checking or second attempt'}.")
        with self._lock:
            self.carried[carried] += 1
        return (f"INTERMEDIATE_CORRECT: {flags[0]}\nFINAL_CORRECT: {flags[1]}\n"
                f"ACTION_REFLECTION: {flags[2]}\nEXPLANATION: {why}")


class TimedGeminiServer(GeminiServer):
    """GeminiServer that also records when each reply leaves (route runs after the latency sleep)."""

    def _clear(self) -> None:
        super()._clear()
        self.replies: list[tuple[float, str, str]] = []  # (time, method, path)

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes):
        reply = super().route(method, path, headers, raw)
        with self._lock:
            self.replies.append((time.time(), method, urlsplit(path).path))
        return reply


# --------------------------------------------------------------------------- generated outputs
def write_media_replays(folder: Path, docs: list[dict], large: set[int], large_bytes: int,
                        small_bytes: int) -> dict[str, Path]:
    """Replay files whose responses are paths of generated PNGs (images) and MP4s (videos)."""
    replays = {}
    for kind in ("images", "videos"):
        media_dir = folder / kind
        media_dir.mkdir(parents=True)
        rows = []
        for i, doc in enumerate(docs):
            if kind == "images":  # one colour per doc
                path = media_dir / f"q{i:03d}.png"
                blob = media_fixtures.png(64, 64, rgb=(i % 256, 255 - i % 256, 7 * i % 256))
            else:  # payload sizes differ per doc, so every file hashes differently
                path = media_dir / f"q{i:03d}.mp4"
                blob = media_fixtures.mp4((large_bytes if i in large else small_bytes) + i)
            path.write_bytes(blob)
            rows.append(json.dumps({"doc_id": i, "question": doc["question"], "response": str(path)}))
        replays[kind] = folder / f"{kind}.jsonl"
        replays[kind].write_text("\n".join(rows) + "\n", encoding="utf-8")
    return replays


def large_indices(n: int, count: int) -> set[int]:
    """count doc indices spread evenly over 0..n-1 (e.g. 10, 30, 50 of 60)."""
    count = min(count, n)
    return {(2 * k + 1) * n // (2 * count) for k in range(count)} if count else set()


def expected_text_final(replay: Path, docs: list[dict], n: int) -> float:
    """final_correct the responder's rule gives on the first n recorded outputs, computed here offline."""
    gold = {d["question"]: gsm8k_answer(d["answer"]) for d in docs}
    rows = [r for r in read_jsonl(replay) if r["question"] in gold][:n]
    return sum(last_line_has(gold[r["question"]], r["response"])[0] for r in rows) / n


# --------------------------------------------------------------------------- runs
@dataclass
class RunResult:
    name: str
    kind: str
    exit_code: int
    wall_s: float
    requests: int  # every HTTP request the server received
    generate_calls: int
    uploads: int  # files stored by the File API
    upload_requests: int  # resumable-upload start + chunk requests
    file_gets: int  # state polls (each after a FILE_POLL_SECONDS sleep)
    deletes: int
    undeleted: list[str]
    judge_stage_s: float | None  # first request received -> last reply sent
    generate_span_s: float | None  # first generateContent received -> last generateContent reply
    file_api_span_s: float | None  # first upload request received -> last DELETE reply
    max_in_flight: int
    carried: dict[str, int]
    metrics: dict[str, float | None]
    plugin: dict  # judge.run from the results metadata
    per_doc: dict[int, float] = field(default_factory=dict, repr=False)
    log: str = ""


def run_lm_eval(name: str, kind: str, replay: Path, args: argparse.Namespace, server: TimedGeminiServer,
                responder: VlmResponder, env: dict[str, str], extra: list[str]) -> RunResult:
    server.reset()
    responder.reset()
    run = run_replay(name, TASK, replay, args.n, args.out, env, extra, args.timeout)
    arrivals = sorted((r.time, r.method, urlsplit(r.path).path) for r in server.requests)
    replies = sorted(server.replies)
    generate = [t for t, m, p in arrivals if p.endswith(":generateContent")]
    generate_done = [t for t, m, p in replies if p.endswith(":generateContent")]
    upload_times = [t for t, m, p in arrivals if p.startswith("/upload/")]
    delete_done = [t for t, m, p in replies if m == "DELETE"]
    uploaded, deleted = server.uploaded, server.deleted
    results = read_results(run.run_dir)
    result = RunResult(
        name=name, kind=kind, exit_code=run.exit_code, wall_s=run.wall_s, requests=len(arrivals),
        generate_calls=server.generate_calls, uploads=len(uploaded), upload_requests=len(upload_times),
        file_gets=sum(1 for _, m, p in arrivals if m == "GET" and "/files/" in p), deletes=len(deleted),
        undeleted=sorted(set(uploaded) - set(deleted)),
        judge_stage_s=_span(arrivals and arrivals[0][0], replies and replies[-1][0]),
        generate_span_s=_span(generate and generate[0], generate_done and generate_done[-1]),
        file_api_span_s=_span(upload_times and upload_times[0], delete_done and delete_done[-1]),
        max_in_flight=server.max_in_flight, carried=dict(responder.carried),
        metrics={m: metric_of(results, TASK, m) for m in METRICS}, plugin=judge_run_stats(results, TASK),
        per_doc={int(row["doc_id"]): float(row["final_correct"]) for row in read_samples(run.run_dir, TASK)},
        log=str(run.log))
    status = "ok" if run.exit_code == 0 else f"FAILED (exit {run.exit_code}, see {run.log})"
    print(f"[{name}] {status}: wall {run.wall_s:.2f}s, judge stage {fmt(result.judge_stage_s)}s, "
          f"generate {result.generate_calls}, uploads {result.uploads}, deletes {result.deletes}, "
          f"final_correct {result.metrics['final_correct']}, judge_failed {result.metrics['judge_failed']}",
          flush=True)
    return result


def _span(start: float | None, end: float | None) -> float | None:
    return end - start if start and end else None


def check(runs: dict[str, RunResult], args: argparse.Namespace, expected_text: float, n_large: int) -> list[str]:
    problems = []
    n = args.n
    for r in runs.values():
        if r.exit_code != 0:
            problems.append(f"{r.name} exited with {r.exit_code} (log: {r.log})")
        if r.metrics["final_correct"] is None:
            problems.append(f"{r.name}: no final_correct in its results JSON")
        if r.metrics["judge_failed"] != 0:
            problems.append(f"{r.name}: judge_failed is {r.metrics['judge_failed']} (expected 0)")
        if r.undeleted:
            problems.append(f"{r.name}: {len(r.undeleted)} uploaded files were never deleted: {r.undeleted[:3]}")
        if len(r.per_doc) != n:
            problems.append(f"{r.name}: {len(r.per_doc)} samples logged, expected {n}")
    for kind in KINDS:
        cold, warm = runs[f"{kind}-cold"], runs[f"{kind}-warm"]
        want_uploads = n_large if kind == "videos" else 0
        if cold.generate_calls != n:
            problems.append(f"{cold.name}: {cold.generate_calls} generateContent calls, expected {n}")
        if cold.plugin.get("judge_calls") != cold.generate_calls:
            problems.append(f"{cold.name}: the plugin counted {cold.plugin.get('judge_calls')} calls, "
                            f"the server saw {cold.generate_calls}")
        if cold.uploads != want_uploads or cold.deletes != want_uploads:
            problems.append(f"{cold.name}: {cold.uploads} uploads and {cold.deletes} deletes, expected {want_uploads}")
        if warm.generate_calls or warm.uploads or warm.requests:
            problems.append(f"{warm.name}: {warm.generate_calls} generate calls, {warm.uploads} uploads, "
                            f"{warm.requests} requests in all (expected 0: everything cached)")
        if warm.plugin.get("cache_hits") != n:
            problems.append(f"{warm.name}: {warm.plugin.get('cache_hits')} cache hits, expected {n}")
        if cold.metrics != warm.metrics or cold.per_doc != warm.per_doc:
            problems.append(f"{kind}: cold and warm scores differ ({cold.metrics} vs {warm.metrics})")
    text = runs["text-cold"]
    if text.metrics["final_correct"] is None or abs(text.metrics["final_correct"] - expected_text) > 1e-9:
        problems.append(f"text: final_correct {text.metrics['final_correct']}, the responder's rule gives "
                        f"{expected_text:.4f}")
    if text.carried != {"text": n}:
        problems.append(f"text-cold: the judge calls carried {text.carried}, expected {n} text outputs")
    for kind, want in (("images", {"inline image/png": n}),
                       ("videos", {k: v for k, v in (("inline video/mp4", n - n_large),
                                                     ("file video/mp4", n_large)) if v})):
        cold = runs[f"{kind}-cold"]
        if cold.metrics["final_correct"] != 1.0:
            problems.append(f"{kind}: final_correct {cold.metrics['final_correct']}, "
                            "expected 1.0 (every output reached the judge as media)")
        if cold.carried != want:
            problems.append(f"{kind}-cold: the judge calls carried {cold.carried}, expected {want}")
    return problems


# --------------------------------------------------------------------------- report
def runs_table(runs: dict[str, RunResult]) -> str:
    rows = ["| run | lm_eval wall (s) | judge stage (s) | HTTP requests | generate calls | uploads | "
            "state polls | deletes | peak in flight | final_correct | judge_failed |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs.values():
        rows.append(f"| {r.name} | {r.wall_s:.2f} | {fmt(r.judge_stage_s)} | {r.requests} | {r.generate_calls} | "
                    f"{r.uploads} | {r.file_gets} | {r.deletes} | {r.max_in_flight} | "
                    f"{fmt(r.metrics['final_correct'], 4)} | {fmt(r.metrics['judge_failed'], 4)} |")
    return "\n".join(rows)


def speedup_rows(runs: dict[str, RunResult], args: argparse.Namespace) -> list[dict]:
    rows = []
    for kind in KINDS:
        cold = runs[f"{kind}-cold"]
        serial = args.n * args.latency  # generateContent calls alone, one at a time
        # ... and every HTTP request one at a time, plus the backend's sleep before each state poll
        serial_all = cold.requests * args.latency + cold.file_gets * FILE_POLL_SECONDS
        rows.append({"kind": kind, "serial_bound_s": serial, "serial_all_requests_s": serial_all,
                     "concurrent_bound_s": math.ceil(args.n / args.concurrency) * args.latency,
                     "judge_stage_s": cold.judge_stage_s, "generate_span_s": cold.generate_span_s,
                     "file_api_span_s": cold.file_api_span_s,
                     "speedup": serial / cold.judge_stage_s if cold.judge_stage_s else None,
                     "speedup_all_requests": serial_all / cold.judge_stage_s if cold.judge_stage_s else None})
    return rows


def speedup_table(rows: list[dict]) -> str:
    lines = ["| kind | serial bound N x latency (s) | serial, all requests + poll sleeps (s) | "
             "concurrent bound (s) | cold judge stage (s) | speed-up vs N x latency | speed-up vs all requests |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['serial_bound_s']:.1f} | {r['serial_all_requests_s']:.1f} | "
                     f"{r['concurrent_bound_s']:.1f} | {fmt(r['judge_stage_s'])} | {fmt(r['speedup'], 1)}x | "
                     f"{fmt(r['speedup_all_requests'], 1)}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, n=60, latency=0.5, out=REPO / "bench" / "out" / "vlm")
    parser.add_argument("--large-videos", type=int, default=3,
                        help="how many of the N videos are over the inline limit (File API)")
    parser.add_argument("--large-mb", type=float, default=16.0, help="size of a large video, MiB")
    parser.add_argument("--small-kb", type=float, default=256.0, help="size of a small (inline) video, KiB")
    args = parser.parse_args(argv)
    replay = check_common_arguments(parser, args)
    large_bytes, small_bytes = int(args.large_mb * MB), int(args.small_kb * 1024)
    if args.large_videos and large_bytes <= INLINE_MAX_BYTES:
        parser.error(f"--large-mb must be over the inline limit, {INLINE_MAX_BYTES / MB:g} MiB")
    if small_bytes + args.n >= INLINE_MAX_BYTES:
        parser.error(f"--small-kb must stay under the inline limit, {INLINE_MAX_BYTES / MB:g} MiB")
    docs = list(read_jsonl(args.data_dir / GSM8K_TEST))[:args.n]
    large = large_indices(args.n, args.large_videos)

    responder = VlmResponder()
    runs: dict[str, RunResult] = {}
    with tempfile.TemporaryDirectory(prefix="mathjudge-vlm-bench-") as tmp, \
            TimedGeminiServer(responder=responder, latency=args.latency) as server:
        tmp = Path(tmp)
        started = time.perf_counter()
        replays = {"text": replay, **write_media_replays(tmp / "outputs", docs, large, large_bytes, small_bytes)}
        print(f"generated {args.n} PNGs and {args.n} MP4s ({len(large)} of {args.large_mb:g} MiB, docs "
              f"{sorted(large)}) in {time.perf_counter() - started:.1f}s", flush=True)
        processing_polls = server.processing_polls
        metadata = ["--metadata", json.dumps({"vlm_judge_base_url": server.url,
                                              "vlm_judge_concurrency": args.concurrency})]
        print(f"gemini server {server.url}, latency {args.latency}s per request, processing_polls "
              f"{server.processing_polls}; N={args.n}; concurrency {args.concurrency}; output {args.out}",
              flush=True)
        for kind in KINDS:
            cache_dir = tmp / f"cache-{kind}"
            cache_dir.mkdir()
            env = base_env(args.data_dir, cache_dir, {"GEMINI_API_KEY": GEMINI_KEY}, ENV_STRIP)
            for phase in ("cold", "warm"):
                name = f"{kind}-{phase}"
                runs[name] = run_lm_eval(name, kind, replays[kind], args, server, responder, env, metadata)

    problems = check(runs, args, expected_text_final(replay, docs, args.n), len(large))
    speedups = speedup_rows(runs, args)
    table, table2 = runs_table(runs), speedup_table(speedups)
    videos = runs["videos-cold"]
    print()
    print(f"N={args.n} docs, latency {args.latency}s per HTTP request (loopback, synthetic), concurrency "
          f"{args.concurrency}, {machine()['cpus']} CPUs, {now()}")
    print()
    print(table)
    print()
    print(table2)
    print()
    print(f"videos: {videos.carried}; File API: {videos.uploads} uploads in {videos.upload_requests} upload "
          f"requests, {videos.file_gets} state polls (each after a {FILE_POLL_SECONDS:g}s sleep), "
          f"{videos.deletes} deletes; first upload -> last delete {fmt(videos.file_api_span_s)}s; "
          f"generateContent span {fmt(videos.generate_span_s)}s")
    if videos.uploads:
        per_file = [x / videos.uploads for x in (videos.upload_requests, videos.file_gets)]
        floor = (per_file[0] + per_file[1] + 2) * args.latency + per_file[1] * FILE_POLL_SECONDS
        print(f"one large video: {per_file[0]:g} upload requests + {per_file[1]:g} state polls + generate + delete "
              f"at {args.latency:g}s each, plus {per_file[1]:g} x {FILE_POLL_SECONDS:g}s poll sleeps = at least "
              f"{floor:.1f}s, against {args.latency:g}s for an inline one")
    print(f"checks: {'all passed' if not problems else 'FAILED'}")
    settings = {"large_videos": sorted(large), "large_bytes": large_bytes, "small_video_bytes": small_bytes,
                "inline_max_bytes": INLINE_MAX_BYTES, "file_poll_seconds": FILE_POLL_SECONDS,
                "processing_polls": processing_polls}
    return finish(args, runs.values(), problems, settings, speedups=speedups, table_markdown=table,
                  speedup_table_markdown=table2)

if __name__ == "__main__":
    sys.exit(main())
