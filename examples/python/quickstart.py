#!/usr/bin/env python3
"""Spawn a process under genward, type into it, read its output and how it ended.

Needs a running daemon (`genward daemon`; this finds it as the CLI does, or at
GENWARD_SOCKET) and the library (`pip install ./clients/python`, or
PYTHONPATH=clients/python/src). The lines between the markers are the README's snippet.
"""

# snippet:start
import genward

with genward.Client() as client:  # the default socket, as the CLI finds it
    proc = client.spawn("hello", ["sh", "-c", "read name; echo hello $name"])
    proc.on_data(lambda data: print("output:", data))  # bytes, exactly as written
    proc.write("genward\n")
    end = proc.wait()  # after all its output
    print(f"gen {proc.gen} ended: code {end.code}, cause {end.cause}")
# snippet:end
