"""DataLoader workers whose batches outgrow a small /dev/shm (the fleet's `smallshm` kind, 64 MiB as
Docker's default): 2 workers x prefetch_factor 2 x 32 MiB float32 batches. On a host with room it
trains --steps steps; on the small one the workers die of "Bus error"."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Big(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        if i >= 8:
            # the first batch reaches the main process before any other is made, so its size is
            # known (what `shm_too_small` is computed from) whichever worker then runs out
            time.sleep(0.2)
        return torch.ones(1024, 1024)  # 4 MiB a sample, 32 MiB a batch of 8


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    model = torch.nn.Linear(1024, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Big(), batch_size=8, num_workers=2, prefetch_factor=2)
    for step, x in enumerate(loader):
        opt.zero_grad()
        model(x).mean().backward()
        opt.step()
        if step + 1 >= args.steps:
            break
    print("shm job done")


if __name__ == "__main__":
    main()
