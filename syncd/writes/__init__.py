"""The write path: every change to a home's files, from an API call to its commit.

Who calls whom::

    MemoryManager / SessionRunner / REST / MCP / workbench
        -> Engine.changes(intent) / write_file / append_file     (engine/facade.py)
            -> WritePath (scheduler.py)
                 begin: write turn (+ home lock when borrowed) + GroupJournal (journal.py)
                 each write: journal line -> intent -> atomic write / durable append
                 end:   CommitQueue (queue.py): index stage -> commit stage -> landed?
                        -> commit_editor -> history.committer.commit_changes (one chain)
    Daemon (syncd watch / serve): its batches -> Engine.sync; its commits -> WritePath.commit_editor
    revert, reindex: WritePath.quiesced()

**What an acknowledgement guarantees.** A write returns (a ``Fact`` handed back, a 200 answered)
only once a commit on the branch holds exactly the bytes it wrote (or, when a commit made
meanwhile took its file in whole, every line it added and none it took out: the person's
`git commit -a` over it; told "nothing was kept", a client would write those lines twice,
``WritePath._taken_in``): it is in git history, whatever
the person does with git afterwards, and on disk to stay (its bytes fsynced before their rename
into place, the rename made durable by the commit pass before it commits: one fsync of each
folder per pass, not one per write under the write turn). Before that, the write is provisional: if the group fails (an
exception inside it, git busy past ``Settings.lock_wait_s``, the person's git command rewriting
the file before the commit could take it), its files are put back as they were (journal.py) and
the error says so — ``GitBusyError`` (REST 503 with Retry-After): nothing of the change was kept,
retry. If its process dies, the next writable start (or the daemon) puts them back the same way.
So a turn is committed whole or not at all, and nothing acknowledged is ever lost. No one writes
a file on top of a provisional write (another group of the process waits in
``CommitQueue.wait_for_path``, a group of another process in ``WritePath._await_unheld``) until
that write is acknowledged or undone: built on, a refused write's bytes would ride along in the
next writer's commit. A write handed
to a daemon in another process returns once HEAD holds it (every line it added, none it took out:
``handoff.Handed``; a file changed again before the daemon's commit is acknowledged when the
commit that took it in holds our lines, never because the file moved on), or raises
CommitDeferredError (a GitBusyError that says the change *is* kept: saved with its provenance,
committed by the daemon once git is free; not to be written again) when the daemon could not
commit it in time, or OverwrittenError when, by then, someone else took its lines out of the file
before any commit held them (not kept; not to be retried blindly, which would undo their edit;
said at once when the branch moved on with commits of the file, none holding them, and nothing that
could bring them back, a stash say, does: ``Handed.lost``). A daemon that
lets go of the home before committing it (stopped, killed) is noticed by its lock (free, or held
by agents' changes or a sync, which do not take changes handed over): the writer then borrows
the lock and commits the change itself (handoff.py, ``WritePath._take_over``: its file as it is
then, if it still holds the change; never while another live group has written it since, whose
own commit takes it in), or, when a daemon holds the home again, waits for that one.

**Who may commit what.** Only :meth:`WritePath.commit_editor` commits, holding the queue's
commit stage: the commit queue's passes (the groups' own paths) and the daemon's batches (what
people changed). The daemon never commits a path of a live group (``held()``: the journals of open
groups and of groups waiting for their commit, in any process), never while git's own work is
under way or its index or HEAD just moved (see Daemon.commit_pending), and never a path written by
a group that died (it is undone first).

**Locks**, outermost first (never taken in another order):
  ``WritePath._turn``   one group at a time: its writes, in order (the daemon's steps take it
                        too, so nothing of its own interleaves with a group from another thread);
                        a FairLock (turn.py), served in the order asked, so no one is starved
  ``Engine._indexing``  one index apply at a time
  the queue's condition (``CommitQueue._cond``): the queue, its two stages (the commit stage is
                        a flag under it, held from before a commit is made until HEAD and
                        git's index are in place: one commit at a time, HEAD moves once per
                        pass, also for the daemon's commits and a revert, which go before the
                        queue's next pass when they wait for it), which group still holds
                        which path, and the sets of paths written-not-indexed and undone
  the home lock (an flock under the git directory): one writing process per home; held for
                        good by a daemon or ``syncd sync``, borrowed per change otherwise.
                        Beside it, its turnstile ``lock.wait``: a writer waiting to hold the
                        lock for good holds it, and a change passes it before borrowing, so
                        agents writing back to back never keep a daemon from starting
                        (home/lock.py)
  a journal's flock: its group's process is alive
"""

from .groups import ChangeGroup, current_group
from .journal import GroupJournal, held_paths, recover_abandoned
from .queue import CommitQueue
from .scheduler import WritePath

__all__ = [
    "ChangeGroup",
    "CommitQueue",
    "GroupJournal",
    "WritePath",
    "current_group",
    "held_paths",
    "recover_abandoned",
]
