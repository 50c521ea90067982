"""An accelerate training loop as its docs show one: the user's DataLoader, model and optimizer
through accelerator.prepare(), accelerator.backward(). Written for provision's framework corpus."""

import argparse
import time

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __init__(self, n, delay):
        self.x, self.delay = torch.randn(n, 8), delay

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.delay)
        return self.x[i], self.x[i].sum(0, keepdim=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--sample-delay", type=float, default=0.0)
    args = parser.parse_args()
    accelerator = Accelerator(cpu=args.cpu)
    train = DataLoader(Slow(24, args.sample_delay), batch_size=args.batch_size, shuffle=True)
    evaluate = DataLoader(Slow(8, 0.0), batch_size=8)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer, train, evaluate = accelerator.prepare(model, optimizer, train, evaluate)
    steps = 0
    for _ in range(args.epochs):
        model.train()
        for x, y in train:
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
        model.eval()
        with torch.no_grad():
            for x, _ in evaluate:
                model(x)
    accelerator.print("trained", steps, "steps")


if __name__ == "__main__":
    main()
