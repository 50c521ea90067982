"""Runs for a while (argv[1] steps of 0.25 s) with 2 DataLoader workers, printing each step."""
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.zeros(4)


steps = int(sys.argv[1])
for i, batch in enumerate(DataLoader(Items(), batch_size=2, num_workers=2)):
    if i >= steps:
        break
    print("step %d" % i, flush=True)
    time.sleep(0.25)
print("done after %d steps" % steps)
