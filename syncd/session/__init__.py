"""The session layer: transcripts, agent-state snapshots, lifecycle, context compression, and the
runner that records one turn as one commit. Everything is a file under the user it belongs to
(``memory/users/<user>/sessions/<session>/``), indexed by the one pipeline and committed to git.
"""

from __future__ import annotations

from .compressor import ContextCompressor
from .files import SessionInfo, list_sessions, read_session_info
from .indexer import MarkdownIndexer, TranscriptIndexer
from .lifecycle import SessionLifecycle, SessionPolicy, get_session_key
from .runner import SessionRunner, TurnResult
from .serializer import SafeUnpickler, deserialize_agent, load_legacy_pickle, serialize_agent
from .state import StateMirror, read_state_file
from .transcripts import TranscriptManager, read_transcript_file

__all__ = [
    "TranscriptManager",
    "StateMirror",
    "SessionPolicy",
    "SessionLifecycle",
    "ContextCompressor",
    "TranscriptIndexer",
    "MarkdownIndexer",
    "SessionRunner",
    "TurnResult",
    "SessionInfo",
    "get_session_key",
    "list_sessions",
    "read_session_info",
    "read_transcript_file",
    "read_state_file",
    "serialize_agent",
    "deserialize_agent",
    "load_legacy_pickle",
    "SafeUnpickler",
]
