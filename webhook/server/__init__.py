"""The admission server: aiohttp app, configuration, TLS and certificates, reload, metrics, logs."""
