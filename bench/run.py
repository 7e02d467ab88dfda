"""Scoring-engine benchmark: biaslab's engine vs a naive per-request loop (and lm-evaluation-harness).

    make bench                       # = python bench/run.py
    python bench/run.py --quick      # smaller request samples, one repeat (smoke run)

Measured side by side, in one run, on the same machine and the same requests:
  (a) biaslab's engine (length-sorted batches, prefix-shared KV cache, token-budget batch size);
  (b) a naive loop equivalent to the seed authors' code: one forward pass per request, no batching;
  (c) lm-evaluation-harness' Hugging Face backend on the CrowS-Pairs requests, when ``lm-eval`` is
      installed (``pip install -e '.[bench]'``).
Request sets come from the data mirror (``BIASLAB_DATA_DIR`` or ../shared/datasets): OccuGender's full
request set (40 jobs x 4 prompts x 7 debiasing settings x every surface form), GBEM-UA's probability
sentences, RuBia pairs, CrowS-Pairs sentences; masked-LM PLL on RuBia uses a random BERT-base-size model.
Models: the default offline model (``models/base`` when built, otherwise the same architecture randomly
initialised - weights do not change speed) and a random model of GPT-2-small size.

Reports requests/s, tokens/s, ratios, peak RSS and achieved FLOP/s as a fraction of this machine's
measured float32 matmul peak, as ``bench/results/results.json`` and ``bench/results/results.md``, and
asserts that all implementations give the same log-likelihoods (|delta| <= 1e-4).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.request_sets import load_request_sets  # noqa: E402
from biaslab.scoring.causal import CausalScorer  # noqa: E402
from biaslab.scoring.requests import Request  # noqa: E402
from biaslab.scoring.tokenization import encode_request, encode_requests  # noqa: E402

TOLERANCE = 1e-4


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def matmul_peak_flops(threads: int, n: int = 2048, repeats: int = 5) -> float:
    """Best observed float32 GEMM FLOP/s on this machine with ``threads`` threads."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = max(best, 2 * n**3 / (time.perf_counter() - start))
    return best


def forward_flops(model, n_tokens: int) -> float:
    """Dense-equivalent FLOPs: ~2 per matmul parameter per fed token (embeddings are lookups).

    What a plain one-row-per-request evaluation would compute; with prefix sharing the engine does
    less, so FLOP/s on this count can exceed the machine's peak ("effective" throughput).
    """
    emb = model.get_input_embeddings().weight.numel()
    params = sum(p.numel() for p in model.parameters()) - emb
    return 2.0 * params * n_tokens


def executed_flops(model, stats: dict[str, int]) -> float:
    """FLOPs the engine actually ran: decoder matmuls on every fed token (padding included) plus the
    LM head on the rows it projected (``CausalScorer.stats``); attention scores are not counted."""
    emb = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight.numel()
    decoder = sum(p.numel() for p in model.parameters()) - emb - head
    return 2.0 * (decoder * stats["decoder_tokens"] + head * stats["head_rows"])


@torch.inference_mode()
def naive_loop(model, tokenizer, requests: list[Request]) -> list[float]:
    """The seed authors' pattern: one un-batched forward pass per request."""
    out = []
    for request in requests:
        tr = encode_request(tokenizer, request)
        whole = list(tr.context_ids) + list(tr.continuation_ids)
        logits = model(torch.tensor([whole[:-1]])).logits[0]
        logprobs = torch.log_softmax(logits.float(), -1)
        start = len(tr.context_ids) - 1
        out.append(sum(float(logprobs[start + j, t]) for j, t in enumerate(tr.continuation_ids)))
    return out


def lm_eval_loop(model, tokenizer, requests: list[Request]) -> list[float] | None:
    """lm-evaluation-harness' HFLM on the same requests, or None when lm-eval is not installed."""
    try:
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM
    except ImportError:
        return None
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=32)
    instances = [
        Instance(request_type="loglikelihood", doc={}, arguments=(r.context, r.continuation), idx=i)
        for i, r in enumerate(requests)
    ]
    return [ll for ll, _ in lm.loglikelihood(instances, disable_tqdm=True)]


