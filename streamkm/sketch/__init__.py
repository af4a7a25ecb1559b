"""Feature sketching for high-dimensional streams: random projection, approximate SVD, leverage-score selection (seed 000)."""
