"""Test-wide settings: Hypothesis draws the same examples on every CI run (``CI`` set, as
.ci/run has it), so a red CI is reproducible; elsewhere it explores new examples each run."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