def timed(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def count_tokens(tokenizer, requests: list[Request]) -> int:
    """Fed tokens of the request set (what a dense one-row-per-request evaluation runs)."""
    return sum(len(tr.context_ids) + len(tr.continuation_ids) - 1 for tr in encode_requests(tokenizer, requests))


def build_models(quick: bool):
    """The default model (trained if available) and a random GPT-2-small-size model, same tokenizer."""
    from biaslab.pretrain.architecture import build_llama

    base = ROOT / "models" / "base"
    if (base / "config.json").is_file():
        from biaslab.models.load import load_model

        loaded = load_model(base)
        default, tokenizer, label = loaded.model, loaded.tokenizer, "default (models/base, trained)"
    else:
        from biaslab.config import PretrainConfig
        from biaslab.pretrain.tokenizer import train_bpe_tokenizer

        cfg = PretrainConfig()
        mirror = Path(os.environ.get("BIASLAB_DATA_DIR", ROOT.parent / "shared" / "datasets"))
        texts = []
        for lang in ("en", "uk", "ru"):
            with open(mirror / "corpora" / lang / f"{lang}_corpus.txt", encoding="utf-8") as fh:
                texts.append(fh.read(300_000))
        tokenizer = train_bpe_tokenizer(texts, vocab_size=cfg.vocab_size)
        default = build_llama(len(tokenizer), cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers,
                              cfg.num_attention_heads, cfg.num_key_value_heads, max_position_embeddings=1024)
        label = "default architecture (random weights; models/base not built)"
    gpt2_small = build_llama(50257, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                             num_attention_heads=12, max_position_embeddings=1024)
    return [(label, default), ("GPT-2-small size (random, 124M-class Llama)", gpt2_small)], tokenizer


def bench_causal(label, model, tokenizer, sets, repeats, threads, peak, skip_naive_for_big):
    rows = []
    engine = CausalScorer(model, tokenizer, max_batch_tokens=1024)
    for name, requests in sets.items():
        n_tokens = count_tokens(tokenizer, requests)
        t_engine, engine_scores = timed(lambda: engine.loglikelihood(requests), repeats)
        engine.stats.update(dict.fromkeys(engine.stats, 0))
        engine.loglikelihood(requests)  # once more, untimed, to count the work one call does
        row = {"model": label, "requests": name, "n_requests": len(requests), "n_tokens": n_tokens,
               "engine_s": t_engine, "engine_req_per_s": len(requests) / t_engine,
               "engine_tok_per_s": n_tokens / t_engine, "engine_work": dict(engine.stats),
               "engine_flops_fraction": executed_flops(model, engine.stats) / t_engine / peak,
               "engine_effective_flops_fraction": forward_flops(model, n_tokens) / t_engine / peak}
        if not skip_naive_for_big:
            t_naive, naive = timed(lambda: naive_loop(model, tokenizer, requests), repeats)
            delta = max(abs(a.logprob - b) for a, b in zip(engine_scores, naive))
            assert delta <= TOLERANCE, f"{name}: engine and naive loop disagree by {delta}"
            row.update(naive_s=t_naive, speedup_vs_naive=t_naive / t_engine, max_abs_delta_naive=delta)
        if name == "crows_pairs":
            t_h, harness = timed(lambda: lm_eval_loop(model, tokenizer, requests), repeats)
            if harness is not None:
                delta = max(abs(a.logprob - b) for a, b in zip(engine_scores, harness))
                assert delta <= TOLERANCE, f"crows_pairs: engine and lm-eval disagree by {delta}"
                row.update(lm_eval_s=t_h, speedup_vs_lm_eval=t_h / t_engine, max_abs_delta_lm_eval=delta)
            else:
                row["lm_eval"] = "not installed (pip install -e '.[bench]')"
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def bench_masked(sentences, repeats):
    """Masked-LM PLL on RuBia: packed masked copies vs one forward per masked token."""
    try:
        from biaslab.scoring.masked import MaskedScorer
    except ImportError:
        return {"masked": "biaslab.scoring.masked not available"}
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(sentences, trainers.WordPieceTrainer(
        vocab_size=8000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[
        ("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=256, num_hidden_layers=4,
                                       num_attention_heads=4, intermediate_size=1024)).eval()
    scorer = MaskedScorer(model, tokenizer, max_batch_tokens=1024)
    ids = [tokenizer.encode(s) for s in sentences]

    @torch.inference_mode()
    def naive():
        out = []
        for row in ids:
            total = 0.0
            for pos in range(1, len(row) - 1):
                masked = list(row)
                masked[pos] = tokenizer.mask_token_id
                logits = model(torch.tensor([masked])).logits[0, pos]
                total += float(torch.log_softmax(logits, -1)[row[pos]])
            out.append(total)
        return out

    t_engine, fast = timed(lambda: scorer.pseudo_loglikelihood(ids), repeats)
    t_naive, slow = timed(naive, repeats)
    delta = max(abs(a - b) for a, b in zip(fast, slow))
    assert delta <= TOLERANCE, f"masked PLL: engine and naive loop disagree by {delta}"
    return {"model": "random BERT (4x256)", "requests": "rubia_masked_pll", "n_requests": len(ids),
            "engine_s": t_engine, "naive_s": t_naive, "speedup_vs_naive": t_naive / t_engine,
            "max_abs_delta_naive": delta}


def markdown(results: dict) -> str:
    lines = [f"# Scoring benchmark ({results['machine']['cpu_count']} CPUs, {results['machine']['threads']} threads,"
             f" matmul peak {results['machine']['matmul_peak_gflops']:.1f} GFLOP/s)", "",
             "| model | requests | n | engine req/s | engine tok/s | x naive | x lm-eval | executed FLOP/s of peak |"
             " dense-equivalent FLOP/s of peak |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results["rows"]:
        def fmt(key, spec):
            return format(r[key], spec) if key in r else "-"
        lines.append(f"| {r.get('model', '')} | {r['requests']} | {r.get('n_requests', '')} | "
                     f"{fmt('engine_req_per_s', '.1f')} | {fmt('engine_tok_per_s', '.0f')} | "
                     f"{fmt('speedup_vs_naive', '.1f')} | {fmt('speedup_vs_lm_eval', '.2f')} | "
                     f"{fmt('engine_flops_fraction', '.0%')} | {fmt('engine_effective_flops_fraction', '.0%')} |")
    lines += ["", f"Peak RSS of the benchmark process: {results['peak_rss_mib']:.0f} MiB", "",
              "Executed FLOP/s counts the decoder matmuls on every token the engine fed (padding included) and "
              "the LM head on the rows it projected; dense-equivalent FLOP/s counts what one row per request "
              "would need, so prefix sharing can push it past 100%.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small samples, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sample", type=int, default=600, help="requests per set for the naive comparisons")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    sample = 120 if args.quick else args.sample
    torch.set_num_threads(args.threads)
    peak = matmul_peak_flops(args.threads)
    models, tokenizer = build_models(args.quick)
    sets = load_request_sets(sample)
    rows = []
    for i, (label, model) in enumerate(models):
        if i == 0:
            rows += bench_causal(label, model, tokenizer, sets, repeats, args.threads, peak, False)
        else:  # the big model: throughput / FLOP-efficiency on CrowS-Pairs, plus its naive ratio
            rows += bench_causal(label, model, tokenizer, {"crows_pairs": sets["crows_pairs"][: sample // 2]},
                                 repeats, args.threads, peak, False)
    masked = bench_masked([r.continuation for r in sets["rubia"]][: sample // 4], repeats)
    if "requests" in masked:
        rows.append(masked)
    results = {"machine": {"cpu_count": os.cpu_count(), "threads": args.threads, "platform": platform.platform(),
                           "torch": torch.__version__, "matmul_peak_gflops": peak / 1e9},
               "rows": rows, "peak_rss_mib": peak_rss_mib(), "tolerance": TOLERANCE}
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    table = markdown(results)
    (out / "results.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
