"""How well recall finds what was said: the benchmark behind `jin bench recall`.

dataset.py reads the JSON Lines format, scores.py computes Recall@k, NDCG@10 and the reports
(pure), baselines.py ranks with plain BM25, cosine and their RRF (pure), ablations.py names the
recall layers a run can switch off, benchmark.py runs a dataset through the real write and
recall paths.
"""
