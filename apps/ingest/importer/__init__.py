"""The history importer behind `manage.py import_recordings` (format: docs/import.md).

`sources` reads files into records (JSON Lines, or WebVTT/SRT via `captions`), `records`
checks each one whole, `loading` writes them idempotently, one session per transaction;
`parallel` does the same with worker processes (`--jobs`), to the same outcome."""
