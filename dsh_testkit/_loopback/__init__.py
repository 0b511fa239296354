"""The loopback HTTP plumbing the mock server and the recording proxy share (kit-internal).

Its modules are the room's surface for the kit's other rooms (a private package, so they carry
no underscore): ``http`` (one connection's requests read with h11, answers written as raw
bytes), ``server`` (listening, the connection cap, refusals, the live pages, a clean stop: one
server both use), ``pages`` (what a live page is; the pages themselves are handed in where a
server is built), ``hosts`` (which names and addresses are this machine), ``thread`` (an asyncio
server on a background thread, for tests). Nothing here imports another room of the kit.
"""
