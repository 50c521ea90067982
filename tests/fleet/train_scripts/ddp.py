"""A small DDP job (gloo, CPU) for the distributed tests and benchmarks/distributed_launch.py.

Every rank starts from the same seed, trains on its own shard (DistributedSampler), and at the
end prints `weights RANK SHA256` of its final state dict and writes it to
$PROVISION_RUN_DIR/weights-rankRANK.txt (or --out-dir): after DDP's all-reduce every rank must
hold the same weights. `first step RANK TIME` marks the first step done (launch overhead).

    --steps N          steps (default 20)
    --sleep S          seconds per step on top of the compute (long runs for stop/Ctrl-C tests)
    --fail-rank R      rank R exits with --fail-code (default 3) at step --fail-at (default 3)
"""

import argparse
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--fail-at", type=int, default=3)
    p.add_argument("--fail-code", type=int, default=3)
    p.add_argument("--out-dir", default=os.environ.get("PROVISION_RUN_DIR", "."))
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world} on {os.uname()[1]} (MASTER_ADDR={os.environ.get('MASTER_ADDR')})", flush=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = DistributedDataParallel(model)
    data = TensorDataset(torch.randn(4096, 32), torch.randn(4096, 1))
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    step = 0
    while step < args.steps:
        for x, y in loader:
            if rank == args.fail_rank and step == args.fail_at:
                print(f"rank {rank} failing on purpose at step {step}", flush=True)
                sys.exit(args.fail_code)
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
            step += 1
            if step == 1:
                print(f"first step {rank} {time.time():.6f}", flush=True)
            if args.sleep:
                time.sleep(args.sleep)
            if step % 5 == 0:
                print(f"step {step} rank {rank}", flush=True)
            if step >= args.steps:
                break
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    print(f"weights {rank} {digest.hexdigest()}", flush=True)
    with open(os.path.join(args.out_dir, f"weights-rank{rank}.txt"), "w") as f:
        f.write(digest.hexdigest() + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
