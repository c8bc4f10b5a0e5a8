"""The data model and its documents: the FPM profile, the runtime observation record, the runtime pin,
blocks and the cache budget; reading and writing them (the strict JSON reader, the output rule and the
atomic writers, the kind of a document), and what a check reports (diagnostics, errors, the rule catalogue)."""
