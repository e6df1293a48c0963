"""A stand-in for PyTorch's benchmarks/dynamo harness (common.py), written for minify-bot's tests.

It takes the real harness's command line (the flags minify-bot passes and a few more), builds
real (tiny) models, runs eager and compiled, judges them with torch._dynamo.utils.same like the
harness does, and appends a row with the harness's CSV columns to --output. Like the real harness
it exits 0 whatever the verdict: the CSV row is the result.
"""

import argparse
import csv
import os
import sys
import time
import traceback

import torch

COLUMNS = ["dev", "name", "batch_size", "accuracy", "calls_captured", "unique_graphs", "graph_breaks",
           "unique_graph_breaks", "autograd_captures", "autograd_compiles", "cudagraph_skips",
           "compilation_latency"]


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    for flag in ("--accuracy", "--performance", "--inference", "--training", "--float32", "--float16",
                 "--bfloat16", "--amp", "--inductor", "--dynamic-shapes", "--cold-start-latency"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--devices", action="append", default=[])
    p.add_argument("--only")
    p.add_argument("--output")
    p.add_argument("--backend")
    p.add_argument("--batch-size", "--batch_size", type=int)
    p.add_argument("--timeout", type=int, default=2000)
    return p.parse_args(argv)


def write_row(path, row):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        if new:
            w.writeheader()
        w.writerow(row)


def main(models: dict, default_batch: dict, argv=None) -> int:
    from torch._dynamo.utils import counters, same

    args = parse_args(argv)
    if not args.accuracy:
        print("this stand-in only runs --accuracy", file=sys.stderr)
        return 2
    backend = "inductor" if args.inductor else (args.backend or "eager")
    dtype = torch.bfloat16 if args.bfloat16 else torch.float16 if args.float16 else torch.float32
    device = (args.devices or ["cpu"])[0]
    name = args.only
    if name not in models:
        print(f"unknown model {name}", file=sys.stderr)
        return 1
    bs = args.batch_size or default_batch[name]
    torch.manual_seed(1337)
    model, example = models[name](bs)
    model = model.to(device=device, dtype=dtype).eval()
    example = example.to(device=device, dtype=dtype)
    row = {c: 0 for c in COLUMNS}
    row.update(dev=device, name=name, batch_size=bs)
    t0 = time.perf_counter()
    with torch.no_grad():
        try:
            ref = model(example)
            ref_fp64 = model.double()(example.double())
            model = model.to(dtype)
        except Exception:
            traceback.print_exc()
            row["accuracy"] = "eager_fail_to_run"
            write_row(args.output, row)
            return 0
        torch._dynamo.reset()
        try:
            opt = torch._dynamo.optimize(backend)(model)
            res = opt(example)
            row["compilation_latency"] = round(time.perf_counter() - t0, 3)
        except Exception:
            traceback.print_exc()
            row["accuracy"] = "fail_to_run"
            write_row(args.output, row)
            return 0
    stats = counters["stats"]
    row.update(calls_captured=stats["calls_captured"], unique_graphs=stats["unique_graphs"],
               graph_breaks=sum(counters["graph_break"].values()), unique_graph_breaks=len(counters["graph_break"]))
    ok = same(ref, res, fp64_ref=ref_fp64, cos_similarity=False, tol=1e-4 if dtype == torch.float32 else 1e-2)
    row["accuracy"] = "pass" if ok else "fail_accuracy"
    print(f"{device:4} {name:20} {row['accuracy']}")
    write_row(args.output, row)
    return 0
