"""HTTP/SSE edge of jin: settings, app factory, routes and the `jin` command."""
