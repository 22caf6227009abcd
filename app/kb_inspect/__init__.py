"""An admin's look into one knowledge-base document: its chunks, as retrieval reads them, and
what its row records of its ingestion (issue 28, item 2). Read-only; kept apart from
`app.knowledge`, which owns adding, deleting and searching documents."""
