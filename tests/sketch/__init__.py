"""Tests of streamkm.sketch: the sketchers (projection, SVD, leverage scores) and the sketch
pipeline."""
