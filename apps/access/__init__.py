"""The doorkeeper: who is asking and whether they may come in, for every entry point.

One place owns parsing the Bearer header, turning an API key or an OAuth token into a
`Principal`, the audience rules, the batch re-check of credentials already admitted, the rate
limit, and rendering a refusal. `admission.admit` is the entry point; REST (`rest`), the event
stream and `/mcp` are thin adapters over it. Layering (docs/decisions/authentication.md "One doorkeeper"):
access reads tenancy's and oauth's models and is read by every HTTP edge; nothing it imports
imports it back.
"""
