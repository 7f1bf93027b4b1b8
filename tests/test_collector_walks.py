"""What the garbage collector walks while a heavy answer is read and released (issue 27).

Its passes hold every thread, the event loop's included, for as long as they walk: a
list of 182,000 rows, or the exponential mechanism's lists of 364,001 ints, made each
pass take 8-16 ms. A result's rows are kept in chunks (proxy/pgwire/backend.py RowList),
a sequence like a list whose passes walk one entry per chunk, and a quantile is drawn
over int64 arrays, which the collector does not walk (mechanisms/exponential.py)."""

from __future__ import annotations

import gc

import pytest

from mechanisms.exponential import quantile_from_counts, quantile_grid
from mechanisms.random_source import SecureRandomSource
from proxy.pgwire.backend import ROWS_PER_CHUNK, RowList

pytestmark = pytest.mark.unit


def _rows(count: int) -> RowList:
    rows = RowList()
    for number in range(count):
        rows.append((str(number).encode(), None))
    return rows


@pytest.mark.parametrize("count", [0, 1, ROWS_PER_CHUNK, 2 * ROWS_PER_CHUNK + 5])
def test_a_row_list_reads_like_the_list_of_its_rows(count: int) -> None:
    rows = _rows(count)
    expected = [(str(number).encode(), None) for number in range(count)]
    assert len(rows) == count and list(rows) == expected
    assert [rows[i] for i in range(count)] == expected
    assert [rows[-i] for i in range(1, count + 1)] == [expected[-i] for i in range(1, count + 1)]
    assert rows[1:3] == expected[1:3] and bool(rows) == bool(count)
    for index in (count, -count - 1):
        with pytest.raises(IndexError):
            rows[index]


def test_the_collector_walks_chunks_not_rows() -> None:
    rows = _rows(3 * ROWS_PER_CHUNK + 7)
    # A tuple is left untracked once the collector finds only untracked items in it: a
    # chunk the pass reorders before some of its rows is left at the next pass.
    gc.collect()
    gc.collect()
    # The list of chunks and the rows since the last one (beside the RowList type).
    containers = [entry for entry in gc.get_referents(rows) if isinstance(entry, list)]
    walked = gc.get_referents(*containers)
    assert len(walked) == 3 + 7
    assert not any(gc.is_tracked(entry) for entry in walked)


def test_dropping_chunks_empties_it_from_the_end() -> None:
    rows = _rows(2 * ROWS_PER_CHUNK + 1)
    assert rows.drop_chunk() and len(rows) == 2 * ROWS_PER_CHUNK
    assert rows.drop_chunk() and len(rows) == ROWS_PER_CHUNK
    assert not rows.drop_chunk() and len(rows) == 0
    assert not rows.drop_chunk()


class _Watching(SecureRandomSource):
    """The secure source, noting at each draw the longest container the collector
    tracks (the quantile's lists are all built by the first draw)."""

    def __init__(self) -> None:
        super().__init__()
        self.longest = 0

    def randbelow(self, n: int) -> int:
        gc.collect()  # what the collector still tracks after a pass
        self.longest = max([self.longest] + [len(o) for o in gc.get_objects()
                                             if type(o) in (list, tuple, dict)])
        return super().randbelow(n)


def test_a_quantile_over_many_points_is_drawn_over_nothing_the_collector_walks() -> None:
    points = 50_000
    grid = quantile_grid(0, points)
    source = _Watching()
    quantile_from_counts({i: 1 + i % 3 for i in range(0, points, 2)}, 0.5, grid, 1.0, source)
    assert 0 < source.longest < points
