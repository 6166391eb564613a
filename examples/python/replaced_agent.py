#!/usr/bin/env python3
"""Seed 1: a replaced agent whose late exit must not reach its successor.

An orchestrator runs one agent turn per session. A new turn replaces the old one while
the old process is still draining: it ignores the first SIGTERM for a moment, writes a
last line, and exits late with 143. Keyed by session name alone, that late exit used to
be reported as the *successor's* crash, and the successor dropped from the table.

With genward every process is a numbered generation, and a handle is bound to its own:
the old turn's late output and exit reach the old handle only, the successor's handle
sees nothing of them, and anything sent through the old handle is refused
(StaleGeneration) instead of reaching the successor.

Run with a daemon running (GENWARD_SOCKET, or the default socket). Exits 0 when every
check holds.
"""

import sys
import time
from typing import List

import genward

SESSION = "example-agent"
# A turn that drains slowly on SIGTERM: one more line, then the conventional 143.
OLD_TURN = ["sh", "-c", "trap 'sleep 0.5; echo old turn: late last words; exit 143' TERM; echo old turn: working; while :; do sleep 0.1; done"]
NEW_TURN = ["sh", "-c", "echo new turn: working; while read line; do echo new turn got: $line; done"]


def main() -> int:
    with genward.Client() as client:
        old = client.spawn(SESSION, OLD_TURN, grace="5s")
        old_out: List[bytes] = []
        old.on_data(old_out.append)
        print(f"turn 1 runs as gen {old.gen} (pid {old.pid})")
        time.sleep(0.2)

        # The new turn starts at once; the old one is stopped meanwhile, and takes its time.
        new = client.spawn(SESSION, NEW_TURN, on_busy="overlap")
        new_out: List[bytes] = []
        new_exits: List[genward.Exit] = []
        new.on_data(new_out.append)
        new.on_exit(new_exits.append)
        print(f"turn 2 runs as gen {new.gen} (pid {new.pid}); turn 1 is being stopped")

        # Turn 1's handle can no longer reach the session: nothing it sends lands on turn 2.
        try:
            old.write("meant for turn 1\n")
            print("FAIL: a stale handle reached the session")
            return 1
        except genward.StaleGeneration as e:
            print(f"turn 1's handle is refused: {e}")

        # Turn 1's late exit is its own, and says why it ended.
        end = old.wait(timeout=10)
        print(f"gen {end.gen} ended: code {end.code}, signal {end.signal}, cause {end.cause}")
        print(f"its last output went to its own handle: {b''.join(old_out)!r}")

        # Turn 2 saw none of it and still works.
        new.write("are you there?\n")
        deadline = time.monotonic() + 10
        while b"are you there?" not in b"".join(new_out) and time.monotonic() < deadline:
            time.sleep(0.05)
        current = client.get(SESSION).current
        print(f"turn 2 output: {b''.join(new_out)!r}; session's current gen: {current}")

        ok = (
            end.gen == old.gen
            and end.cause == "superseded"
            and b"late last words" in b"".join(old_out)
            and b"late last words" not in b"".join(new_out)
            and b"are you there?" in b"".join(new_out)
            and new_exits == []
            and new.exit is None
            and current == new.gen
        )
        new.stop()
        print(f"turn 2 stopped: {new.wait(timeout=10).cause}")
        client.remove(SESSION)
        print("OK: the late exit was attributed to its own generation" if ok else "FAIL")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
