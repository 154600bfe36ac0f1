"""Sites bundled with the web environments, each a small ASGI app with state its validators read."""
