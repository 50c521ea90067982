"""A Hugging Face Trainer script as its docs show one: TrainingArguments from the command line
(HfArgumentParser), a GPT-2 made from a config (no weights: nothing from the hub), local data
(a character-level text file beside the script). Written for provision's framework corpus."""

import sys
import time
from dataclasses import dataclass, field

import torch
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class DataArguments:
    train_file: str = field(default="input.txt")
    block_size: int = field(default=16)
    sample_delay: float = field(default=0.0, metadata={"help": "seconds of work per sample (a slow decode)"})


class CharBlocks(torch.utils.data.Dataset):
    def __init__(self, path, block_size, delay):
        text = open(path).read()
        self.vocab = sorted(set(text))
        self.ids = [self.vocab.index(c) for c in text]
        self.block_size, self.delay = block_size, delay

    def __len__(self):
        return len(self.ids) - self.block_size

    def __getitem__(self, i):
        time.sleep(self.delay)
        chunk = torch.tensor(self.ids[i:i + self.block_size])
        return {"input_ids": chunk, "labels": chunk}


def main():
    data_args, args = HfArgumentParser((DataArguments, TrainingArguments)).parse_args_into_dataclasses()
    data = CharBlocks(data_args.train_file, data_args.block_size, data_args.sample_delay)
    config = GPT2Config(vocab_size=len(data.vocab), n_positions=data_args.block_size, n_embd=16, n_layer=1, n_head=1)
    trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=data)
    result = trainer.train()
    print("trained", result.global_step, "steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
