"""The servers' bearer tokens: the store lives with the home (syncd/home/tokens.py), whose writer
publishes their hashes whether it serves HTTP or not; the servers check requests against it
under these names."""

from ..home.tokens import ADMIN_FILE, USERS_FILE, Principal, TokenInfo, TokenStore, match_token

__all__ = ["ADMIN_FILE", "USERS_FILE", "Principal", "TokenInfo", "TokenStore", "match_token"]
