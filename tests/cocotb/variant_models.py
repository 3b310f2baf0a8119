"""The models the variant tests run on. The default suite runs soft-capping, sinks, ALiBi and
the V factors on one build of the tiny preset with every unit (each test turns on the
variants it checks; the others' units are present and off), since a model's build is most of
an RTL test's time;
each unit alone, its own preset and its own model, runs the same cases with ``make
test-slow``."""

import pytest

from attenio.base import config as C

EVERY_UNIT = C.preset("tiny+sinks+alibi+softcap+vscales")


def models(alone: str) -> list:
    """The every-unit model, and the preset ``alone`` (one unit) behind the slow marker."""
    return [pytest.param(EVERY_UNIT, id="every-unit"),
            pytest.param(C.preset(alone), id=alone, marks=pytest.mark.slow)]
