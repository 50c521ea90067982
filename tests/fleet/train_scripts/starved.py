"""Starved by its DataLoader: every sample takes 30 ms to "load", num_workers=0, the step is tiny."""
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        time.sleep(0.03)  # decoding a large JPEG on one core
        return torch.randn(32), i % 4


model = torch.nn.Linear(32, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(SlowDataset(), batch_size=8, num_workers=0)
for epoch in range(2):
    start = time.time()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("epoch %d took %.2fs" % (epoch, time.time() - start))
