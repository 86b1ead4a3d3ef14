"""One stateless step: context assembly, the step itself, and (later) compaction."""
