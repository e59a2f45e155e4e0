"""The daemon's local socket: other processes of the same user ask the running ``syncd watch``
instead of loading LanceDB and the model themselves.

  protocol  the wire format (newline-delimited JSON, versioned) and the socket's path
  client    ask_daemon(): tiny, imports nothing heavy; None when no daemon answers
  server    ControlServer: the daemon's side, on threads, same user only (SO_PEERCRED)
"""
