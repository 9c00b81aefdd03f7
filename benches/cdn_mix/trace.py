"""The CDN mix's trace and its origin files, for benches/vs_nginx.sh (case cdn-mix).

    python3 benches/cdn_mix/trace.py OUT_DIR REQUESTS CATALOG ZIPF SEED CACHE_PERCENT

Each request is, with probability q, a URL never requested before (a one-off), and
otherwise a Zipf(ZIPF) draw from CATALOG popular objects; q is solved so that 70% of the
distinct URLs in the trace are requested exactly once (the one-offs and the catalog
objects drawn once). Each distinct URL gets a lognormal size of median 16 KiB and mean
48 KiB (the parameters of `secondhit bench`'s synthetic workload), cut to 1 KiB .. 1 MiB.
The same arguments give the same trace: one random generator, seeded with SEED.

Writes OUT_DIR/cdn-trace.txt (one path a line, /cdn/<url>, in request order) and
OUT_DIR/www/cdn/<url> (sparse files of each URL's size: holes cost no disk, and the
origin serves their zeros), and prints "distinct once_share unique_bytes trace_bytes
cache_bytes", the cache being CACHE_PERCENT of the unique bytes.
"""
import bisect
import math
import os
import random
import sys

ONCE_SHARE = 0.7
MEDIAN, MEAN = 16 * 1024, 48 * 1024
SMALLEST, LARGEST = 1024, 1024 * 1024


def one_off_probability(popularity, requests):
    """The q that makes ONCE_SHARE of the distinct URLs requested once, in expectation."""

    def once_share(q):
        one_offs, draws = q * requests, (1 - q) * requests
        distinct = sum(1 - (1 - p) ** draws for p in popularity)
        drawn_once = sum(draws * p * (1 - p) ** (draws - 1) for p in popularity)
        return (one_offs + drawn_once) / (one_offs + distinct)

    # The share grows with q: bisect.
    low, high = 0.0, 1.0
    for _ in range(40):
        q = (low + high) / 2
        low, high = (q, high) if once_share(q) < ONCE_SHARE else (low, q)
    return (low + high) / 2


def main():
    out_dir = sys.argv[1]
    requests, catalog = int(sys.argv[2]), int(sys.argv[3])
    exponent, seed, cache_percent = float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    weights = [rank**-exponent for rank in range(1, catalog + 1)]
    total = sum(weights)
    popularity = [w / total for w in weights]
    cumulative, acc = [], 0.0
    for p in popularity:
        acc += p
        cumulative.append(acc)
    q = one_off_probability(popularity, requests)
    # median = e^mu and mean = e^(mu + sigma^2 / 2).
    mu, sigma = math.log(MEDIAN), math.sqrt(2 * math.log(MEAN / MEDIAN))
    rng = random.Random(seed)
    url_of, sizes, counts, trace = {}, [], [], []
    next_one_off = catalog
    for _ in range(requests):
        if rng.random() < q:
            key, next_one_off = next_one_off, next_one_off + 1
        else:
            key = min(bisect.bisect_left(cumulative, rng.random() * acc), catalog - 1)
        if key not in url_of:
            # URLs are numbered in the order of their first request.
            url_of[key] = len(sizes)
            sizes.append(min(max(int(rng.lognormvariate(mu, sigma)), SMALLEST), LARGEST))
            counts.append(0)
        url = url_of[key]
        counts[url] += 1
        trace.append(url)
    files = os.path.join(out_dir, "www", "cdn")
    os.makedirs(files, exist_ok=True)
    for url, size in enumerate(sizes):
        with open(os.path.join(files, str(url)), "wb") as f:
            f.truncate(size)
    with open(os.path.join(out_dir, "cdn-trace.txt"), "w") as f:
        f.write("".join("/cdn/%d\n" % url for url in trace))
    unique = sum(sizes)
    print(
        "%d %.3f %d %d %d"
        % (
            len(sizes),
            sum(1 for c in counts if c == 1) / len(sizes),
            unique,
            sum(sizes[url] for url in trace),
            int(unique * cache_percent / 100),
        )
    )


if __name__ == "__main__":
    main()
