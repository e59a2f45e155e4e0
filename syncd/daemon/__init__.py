"""The process that holds a home (``syncd watch``, and ``syncd serve`` around it).

loop     Daemon: watch the tree, keep the index and git in step, one work thread
control  the daemon's end of the local socket (the wire and the client are ``syncd.control``)
logfile  ``.syncd/daemon.log``, the log of whichever process holds the home
"""
