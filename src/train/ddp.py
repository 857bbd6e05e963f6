# edgeprof's distributed-training harness: one process per rank, started by
# PyTorch's own launcher (torchrun, one node per board, c10d rendezvous on the first),
# DistributedDataParallel over the gloo backend on CPUs.
# It trains a torchvision model on CIFAR-10 files in their standard binary format and prints,
# from rank 0, one JSON line per epoch and one at the end. Python 3.6+.
import argparse
import glob
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision

RECORD = 1 + 3 * 32 * 32


def load(paths):
    data = b"".join(open(p, "rb").read() for p in paths)
    n = len(data) // RECORD
    if n == 0:
        raise SystemExit("no CIFAR-10 records in " + ", ".join(paths))
    table = torch.frombuffer(bytearray(data[: n * RECORD]), dtype=torch.uint8).view(n, RECORD)
    labels = table[:, 0].long()
    images = table[:, 1:].reshape(n, 3, 32, 32).float().div_(255.0)
    return images, labels


def shard(n, world, rank, generator):
    # Every rank gets as many samples (so as many batches): DDP needs them in step.
    order = torch.randperm(n, generator=generator)
    per_rank = n // world
    return order[rank * per_rank:(rank + 1) * per_rank]


def build(name):
    if name == "cnn":
        # The same small CIFAR-10 CNN as tf_mwms.py's (the classic Keras example).
        # Two convolution blocks with batch normalisation, global average pooling, two dense
        # layers.
        nn = torch.nn

        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                    nn.MaxPool2d(2)]
        return nn.Sequential(*block(3, 32), *block(32, 64), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    if name not in torchvision.models.__dict__:
        raise SystemExit("ddp.py: unknown model %r: neither cnn nor a torchvision model" % name)
    return torchvision.models.__dict__[name](num_classes=10)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--model", default="cnn")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(max(1, a.threads))
    torch.manual_seed(a.seed)
    train_x, train_y = load(sorted(glob.glob(os.path.join(a.data, "data_batch_*.bin"))))
    test_x, test_y = load([os.path.join(a.data, "test_batch.bin")])
    mean = train_x.mean(dim=(0, 2, 3), keepdim=True)
    std = train_x.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
    train_x = (train_x - mean) / std
    test_x = (test_x - mean) / std
    model = build(a.model)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
    start = time.perf_counter()
    for epoch in range(a.epochs):
        ddp.train()
        g = torch.Generator()
        g.manual_seed(a.seed * 1000 + epoch)
        mine = shard(len(train_y), world, rank, g)
        counts = torch.zeros(3, dtype=torch.float64)
        for i in range(0, len(mine), a.batch):
            idx = mine[i:i + a.batch]
            x, y = train_x[idx], train_y[idx]
            out = ddp(x)
            loss = F.cross_entropy(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            counts += torch.tensor([(out.argmax(1) == y).sum().item(), len(y), loss.item() * len(y)],
                                   dtype=torch.float64)
        dist.all_reduce(counts)
        ddp.eval()
        val = torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            per_rank = (len(test_y) + world - 1) // world
            lo, hi = rank * per_rank, min(len(test_y), (rank + 1) * per_rank)
            for i in range(lo, hi, 256):
                j = min(hi, i + 256)
                pred = model(test_x[i:j]).argmax(1)
                val += torch.tensor([(pred == test_y[i:j]).sum().item(), j - i], dtype=torch.float64)
        dist.all_reduce(val)
        if rank == 0:
            print(json.dumps({
                "epoch": epoch + 1,
                "train_acc": counts[0].item() / max(1.0, counts[1].item()),
                "loss": counts[2].item() / max(1.0, counts[1].item()),
                "val_acc": val[0].item() / max(1.0, val[1].item()),
                "elapsed_s": time.perf_counter() - start,
            }), flush=True)
    dist.barrier()
    if rank == 0:
        print(json.dumps({"done": True, "wall_s": time.perf_counter() - start, "world": world,
                          "framework": "torch " + torch.__version__}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
