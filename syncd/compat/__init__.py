"""Where syncd reaches into other libraries' internals, all in one place (``patches``).

Each patch says what the library does wrong for us and what is replaced; each has a
``*_layout_problems`` function that names what it relies on and is missing, which the patch checks
before it touches anything (a changed library then keeps its own behaviour and a warning is
logged) and which tests/test_compat.py asserts empty, so an upgrade that moves those internals
fails a test instead of silently losing the fix. This floor imports nothing of syncd.
"""
