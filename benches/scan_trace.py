#!/usr/bin/env python3
"""Writes a CDN-like trace with scan bursts injected, as `timestamp,key,size` CSV, for
`secondhit simulate --trace` (see benches/RESULTS.md for the runs that use it).

Regular traffic: a Zipf(0.9) catalog of 20,000 objects plus one-off URLs (half of the
requests' distinct keys), 1,000 requests a second, log-normal sizes (median 16 KiB, mean
48 KiB). Bursts: 30,000 one-off URLs at 5,000 a second, starting at the given seconds.
Usage: scan_trace.py OUT.csv [--no-burst]"""

import bisect
import math
import random
import sys

REQUESTS = 200_000
RATE = 1_000.0
CATALOG = 20_000
ZIPF = 0.9
ONE_OFF_SHARE = 0.35  # of regular requests: about half of the distinct keys
BURSTS = [15.0, 100.0]  # seconds: a nearly empty cache, then a warm one
BURST_KEYS = 30_000
BURST_RATE = 5_000.0
MEDIAN, MEAN = 16 * 1024, 48 * 1024


def main():
    out = sys.argv[1]
    bursts = [] if "--no-burst" in sys.argv[2:] else BURSTS
    rng = random.Random(7)
    weights = [1.0 / (i + 1) ** ZIPF for i in range(CATALOG)]
    cdf, total = [], 0.0
    for w in weights:
        total += w
        cdf.append(total)
    mu = math.log(MEDIAN)
    sigma = math.sqrt(2 * (math.log(MEAN) - mu))
    sizes = {}

    def size(key):
        if key not in sizes:
            sizes[key] = max(1, min(16 << 20, int(rng.lognormvariate(mu, sigma))))
        return sizes[key]

    rows = []
    one_off = 0
    for i in range(REQUESTS):
        at = i / RATE
        if rng.random() < ONE_OFF_SHARE:
            key = f"/once/{one_off}"
            one_off += 1
        else:
            key = f"/obj/{bisect.bisect_left(cdf, rng.random() * total)}"
        rows.append((at, key, size(key)))
    for b, start in enumerate(bursts):
        for j in range(BURST_KEYS):
            key = f"/scan/{b}/{j}"
            rows.append((start + j / BURST_RATE, key, size(key)))
    rows.sort(key=lambda r: r[0])
    with open(out, "w") as f:
        f.write("timestamp,key,size\n")
        for at, key, sz in rows:
            f.write(f"{at:.6f},{key},{sz}\n")


if __name__ == "__main__":
    main()
