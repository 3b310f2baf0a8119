"""CI's Hypothesis profile is derandomized (tests/conftest.py)."""

import os
import subprocess
import sys


def test_ci_profile_is_derandomized():
    code = ("import tests.conftest; from hypothesis import settings; "
            "print(settings.default.derandomize)")
    env = {**os.environ, "CI": "true"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
