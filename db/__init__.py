"""The one database seam of chat/ and memory/: the engine (engine.py), running statements
(statements.py), the outage error (errors.py), rows into dataclasses (rows.py). It imports none
of jin's other packages."""
