"""One generator of random, valid CGA layouts for the tests (chapter 1's rules: log2(num_ctas) bases,
each zero or the next power of two along one dimension)."""


def random_cga_bases(rng, nbits: int, rank: int, zero: float = 0.25) -> list:
    """``nbits`` bases over ``rank`` dimensions; each is a broadcast (all zeros) with probability ``zero``."""
    nxt, bases = [1] * rank, []
    for _ in range(nbits):
        b = [0] * rank
        if rng.random() >= zero:
            d = rng.randrange(rank)
            b[d] = nxt[d]
            nxt[d] *= 2
        bases.append(b)
    return bases
