"""A Lightning script as its docs show one: a LightningModule, a LightningDataModule with a
num_workers argument, Trainer.fit with the accelerator from the command line. Written for
provision's framework corpus."""

import argparse
import time

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __init__(self, n, delay):
        self.x, self.delay = torch.randn(n, 8), delay

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.delay)
        return self.x[i]


class Data(L.LightningDataModule):
    def __init__(self, batch_size=4, num_workers=0, sample_delay=0.0):
        super().__init__()
        self.batch_size, self.num_workers, self.sample_delay = batch_size, num_workers, sample_delay

    def train_dataloader(self):
        return DataLoader(Slow(24, self.sample_delay), batch_size=self.batch_size, num_workers=self.num_workers)

    def val_dataloader(self):
        return DataLoader(Slow(8, 0.0), batch_size=8)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).pow(2).mean()

    def validation_step(self, batch, batch_idx):
        self.layer(batch)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--sample-delay", type=float, default=0.0)
    args = parser.parse_args()
    trainer = L.Trainer(accelerator=args.accelerator, devices=1, max_epochs=args.epochs, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0)
    trainer.fit(Model(), Data(num_workers=args.num_workers, sample_delay=args.sample_delay))
    print("trained", trainer.global_step, "steps")


if __name__ == "__main__":
    main()
