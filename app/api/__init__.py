"""The REST API: Litestar app, one controller per resource."""
