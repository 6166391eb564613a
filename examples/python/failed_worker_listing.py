#!/usr/bin/env python3
"""Seed 2: a listing that survives a failed worker.

A supervisor of workers once let one failed entry (a worker it could not stop, persisted
as "failed") make every global listing fail. Here workers fail every way a worker can —
a program that cannot start, a crash, a kill — next to healthy ones, and `list()` still
answers for all of them: the failed ones as entries with how they ended, the healthy ones
running, each generation with its own pid.

Run with a daemon running (GENWARD_SOCKET, or the default socket). Exits 0 when every
check holds.
"""

import sys

import genward

PREFIX = "example-worker-"


def main() -> int:
    with genward.Client() as client:
        healthy = [client.spawn(f"{PREFIX}ok-{i}", ["sleep", "60"], grace=200) for i in range(2)]
        try:
            client.spawn(f"{PREFIX}missing", ["genward-example-no-such-worker"])
        except genward.SpawnFailed as e:
            print(f"{PREFIX}missing did not start: {e.kind}: {e.message}")
        crashed = client.spawn(f"{PREFIX}crash", ["sh", "-c", "echo boom >&2; exit 3"])
        crashed.wait(timeout=10)
        killed = client.spawn(f"{PREFIX}killed", ["sleep", "60"])
        killed.kill("KILL")
        killed.wait(timeout=10)

        mine = [s for s in client.list() if s.name.startswith(PREFIX)]
        print(f"{'SESSION':28} {'STATE':8} {'GEN':>5} {'PID':>7}  LAST END")
        for s in mine:
            gen = s.generations[0] if s.generations else None
            last = f"gen {s.last_end.gen}: code {s.last_end.code} ({s.last_end.cause})" if s.last_end else "-"
            print(f"{s.name:28} {s.state:8} {gen.gen if gen else '-':>5} {gen.pid if gen else '-':>7}  {last}")

        by_name = {s.name: s for s in mine}
        crash_end = by_name[f"{PREFIX}crash"].last_end
        killed_end = by_name[f"{PREFIX}killed"].last_end
        ok = (
            len(mine) == 5
            and all(by_name[h.session].state == "running" for h in healthy)
            and all(by_name[h.session].generations[0].pid == h.pid for h in healthy)
            and by_name[f"{PREFIX}missing"].failed
            and by_name[f"{PREFIX}crash"].failed and crash_end is not None and crash_end.code == 3
            and by_name[f"{PREFIX}killed"].failed and killed_end is not None and killed_end.signal == "SIGKILL"
        )
        for s in mine:
            client.remove(s.name)
        print("OK: the listing answered for every worker" if ok else "FAIL")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
