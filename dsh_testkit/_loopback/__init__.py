"""The loopback HTTP plumbing the mock server and the recording proxy share (kit-internal).

Its modules are the room's surface for the kit's other rooms (a private package, so they carry
no underscore): ``hosts`` (which names and addresses are this machine), ``thread`` (an asyncio
server on a background thread, for tests). Nothing here imports another room of the kit.
"""
