"""`factcli view --web`: a local web view of the run store (Starlette pages over store/ and report/).

`app.py` builds the application, `pages.py` handles the pages, `queries.py` reads the store for
them, `ratings.py` takes human ratings, `server.py` runs it under uvicorn. Nothing here calls a
model: the pages only read what `factcli eval` stored."""
