"""The guarantee check walks the whole tenant tree (issue 59, finding 2): a tenant without a
guarantee of its own passes its children's guarantees up — to the nearest ancestor that has
one, or to the pool at the top of the branch — so the seed's teams under ``company`` (which
has no quota) are checked against the pool's 40 cards, and every level where guarantees
exceed what is above them is found, not only the top-level tenants."""

from gpupool.server.overbooking import counted_in, overbooked, overbookings

# the seed of ``gpupool up``: three teams under a company without a quota, 40 cards
SEED = {"company": None, "algorithm": "company", "inference": "company", "devtest": "company"}
POOL = 40


def _shown(v: int) -> str:
    return f"{v} cards"


def test_the_seed_overbooked_through_a_company_without_a_guarantee_is_found():
    nominal = {"algorithm": 48, "inference": 10, "devtest": 10}
    (found,) = overbookings("gpu", SEED, nominal, POOL)
    assert found.over is None  # the pool
    assert found.limit == 40 and found.total == 68
    assert found.members == (("algorithm", 48), ("devtest", 10), ("inference", 10))
    words = "gpu: guarantees algorithm 48 cards + devtest 10 cards + inference 10 cards = 68 cards"
    assert found.words(_shown) == f"{words} exceed the pool's 40 cards"
    # setting any of them says so
    for team in ("algorithm", "inference", "devtest"):
        assert overbooked(team, "gpu", SEED, nominal, POOL, _shown) == [found.words(_shown)]
    assert overbookings("gpu", SEED, {**nominal, "algorithm": 20}, POOL) == []


def test_every_level_is_checked_and_each_counts_the_nearest_guarantees_below_it():
    tree = {
        "org": None, "lab": None,  # lab: no guarantee, its projects' count against the pool
        "a": "org", "b": "org", "a1": "a", "a2": "a", "mid": "b", "b1": "mid", "b2": "mid",
        "p": "lab", "q": "lab",
    }  # fmt: skip
    nominal = {"org": 10, "a": 4, "a1": 3, "a2": 3, "b1": 4, "b2": 3, "p": 20, "q": 1}
    found = {(o.over, o.total, o.limit) for o in overbookings("gpu", tree, nominal, 30)}
    assert found == {
        (None, 31, 30),  # org 10 + p 20 + q 1 against the pool
        ("org", 11, 10),  # a 4 + b1 4 + b2 3 (b and mid have none: b1, b2 count at org)
        ("a", 6, 4),  # a1 3 + a2 3
    }
    pool, a, org = overbookings("gpu", tree, nominal, 30)
    assert org.members == (("a", 4), ("b1", 4), ("b2", 3))
    assert org.words(_shown) == (
        "gpu: guarantees a 4 cards + b1 4 cards + b2 3 cards = 11 cards exceed org's "
        "guarantee of 10 cards"
    )
    # setting a guarantee tells of every level from the pool down to the tenant's own, never
    # of a branch it has no part in
    assert [o.over for o in overbookings("gpu", tree, nominal, 30)] == [None, "a", "org"]
    assert overbooked("a", "gpu", tree, nominal, 30, _shown) == [  # from the top down
        pool.words(_shown),
        org.words(_shown),
        "gpu: guarantees a1 3 cards + a2 3 cards = 6 cards exceed a's guarantee of 4 cards",
    ]
    assert overbooked("b2", "gpu", tree, nominal, 30, _shown) == [
        pool.words(_shown),
        org.words(_shown),
    ]
    assert overbooked("q", "gpu", tree, nominal, 30, _shown) == [pool.words(_shown)]
    assert a.words(_shown) not in overbooked("b1", "gpu", tree, nominal, 30, _shown)
    # what setting a guarantee may overbook (refused where the server refuses)
    assert counted_in("b2", tree, nominal) == {"org", "b2"}
    assert counted_in("q", tree, nominal) == {None, "q"}
    assert counted_in("a", tree, nominal) == {"org", "a"}


def test_a_reader_who_sees_part_of_a_level_gets_the_others_as_a_sum():
    nominal = {"algorithm": 48, "inference": 10, "devtest": 10}
    (found,) = overbookings("gpu", SEED, nominal, POOL)
    assert found.words(_shown, sees=lambda t: t == "algorithm") == (
        "gpu: guarantees algorithm 48 cards + other teams 20 cards = 68 cards exceed the "
        "pool's 40 cards"
    )
