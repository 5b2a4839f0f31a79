"""`spacy-pairatt.warmup_linear.v1`: thinc's warmup_linear.v1 rates, as an object that pickles."""

import pickle
from itertools import islice

import pytest
from thinc.api import registry


@pytest.mark.parametrize("warmup,total", [(100, 800), (0, 50), (10, 10)])
def test_the_rates_are_thincs_warmup_linear(warmup, total):
    ours = registry.schedules.get("spacy-pairatt.warmup_linear.v1")(
        initial_rate=3e-4, warmup_steps=warmup, total_steps=total
    )
    thincs = registry.schedules.get("warmup_linear.v1")(initial_rate=3e-4, warmup_steps=warmup, total_steps=total)
    assert list(islice(ours, total + 20)) == list(islice(thincs, total + 20))


def test_a_schedule_part_way_pickles_and_goes_on_where_it_was():
    schedule = registry.schedules.get("spacy-pairatt.warmup_linear.v1")(
        initial_rate=1.0, warmup_steps=4, total_steps=12
    )
    list(islice(schedule, 6))
    copy = pickle.loads(pickle.dumps(schedule))
    assert list(islice(copy, 5)) == list(islice(schedule, 5))
