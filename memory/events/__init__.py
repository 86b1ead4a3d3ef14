"""Event and entity memory, as VikingMem designs it (../shared/DESIGN.md, section 8).

Pure code: schemas loaded from YAML, the one-pass extraction prompt and the check of its answer,
the salience filter, segment merging, SEARCH/REPLACE entity patches and the cards they change
(cards.py). I/O: the extraction worker (extractor.py) and its Postgres statements (store.py),
and the API's reads (listing.py). Exceptions:

    EventsError                 the root of this package's exceptions
    ├── SchemaError             a schema file is wrong: names the file, the field, the problem
    └── Lost                    a batch's claim was taken over: its extraction here is discarded

A patch that cannot apply, or a model's item that does not fit its schema, is not an exception:
it is a value (`Refused`, `Dropped`) the caller counts.
"""

from __future__ import annotations


class EventsError(Exception):
    """The root of memory.events' exceptions."""


class SchemaError(EventsError):
    """A schema file that cannot be used: `file`, the `field` (a dotted path) and the `problem`."""

    def __init__(self, file: str, field: str, problem: str) -> None:
        super().__init__(f"{file}: {field}: {problem}")
        self.file = file
        self.field = field
        self.problem = problem
