"""How well recall finds what was said: the benchmark behind `jin bench recall`.

dataset.py reads the JSON Lines format, scores.py computes Recall@k, NDCG@10 and the report
(pure), benchmark.py runs a dataset through the real write and recall paths.
"""
