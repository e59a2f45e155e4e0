"""The agent-facing API's contract: one set of pydantic inputs and outputs (``schemas``) shared by
the REST API, the MCP tools and the agent tools of ``syncd.memory``, which is why it sits below
both of them.
"""
