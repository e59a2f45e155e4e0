"""The servers of a home: ``syncd serve`` (the daemon plus a REST API and MCP over streamable HTTP,
in one process) and ``syncd mcp`` (MCP over stdio).

  tokens          bearer tokens under .syncd/ (admin token, user tokens kept as hashes)
  gate            the HTTP door: a token on every request, a body size cap
  service         the operations, once, with their scoping (REST, MCP and the socket share it)
  rest            the FastAPI app
  routes_session  the session routes' place (transcripts, agent state)
  mcp_server      the MCP tools, generated from the operations
  serve           composes the daemon and uvicorn in one process; shutdown on SIGTERM

Importing this package imports nothing heavy; fastapi, uvicorn and mcp load with the modules
that use them.
"""
