"""The examples in examples/python run against a real daemon, and the README's Python
snippet is copied from one of them."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

from .daemon import REPO, DaemonPerClass

EXAMPLES = os.path.join(REPO, "examples", "python")
SRC = os.path.join(REPO, "clients", "python", "src")


def snippet(path: str) -> str:
    with open(path) as f:
        text = f.read()
    start = text.index("# snippet:start\n") + len("# snippet:start\n")
    return text[start:text.index("# snippet:end")]


class TestExamples(DaemonPerClass, unittest.TestCase):
    def run_example(self, name: str) -> str:
        env = self.daemon.env
        env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
        r = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)], env=env,
                           capture_output=True, timeout=120)
        out = r.stdout.decode(errors="replace")
        self.assertEqual(r.returncode, 0, out + r.stderr.decode(errors="replace"))
        return out

    def test_quickstart(self) -> None:
        out = self.run_example("quickstart.py")
        self.assertIn("output: b'hello genward\\n'", out)
        self.assertIn("cause exited", out)

    def test_seed_replaced_agent(self) -> None:
        out = self.run_example("replaced_agent.py")
        self.assertIn("cause superseded", out)
        self.assertIn("OK: the late exit was attributed to its own generation", out)

    def test_seed_failed_worker_listing(self) -> None:
        out = self.run_example("failed_worker_listing.py")
        self.assertIn("OK: the listing answered for every worker", out)

    def test_readme_snippet_is_the_quickstart(self) -> None:
        code = snippet(os.path.join(EXAMPLES, "quickstart.py"))
        self.assertLessEqual(len(code.strip().splitlines()), 10)
        with open(os.path.join(REPO, "README.md")) as f:
            readme = f.read()
        section = readme[readme.index("### Python"):]
        self.assertIn("```python\n" + code + "```", section)


if __name__ == "__main__":
    unittest.main()
