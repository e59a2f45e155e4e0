"""The daemon's local socket: other processes of the same user ask the running ``syncd watch``
instead of loading LanceDB and the model themselves.

  protocol  the wire format (newline-delimited JSON, versioned) and the socket's path
  client    ask_daemon(): tiny, imports nothing heavy; None when no daemon answers

The daemon's side (ControlServer) is ``syncd.daemon.control``: it answers with the engine, a floor
above this one, while any process (the engine's own revert among them) can ask from here.
"""
