"""Host <-> device copy bandwidth of one GPU, from pageable and from pinned host memory (1 GiB,
median of 6), and the host's own copy bandwidth: what uploading a matrix from the caller's
arrays can reach (the figures behind the pinned staging of large uploads, src/backend/cuda/memory.rs).
Needs torch with CUDA. Usage: python3 scripts/host_device_copy.py"""
import time

import torch

SIZE = 1 << 30
ROUNDS = 6


def median_seconds(copy, sync=torch.cuda.synchronize):
    times = []
    for _ in range(ROUNDS):
        sync()
        start = time.perf_counter()
        copy()
        sync()
        times.append(time.perf_counter() - start)
    return sorted(times)[ROUNDS // 2]


def main():
    print(f"# {torch.cuda.get_device_name(0)}, {SIZE >> 20} MiB, median of {ROUNDS}")
    for pinned in (False, True):
        host = torch.empty(SIZE, dtype=torch.uint8).fill_(1)
        if pinned:
            host = host.pin_memory()
        device = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
        kind = "pinned" if pinned else "pageable"
        up = median_seconds(lambda: device.copy_(host, non_blocking=pinned))
        down = median_seconds(lambda: host.copy_(device))
        print(f"host to device, {kind}: {SIZE / up / 1e9:.1f} GB/s")
        print(f"device to host, {kind}: {SIZE / down / 1e9:.1f} GB/s")
    a = torch.empty(SIZE, dtype=torch.uint8).fill_(2)
    b = torch.empty(SIZE, dtype=torch.uint8)
    seconds = median_seconds(lambda: b.copy_(a), sync=lambda: None)
    print(f"host to host ({torch.get_num_threads()} threads): {SIZE / seconds / 1e9:.1f} GB/s")


if __name__ == "__main__":
    main()
