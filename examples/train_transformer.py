"""A small transformer trained with DDP or FSDP2 on synthetic data, or served tensor-parallel
(token-by-token decode): a real job whose collectives ccltune can capture, tune for and replay.

    torchrun --nproc-per-node 4 examples/train_transformer.py --mode fsdp2 --steps 30
    torchrun --nproc-per-node 1 examples/train_transformer.py --mode ddp --profile-dir trace/
    torchrun --nproc-per-node 4 examples/train_transformer.py --mode tp-decode --batch 64

tp-decode: each layer's MLP is split Megatron-style over the ranks (column-parallel up, row-parallel
down), so every layer ends in an all_reduce of the (batch, width) activations in bf16: batch 64 x
width 2048 is 256 KB per call, `--decode-tokens` tokens per step, two calls per layer and token.

Built from torch.nn only (no model zoo), bf16 compute, a fixed seed: every run issues the same
collectives in the same order. Prints one line per step (step time in ms) and, at the end, the
median step time after the warm-up steps. With --profile-dir, steps after the warm-up are traced
with torch.profiler (a Chrome trace per rank, gzipped when the name ends in .gz).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("ddp", "fsdp2", "tp-decode"), default="ddp")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=2048, help="model width (d_model)")
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=512, help="tokens per sequence")
    p.add_argument("--batch", type=int, default=4, help="sequences per rank and step")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--steps", type=int, default=30, help="timed steps after the warm-up")
    p.add_argument("--warmup", type=int, default=5, help="steps before timing starts")
    p.add_argument("--decode-tokens", type=int, default=16,
                   help="tp-decode: tokens generated per step (each through every layer)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--profile-dir", default=None,
                   help="trace the timed steps with torch.profiler into this folder")
    p.add_argument("--profile-steps", type=int, default=3, help="how many timed steps to trace")
    p.add_argument("--gzip", action="store_true", help="write the trace as .json.gz")
    return p.parse_args(argv)


def build(args, torch):
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(args.vocab, args.width)
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(args.width, args.heads, 4 * args.width,
                                           dropout=0.0, batch_first=True, norm_first=True)
                for _ in range(args.layers))
            self.norm = nn.LayerNorm(args.width)
            self.head = nn.Linear(args.width, args.vocab, bias=False)

        def forward(self, tokens):
            x = self.embed(tokens)
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x))

    return Model()


def main(argv=None) -> int:
    args = parse(argv)
    import torch
    import torch.distributed as dist

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not torch.cuda.is_available():
        print("train_transformer: needs a CUDA (or ROCm) GPU per rank", file=sys.stderr)
        return 2
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    torch.manual_seed(args.seed)
    if args.mode == "tp-decode":
        step = tp_decode_step(args, torch, dist, dev, world)
    else:
        step = train_step(args, torch, dev, rank, local)
    return timed(args, torch, dist, step, rank, world)


def tp_decode_step(args, torch, dist, dev, world):
    """One decode step: `--decode-tokens` tokens, each through every layer; a layer is an attention-sized
    and an MLP-sized block split over the ranks, each closed by an all_reduce (as Megatron's row-parallel
    linear layers are)."""
    if (4 * args.width) % world or args.width % world:
        raise SystemExit(f"train_transformer: --width {args.width} must split evenly over {world} ranks")
    bf16 = torch.bfloat16
    blocks = []
    for _ in range(args.layers):
        for inner in (args.width, 4 * args.width):   # attention projections, then the MLP
            up = torch.randn(args.width, inner // world, device=dev, dtype=bf16) * args.width ** -0.5
            down = torch.randn(inner // world, args.width, device=dev, dtype=bf16) * inner ** -0.5
            blocks.append((up, down))
    x0 = torch.randn(args.batch, args.width, device=dev, dtype=bf16)
    norm = torch.nn.functional.layer_norm

    @torch.no_grad()
    def step():
        h = x0
        for _ in range(args.decode_tokens):
            for up, down in blocks:
                y = torch.nn.functional.gelu(norm(h, (args.width,)) @ up) @ down
                dist.all_reduce(y)
                h = h + y
        return h.float().norm() / h.numel() ** 0.5

    return step


def train_step(args, torch, dev, rank, local):
    model = build(args, torch).to(dev)
    if args.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model, device_ids=[local])
    else:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(args.seed + rank)
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq), device=dev, generator=gen)
    target = torch.randint(0, args.vocab, (args.batch, args.seq), device=dev, generator=gen)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.mode == "ddp"):
            logits = model(tokens)
            loss = loss_fn(logits.float().view(-1, args.vocab), target.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def timed(args, torch, dist, step, rank, world):
    """Warm-up, then the timed steps (traced when --profile-dir is set); prints each and the median."""
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    prof = None
    if args.profile_dir:
        from torch.profiler import ProfilerActivity, profile, schedule
        os.makedirs(args.profile_dir, exist_ok=True)
        ext = ".json.gz" if args.gzip else ".json"
        out = os.path.join(args.profile_dir, f"trace_rank{rank}{ext}")
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                       schedule=schedule(wait=0, warmup=0, active=args.profile_steps, repeat=1),
                       on_trace_ready=lambda p: p.export_chrome_trace(out))
        prof.start()
    times = []
    for i in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        if prof is not None:
            prof.step()
        if rank == 0:
            label = "norm" if args.mode == "tp-decode" else "loss"
            print(f"step {i:3d}  {times[-1]:9.2f} ms  {label} {loss.item():.4f}", flush=True)
    if prof is not None:
        prof.stop()
    if rank == 0:
        print(f"# mode {args.mode} ranks {world} layers {args.layers} width {args.width} "
              f"median step {statistics.median(times):.2f} ms over {len(times)} steps", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
