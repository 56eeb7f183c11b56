"""Helpers the notebooks call instead of writing the logic themselves: the refusal loop (show.notebook.refusals)
and chapter 6's reading of a recorded timeline (hopper_matmul.per_tile)."""
import pytest

from multicta_kernels import hopper_matmul as hm, results
from multicta_kernels.measure import traces
from multicta_kernels.show import notebook


def test_refusals_prints_one_line_each_and_stops_at_an_accepted_call(capsys):
    def refuse(exc, msg):
        def call():
            raise exc(msg)
        return call
    got = notebook.refusals({"bad size": refuse(ValueError, "size must be 4"), "bad type": refuse(TypeError, "ints")})
    assert [(n, type(e).__name__) for n, e in got] == [("bad size", "ValueError"), ("bad type", "TypeError")]
    assert capsys.readouterr().out.splitlines() == ["bad size: ValueError: size must be 4", "bad type: TypeError: ints"]
    with pytest.raises(AssertionError, match="fine was accepted"):
        notebook.refusals({"fine": lambda: None})
    with pytest.raises(KeyError):                        # not a caller's mistake: not caught
        notebook.refusals({"broken": refuse(KeyError, "x")})
    assert notebook.refusals({"k": refuse(KeyError, "x")}, (KeyError,))[0][0] == "k"


@pytest.mark.parametrize("K", [512, 4096])
def test_per_tile_reads_chapter_6s_recorded_timelines(K):
    """The recorded H200 timelines: at K = 512 the trace keeps whole tiles, and the tile estimated from its parts
    (K steps x K step + epilogue) agrees with the measured one; at K = 4096 a warp keeps less than a tile."""
    tr = traces.load(results.RESULTS / "h200" / f"timeline_hopper_matmul_k{K}.json")
    t = hm.per_tile(tr, K)
    assert t["k_steps"] == K // hm.CONFIG["block_k"] and t["step"] > 0 and 0 < t["epilogue"] < t["estimate"]
    if K == 512:
        assert t["measured"] and abs(t["estimate"] / t["measured"] - 1) < 0.1, t
    else:
        assert t["measured"] is None and t["kept"] < t["k_steps"], t
    assert hm.per_tile(tr, K, block_k=32)["k_steps"] == K // 32
