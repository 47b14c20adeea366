"""The scan part of bench/semantic.py: every candidate way of finding the k nearest of N
synthetic vectors, stored as the table stores them, timed query by query in turn (same minute,
same load), with recall against the exact ranking. Approximate indexes also report their build
(train + add) CPU, their memory and the cost of keeping them in step with the table (adding and
removing rows)."""

from __future__ import annotations

import resource
import statistics
import time


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - start, value


def rss_mb() -> float:
    """This process's resident memory now (MB), from /proc (the peak would hide a release)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


def scan_ab(rows: int, queries: int, rounds: int, k: int = 1000, hnsw_index: bool = True,
            ways: list[str] | None = None, ivf_lists: tuple[int, ...] = (1024, 2048),
            nprobes: tuple[int, ...] = (16, 32, 64)) -> dict:  # fmt: skip
    """The scan alone, in this process, on `rows` synthetic vectors stored as the table stores
    them (int8 + scale): every candidate way of finding the k nearest (those whose name holds
    one of `ways`, when given), timed query by query in turn (same minute, same load), with its
    recall@10 and recall@k against the exact float32 ranking of the stored vectors (the numpy
    scan). Clustered data (3,000 topics, a row's cosine to its topic about 0.7) and queries near
    a topic, as questions and meetings are. faiss IVF-SQ8 (`IndexIVFScalarQuantizer`, QT_8bit,
    inner product on the stored vectors made unit, one thread) with `ivf_lists` lists, each
    searched at every `nprobes`, its k rescored as the exact scan rescores them."""
    import numpy as np
    import torch

    use_usearch = _wanted("usearch", ways)  # usearch 2.26.6, installed by hand: a candidate only
    if use_usearch:
        from usearch.index import Index
        from usearch.index import search as usearch_search

    from apps.recordings.semantic.index import quantize_query, rank
    from apps.recordings.semantic.vectors import quantize, unit

    torch.set_num_threads(1)
    rng = np.random.default_rng(41)
    dims, topics = 384, 3000
    centers = unit(rng.standard_normal((topics, dims), dtype=np.float32))
    codes = np.empty((rows, dims), dtype=np.int8)
    scales = np.empty(rows, dtype=np.float32)
    for start in range(0, rows, 50_000):  # in slices: the float rows are never all in memory
        n = min(50_000, rows - start)
        block = unit(centers[rng.integers(topics, size=n)] + 0.052 * rng.standard_normal((n, dims), dtype=np.float32))
        codes[start : start + n], scales[start : start + n] = quantize(block)
    ids = np.arange(1, rows + 1, dtype=np.int64)
    noise = 0.052 * rng.standard_normal((queries, dims), dtype=np.float32)
    qs = unit(centers[rng.integers(topics, size=queries)] + noise)
    # Today's cache: the stored vectors as float32, here of length 1, so that its ranking (the
    # truth recall is measured against) is by the exact cosine of the stored vectors.
    matrix = unit(codes.astype(np.float32) * scales[:, None])
    half = matrix.astype(np.float16)
    bf16 = torch.from_numpy(matrix).to(torch.bfloat16)
    bits = np.packbits(codes > 0, axis=1).view(np.uint64)  # sign bits: 48 bytes a row

    def numpy_f32(q):
        scores = matrix @ q
        top = np.argpartition(-scores, k)[:k]
        return top[np.argsort(-scores[top], kind="stable")]

    def usearch_i8(q):  # exact int8 scan, the k rescored in float
        top = usearch_search(codes, quantize_query(q), k, "cos", exact=True, threads=1).keys.astype(np.int64)
        exact = (codes[top].astype(np.float32) @ q) / norms[top]
        return top[np.argsort(-exact, kind="stable")]

    norms = np.linalg.norm(codes.astype(np.float32), axis=1)  # a row's length, for its cosine

    def numkong_i8(q):  # the implementation (index.rank): int8 dots ÷ row length, the k rescored in float
        return np.array([i for i, _ in rank(codes, norms, ids, q, k)]) - 1

    def usearch_i8_2threads(q):
        return usearch_search(codes, quantize_query(q), k, "cos", exact=True, threads=2).keys.astype(np.int64)

    def usearch_f16(q):
        return usearch_search(half, q.astype(np.float16), k, "cos", exact=True, threads=1).keys.astype(np.int64)

    bf16_bits = bf16.view(torch.int16).numpy().view(np.uint16)  # the same bits, as usearch takes bf16

    def usearch_bf16(q):
        query = torch.from_numpy(q).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        return usearch_search(bf16_bits, query, k, "cos", exact=True, threads=1, dtype="bf16").keys.astype(np.int64)

    def torch_bf16(q):
        return torch.topk(bf16 @ torch.from_numpy(q).to(torch.bfloat16), k).indices.numpy()

    def binary_rescored(q, keep=min(20 * k, rows - 1)):
        distance = np.bitwise_count(bits ^ np.packbits(q > 0).view(np.uint64)).sum(axis=1, dtype=np.uint16)
        candidates = np.argpartition(distance, keep)[:keep]
        rescored = codes[candidates].astype(np.float32)
        scores = (rescored @ q) / np.linalg.norm(rescored, axis=1)
        return candidates[np.argsort(-scores, kind="stable")[:k]]

    print(f"scan: {rows} rows ready", flush=True)
    started = time.process_time()
    hnsw_index = hnsw_index and use_usearch
    if hnsw_index:  # minutes of CPU at 300k
        hnsw = Index(ndim=dims, metric="cos", dtype="i8", expansion_search=k)
        hnsw.add(ids - 1, codes, threads=1)
    hnsw_build_cpu = time.process_time() - started
    ivf_figures, ivf_ways = ({}, {})
    if _wanted("faiss", ways):
        ivf_figures, ivf_ways = ivf_indexes(matrix, codes, norms, ivf_lists, nprobes, k, rng)

    def usearch_hnsw_i8(q):
        return hnsw.search(quantize_query(q), k, threads=1).keys.astype(np.int64)

    methods = {
        "numpy float32": (numpy_f32, matrix.nbytes),
        "usearch exact i8 + float rescoring of the k": (usearch_i8, codes.nbytes),
        "usearch exact i8, 2 threads": (usearch_i8_2threads, codes.nbytes),
        "numkong i8 dots ÷ row length + float rescoring (index.rank)": (numkong_i8, codes.nbytes + norms.nbytes),
        "usearch exact f16": (usearch_f16, half.nbytes),
        "usearch exact bf16": (usearch_bf16, bf16_bits.nbytes),
        "torch bf16 matmul + topk": (torch_bf16, bf16.numel() * 2),
        "numpy sign bits, 20k rescored": (binary_rescored, bits.nbytes + codes.nbytes),
    }
    if hnsw_index:
        methods["usearch HNSW i8 (M=16, ef=k)"] = (usearch_hnsw_i8, hnsw.memory_usage)
    methods = {name: way for name, way in methods.items() if _wanted(name, ways) or "numpy float32" in name}
    methods.update(ivf_ways)
    truth = [numpy_f32(q) for q in qs]
    times: dict[str, list[float]] = {name: [] for name in methods}
    cpu: dict[str, list[float]] = {name: [] for name in methods}
    found: dict[str, list[np.ndarray]] = {name: [] for name in methods}
    for round_ in range(rounds):
        for qi, q in enumerate(qs):
            for name, (fn, _) in methods.items():
                started = time.process_time()
                elapsed, top = timed(fn, q)
                cpu[name].append(1000 * (time.process_time() - started))
                times[name].append(1000 * elapsed)
                if round_ == 0:
                    found[name].append(np.asarray(top))

    def recall(name: str, at: int) -> float:
        return statistics.mean(len(set(f[:at].tolist()) & set(t[:at].tolist())) / at
                               for f, t in zip(found[name], truth))  # fmt: skip

    figures = {"rows": rows, "k": k, "queries x rounds": f"{queries} x {rounds}",
               **({"HNSW build CPU s (1 thread)": round(hnsw_build_cpu, 1)} if hnsw_index else {}),
               **ivf_figures}  # fmt: skip
    baseline = statistics.median(times["numpy float32"])
    exact = next((n for n in methods if n.startswith("numkong")), None)
    for name, (_, nbytes) in methods.items():
        p50 = statistics.median(times[name])
        figures[name] = {"p50 ms": round(p50, 2), "p90 ms": round(sorted(times[name])[int(0.9 * len(times[name]))], 2),
                         "CPU ms p50": round(statistics.median(cpu[name]), 2),
                         "÷ numpy float32": round(p50 / baseline, 3),
                         **({"÷ numkong exact": round(p50 / statistics.median(times[exact]), 3)} if exact else {}),
                         "recall@10": round(recall(name, 10), 3),
                         f"recall@{k}": round(recall(name, k), 3), "MB": round(nbytes / 1e6)}  # fmt: skip
    return figures


def _wanted(name: str, ways: list[str] | None) -> bool:
    return not ways or any(w.lower() in name.lower() for w in ways)


def ivf_indexes(matrix, codes, norms, lists: tuple[int, ...], nprobes: tuple[int, ...], k: int,
                rng) -> tuple[dict, dict]:  # fmt: skip
    """faiss IVF-SQ8 indexes of the unit rows `matrix` (one per number of `lists`): their
    build figures (train on a sample of 40 rows a list, 10 k-means rounds; add all; CPU seconds
    at one thread; memory as RSS grown), the cost of adding and removing 1,000 rows (as the
    cache does when rows are written or deleted), and the search ways, one per nprobe, whose
    k found are rescored from the int8 codes as the exact scan's are."""
    import faiss
    import numpy as np

    faiss.omp_set_num_threads(1)
    dims = matrix.shape[1]
    figures, ways = {}, {}
    for nlist in lists:
        before = rss_mb()
        started = time.process_time()
        quantizer = faiss.IndexFlatIP(dims)
        index = faiss.IndexIVFScalarQuantizer(quantizer, dims, nlist, faiss.ScalarQuantizer.QT_8bit,
                                              faiss.METRIC_INNER_PRODUCT)  # fmt: skip
        index.cp.niter = 10
        sample = rng.choice(len(matrix), size=min(len(matrix), 40 * nlist), replace=False)
        index.train(matrix[np.sort(sample)])
        trained = time.process_time() - started
        index.add_with_ids(matrix, np.arange(len(matrix), dtype=np.int64))
        built = time.process_time() - started
        grown = rss_mb() - before
        extra = matrix[:1000]  # rows written since: added under new ids, then removed again
        new_ids = np.arange(len(matrix), len(matrix) + 1000, dtype=np.int64)
        add_s, _ = timed(index.add_with_ids, extra, new_ids)
        remove_s, removed = timed(index.remove_ids, faiss.IDSelectorArray(new_ids))
        assert removed == 1000 and index.ntotal == len(matrix)
        figures[f"faiss IVF{nlist},SQ8"] = {
            "train CPU s": round(trained, 1), "train + add CPU s": round(built, 1), "RSS grown MB": round(grown),
            "codes + ids MB": round(index.ntotal * (index.code_size + 8) / 1e6),
            "add 1,000 rows ms": round(1000 * add_s, 1), "remove 1,000 rows ms": round(1000 * remove_s, 1),
        }  # fmt: skip
        for nprobe in nprobes:
            params = faiss.SearchParametersIVF(nprobe=nprobe)

            def ivf(q, index=index, params=params):
                _, found = index.search(q[None], k, params=params)
                top = found[0][found[0] >= 0]
                exact = (codes[top].astype(np.float32) @ q) / norms[top]
                return top[np.argsort(-exact, kind="stable")]

            name = f"faiss IVF{nlist},SQ8 nprobe {nprobe} + float rescoring"
            ways[name] = (ivf, index.ntotal * (index.code_size + 8))
    return figures, ways
