"""Compute-bound: the batches are ready in memory, the step is a few large matmuls."""
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(1024, 512), torch.randint(0, 10, (1024,)))
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                            torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(2):
    start = time.time()
    for x, y in DataLoader(data, batch_size=64, num_workers=0):
        for _ in range(3):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print("epoch %d took %.2fs" % (epoch, time.time() - start))
